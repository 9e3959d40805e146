package api_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// TestPrincipal_KeysOnlyThroughClaims: the bootstrap principal acts only through the keys its
// claims issue. An admin can neither mint one (and act as the operator), list them, nor revoke
// them (and force a reset); so a reset while pending revokes nothing.
func TestPrincipal_KeysOnlyThroughClaims(t *testing.T) {
	srv := newServer(t)
	key := srv.MustClaim(t)
	admin := apitest.MustPerson(t, srv.Store, "ops-admin", store.RoleAdmin)
	b, err := srv.Store.Bootstrap(context.Background())
	if err != nil || b.PrincipalID == nil {
		t.Fatalf("bootstrap: got %+v, %v, want a principal", b, err)
	}
	keys := "/api/users/" + strconv.FormatInt(*b.PrincipalID, 10) + "/api-keys"
	keyID := int64(1)
	for name, req := range map[string]apitest.Request{
		"Create": {Method: http.MethodPost, Path: keys, Body: map[string]string{"name": "mine now"}},
		"List":   {Method: http.MethodGet, Path: keys},
		"Revoke": {Method: http.MethodDelete, Path: keys + "/" + strconv.FormatInt(keyID, 10)},
	} {
		req.Bearer = admin.APIKey
		if resp := srv.MustDo(t, req); resp.Status != http.StatusForbidden || resp.Code() != "service_user" {
			t.Errorf("%s as an admin: got %d %s, want 403 service_user", name, resp.Status, resp.Body)
		}
	}
	if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: keys, Bearer: key}).Status; got != http.StatusOK {
		t.Errorf("the principal listing its own keys: got %d, want 200", got)
	}
	if got := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key}).Status; got != http.StatusOK {
		t.Errorf("the claim's key after the refused revoke: got %d, want 200", got)
	}
	var body struct {
		RevokedAPIKeys int64 `json:"revoked_api_keys"`
	}
	for i, want := range []int64{1, 0} {
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken})
		resp.JSON(t, &body)
		if resp.Status != http.StatusOK || body.RevokedAPIKeys != want {
			t.Errorf("reset %d: got %d revoked %d, want 200 revoked %d", i+1, resp.Status, body.RevokedAPIKeys, want)
		}
	}
}

// TestSSOUsers_NoPassword: an SSO account signs in only through its provider, whose group
// rules and roles a password would get around once the provider removed the person.
func TestSSOUsers_NoPassword(t *testing.T) {
	srv, p := newOIDCServer(t, nil)
	srv.MustClaim(t)
	cookie := srv.MustSignInOIDC(t, p, "alice")
	u := mustMe(t, srv, cookie)
	admin := apitest.MustPerson(t, srv.Store, "ops-admin", store.RoleAdmin)
	path := "/api/users/" + strconv.FormatInt(u.ID, 10) + "/password"
	for name, req := range map[string]apitest.Request{
		"Self":  {Cookie: cookie},
		"Admin": {Bearer: admin.APIKey},
	} {
		req.Method, req.Path, req.Body = http.MethodPut, path, map[string]string{"password": "a-long-password"}
		if resp := srv.MustDo(t, req); resp.Status != http.StatusForbidden || resp.Code() != "sso_user" {
			t.Errorf("%s setting an SSO user's password: got %d %s, want 403 sso_user", name, resp.Status, resp.Body)
		}
	}
	// Even a hash written behind the API's back does not open password sign-in.
	hash, _ := bcrypt.GenerateFromPassword([]byte("a-long-password"), bcrypt.MinCost)
	if err := srv.Store.SetPasswordHash(context.Background(), u.ID, string(hash), ""); err != nil {
		t.Fatal(err)
	}
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": u.Username, "password": "a-long-password"}})
	if resp.Status != http.StatusUnauthorized || resp.Code() != "invalid_credentials" {
		t.Errorf("password sign-in of an SSO user: got %d %s, want 401 invalid_credentials", resp.Status, resp.Body)
	}
}
