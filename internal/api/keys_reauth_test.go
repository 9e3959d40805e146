package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestAPIKeys_PasswordSessionNeedsCurrentPassword: a key outlives the session that makes it,
// so a password session must send its person's current password, checked on the sign-in
// guessing count; an API key makes keys as before.
func TestAPIKeys_PasswordSessionNeedsCurrentPassword(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.LoginLimit = store.RateLimit{Max: 3, Window: time.Hour}
	})
	srv.MustClaim(t)
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	admin := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	cookie := srv.MustLogin(t, "pat", pat.Password)
	keys := func() int { return count(t, srv, `SELECT count(*) FROM api_keys WHERE user_id = $1`, pat.User.ID) }
	post := func(req apitest.Request, body map[string]string) apitest.Response {
		req.Method, req.Path, req.Body = http.MethodPost, userURL(pat.User.ID, "/api-keys"), body
		return srv.MustDo(t, req)
	}
	before := keys()

	wantAPIError(t, post(apitest.Request{Cookie: cookie}, map[string]string{"name": "stolen"}), http.StatusForbidden, "current_password_required")
	wantAPIError(t, post(apitest.Request{Cookie: cookie}, map[string]string{"name": "stolen", "current_password": "guess-1"}),
		http.StatusForbidden, "wrong_current_password")
	if n := keys(); n != before {
		t.Fatalf("keys after refused requests: got %d, want %d", n, before)
	}
	resp := post(apitest.Request{Cookie: cookie}, map[string]string{"name": "laptop", "current_password": pat.Password})
	wantStatus(t, resp, http.StatusCreated)
	var k keyWithExpiry
	resp.JSON(t, &k)
	if id, status := whoAmIOn(t, srv, k.Key); id != pat.User.ID || status != http.StatusOK {
		t.Fatalf("the key made with the password: got user %d, %d, want %d, 200", id, status, pat.User.ID)
	}
	// API keys, of the person or of an admin, need no password.
	wantStatus(t, post(apitest.Request{Bearer: pat.APIKey}, map[string]string{"name": "ci"}), http.StatusCreated)
	wantStatus(t, post(apitest.Request{Bearer: admin.APIKey}, map[string]string{"name": "by-admin"}), http.StatusCreated)

	// An admin's password session needs the admin's own password, also for another's key.
	adminCookie := srv.MustLogin(t, "root", admin.Password)
	wantAPIError(t, post(apitest.Request{Cookie: adminCookie}, map[string]string{"name": "x", "current_password": pat.Password}),
		http.StatusForbidden, "wrong_current_password")
	wantStatus(t, post(apitest.Request{Cookie: adminCookie}, map[string]string{"name": "x", "current_password": admin.Password}),
		http.StatusCreated)

	// Guesses count with sign-in's: two wrong here, one above, and the right one is refused.
	for range 2 {
		wantAPIError(t, post(apitest.Request{Cookie: cookie}, map[string]string{"name": "x", "current_password": "guess"}),
			http.StatusForbidden, "wrong_current_password")
	}
	wantAPIError(t, post(apitest.Request{Cookie: cookie}, map[string]string{"name": "x", "current_password": pat.Password}),
		http.StatusTooManyRequests, "rate_limited")
	if resp := login(t, srv, "pat", pat.Password, nil); resp.Status != http.StatusTooManyRequests {
		t.Errorf("sign-in after three wrong current passwords: got %d, want 429", resp.Status)
	}
}

// TestAPIKeys_SSOSessionNeedsRecentSignIn: a single sign-on session makes keys only within
// the sign-in window of the person's authentication at the provider; signing in again opens
// it; the person's API key makes keys as before.
func TestAPIKeys_SSOSessionNeedsRecentSignIn(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.SSOKeySignInWindow = 10 * time.Minute })
	srv.MustClaim(t)
	session := srv.MustSignInOIDC(t, p, "alice")
	alice := mustMe(t, srv, session)
	key := mustCreateKeyAs(t, srv, alice.ID, session, map[string]string{"name": "fresh"})

	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE sessions SET authenticated_at = now() - interval '11 minutes'
		WHERE user_id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	before := count(t, srv, `SELECT count(*) FROM api_keys WHERE user_id = $1`, alice.ID)
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(alice.ID, "/api-keys"), Cookie: session,
		Body: map[string]string{"name": "stale"}})
	wantAPIError(t, resp, http.StatusForbidden, "recent_sign_in_required")
	if n := count(t, srv, `SELECT count(*) FROM api_keys WHERE user_id = $1`, alice.ID); n != before {
		t.Fatalf("keys after the refusal: got %d, want %d", n, before)
	}
	wantStatus(t, postKey(t, srv, alice.ID, key.Key, map[string]string{"name": "from-key"}), http.StatusCreated)
	mustCreateKeyAs(t, srv, alice.ID, srv.MustSignInOIDC(t, p, "alice"), map[string]string{"name": "signed-in-again"})
}

// TestAPIKeys_SSOCapFollowsLastSignIn: with a one-hour cap, a key minted from a key 40 minutes
// after the sign-in expires with the first, an hour after the sign-in, not an hour after its
// own making; an expires_at past that is refused. A new single sign-on extends what new keys
// may get. (The clock is moved by moving the sign-in back.)
func TestAPIKeys_SSOCapFollowsLastSignIn(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.SSOAPIKeyMaxTTL = time.Hour })
	srv.MustClaim(t)
	session := srv.MustSignInOIDC(t, p, "alice")
	alice := mustMe(t, srv, session)
	k1 := mustCreateKeyAs(t, srv, alice.ID, session, map[string]string{"name": "k1"})
	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE users SET last_sso_at = last_sso_at - interval '40 minutes'
		WHERE id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	resp := postKey(t, srv, alice.ID, k1.Key, map[string]string{"name": "k2"})
	wantStatus(t, resp, http.StatusCreated)
	var k2 keyWithExpiry
	resp.JSON(t, &k2)
	if k2.ExpiresAt == nil || time.Until(*k2.ExpiresAt) > 21*time.Minute {
		t.Fatalf("k2, minted from k1 40 minutes after the sign-in: got expires_at %v (in %v), want within 20 minutes",
			k2.ExpiresAt, time.Until(*k2.ExpiresAt))
	}
	late := time.Now().Add(30 * time.Minute).UTC().Format(time.RFC3339)
	wantAPIError(t, postKey(t, srv, alice.ID, k2.Key, map[string]string{"name": "late", "expires_at": late}),
		http.StatusBadRequest, "expires_at_too_late")

	// Another sign-in: keys may again live an hour, whichever credential makes them.
	srv.MustSignInOIDC(t, p, "alice")
	resp = postKey(t, srv, alice.ID, k2.Key, map[string]string{"name": "k3"})
	wantStatus(t, resp, http.StatusCreated)
	var k3 keyWithExpiry
	resp.JSON(t, &k3)
	if k3.ExpiresAt == nil || time.Until(*k3.ExpiresAt) < 59*time.Minute {
		t.Fatalf("k3, after a new sign-in: got expires_at %v, want an hour from now", k3.ExpiresAt)
	}
	wantStatus(t, postKey(t, srv, alice.ID, k2.Key, map[string]string{"name": "later", "expires_at": late}), http.StatusCreated)

	// Past the cap since the last sign-in, no key can be made for the person, not even by an admin.
	admin := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE users SET last_sso_at = now() - interval '61 minutes'
		WHERE id = $1`, alice.ID); err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, postKey(t, srv, alice.ID, admin.APIKey, map[string]string{"name": "for-alice"}),
		http.StatusForbidden, "sso_sign_in_required")
}

// TestPasswords_RevokeAPIKeys: a password change revokes the person's API keys when asked to
// (revoke_api_keys), so that a key made with a stolen session dies with it; without it, they
// stay.
func TestPasswords_RevokeAPIKeys(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	admin := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	cookie := srv.MustLogin(t, "pat", pat.Password)
	put := func(req apitest.Request, body map[string]any) {
		t.Helper()
		req.Method, req.Path, req.Body = http.MethodPut, userURL(pat.User.ID, "/password"), body
		wantStatus(t, srv.MustDo(t, req), http.StatusNoContent)
	}
	alive := func(key string) bool {
		_, status := whoAmIOn(t, srv, key)
		return status == http.StatusOK
	}

	put(apitest.Request{Cookie: cookie}, map[string]any{"password": "second-password", "current_password": pat.Password})
	if !alive(pat.APIKey) {
		t.Fatalf("pat's key after a change without revoke_api_keys: got 401, want it alive")
	}
	put(apitest.Request{Cookie: cookie}, map[string]any{"password": "third-password", "current_password": "second-password",
		"revoke_api_keys": true})
	if alive(pat.APIKey) {
		t.Errorf("pat's key after a change with revoke_api_keys: got 200, want 401")
	}
	if got := mustMe(t, srv, cookie); got.ID != pat.User.ID {
		t.Errorf("the changing session: got %+v, want pat still signed in", got)
	}

	// An admin setting the password can revoke the keys too; the admin's own stay.
	k := mustCreateKeyAs(t, srv, pat.User.ID, cookie, map[string]string{"name": "new", "current_password": "third-password"})
	put(apitest.Request{Bearer: admin.APIKey}, map[string]any{"password": "fourth-password", "revoke_api_keys": true})
	if alive(k.Key) || !alive(admin.APIKey) {
		t.Errorf("after the admin's change with revoke_api_keys: pat's key alive %v, the admin's %v, want false, true",
			alive(k.Key), alive(admin.APIKey))
	}
	if n := count(t, srv, `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL`, pat.User.ID); n != 0 {
		t.Errorf("pat's live keys: got %d, want 0", n)
	}
}

// TestPrincipal_CannotMintForItself: the bootstrap principal's key cannot make it another: its
// keys are the ones its claims issue.
func TestPrincipal_CannotMintForItself(t *testing.T) {
	p := oidctest.NewProvider(t)
	srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, nil)[0]
	key := srv.MustClaim(t)
	id, _ := whoAmIOn(t, srv, key)
	wantAPIError(t, postKey(t, srv, id, key, map[string]string{"name": "mine"}), http.StatusForbidden, "keys_only_from_claim")
	if n := count(t, srv, `SELECT count(*) FROM api_keys WHERE user_id = $1`, id); n != 1 {
		t.Errorf("the principal's keys: got %d, want the claim's alone", n)
	}
}
