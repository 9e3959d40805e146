package zitadeltest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/interop/suite"
	"github.com/terdut-server/terdut-server/test/interop/zitadeltest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}

// me is the user GET /api/me shows.
type me struct {
	ID       int64
	Username string
	Email    string
	Role     store.Role
	Kind     store.Kind
	SSO      bool
}

// mustMe returns the user a session cookie stands for on srv, failing unless /api/me answers 200.
func mustMe(t *testing.T, srv *apitest.Server, c *http.Cookie) me {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /api/me: got %d %s, want 200", resp.Status, resp.Body)
	}
	var body struct{ User me }
	resp.JSON(t, &body)
	return body.User
}

func count(t *testing.T, srv *apitest.Server, query string) int {
	t.Helper()
	return suite.Count(t, srv, query)
}

var publicURL = suite.PublicURL

// The interop tests sign in through an OpenID provider this repository did not write, the
// OP of github.com/zitadel/oidc (test/interop/zitadeltest), with the settings people use with
// real providers.

// newZitadel starts a zitadel OP and one instance signing in through it, claimed.
func newZitadel(t *testing.T, opts zitadeltest.Options, mutate func(*api.OIDCOptions)) (*apitest.Server, *zitadeltest.Provider) {
	t.Helper()
	opts.RedirectURI = publicURL.JoinPath("/auth/oidc/callback").String()
	p := zitadeltest.New(t, opts)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.PublicURL = publicURL
		o.OIDC = &api.OIDCOptions{Issuer: p.URL(), ClientID: p.ClientID, ClientSecret: p.ClientSecret, GroupsClaim: "groups"}
		if mutate != nil {
			mutate(o.OIDC)
		}
	})
	srv.MustClaim(t)
	return srv, p
}

// keycloakRoles is a Keycloak-style nested realm roles claim.
func keycloakRoles(roles ...string) map[string]any {
	return map[string]any{"realm_access": map[string]any{"roles": roles}}
}

func TestInterop_ZitadelModes(t *testing.T) {
	// Keycloak-style nested roles decide admission and the admin role.
	groups := func(o *api.OIDCOptions) {
		o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "realm_access.roles", []string{"terdut-user"}, []string{"terdut-admin"}
	}
	people := []zitadeltest.User{
		{Subject: "sub-ada", Username: "ada", Name: "Ada L", Email: "ada@example.test", EmailVerified: true,
			Claims: keycloakRoles("offline_access", "terdut-user", "terdut-admin")},
		{Subject: "sub-bo", Username: "bo", Email: "bo@example.test", EmailVerified: true, Claims: keycloakRoles("terdut-user")},
		{Subject: "sub-cy", Username: "cy", Email: "cy@example.test", EmailVerified: true, Claims: keycloakRoles("contractor")},
	}
	want := map[string]me{
		"sub-ada": {Username: "ada", Email: "ada@example.test", Role: store.RoleAdmin, Kind: store.KindHuman, SSO: true},
		"sub-bo":  {Username: "bo", Email: "bo@example.test", Role: store.RoleMember, Kind: store.KindHuman, SSO: true},
	}
	results := map[bool]map[string]me{}
	for _, inIDToken := range []bool{true, false} {
		name := map[bool]string{true: "ClaimsInIDToken", false: "ClaimsOnlyInUserInfo"}[inIDToken]
		t.Run(name, func(t *testing.T) {
			srv, p := newZitadel(t, zitadeltest.Options{ClaimsInIDToken: inIDToken}, groups)
			for _, u := range people {
				p.AddUser(u)
			}
			got := map[string]me{}
			for sub, w := range want {
				u := mustMe(t, srv, srv.MustSignInOIDC(t, p, sub))
				w.ID = u.ID
				if u != w {
					t.Errorf("%s: got %+v, want %+v", sub, u, w)
				}
				u.ID = 0
				got[sub] = u
			}
			results[inIDToken] = got
			// UserInfo is asked only when the ID token lacks claims: once a sign-in then.
			wantAnswers := int64(len(want))
			if inIDToken {
				wantAnswers = 0
			}
			if n := p.UserInfoAnswers(); n != wantAnswers {
				t.Errorf("UserInfo answers: got %d, want %d", n, wantAnswers)
			}

			resp, err := srv.SignInOIDC(t.Context(), p, "sub-cy")
			if err != nil || resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
				t.Errorf("sub-cy, not in terdut-user: got %d %s (%v), want 403 group_not_allowed", resp.Status, resp.Body, err)
			}
			if n := count(t, srv, `SELECT count(*) FROM users WHERE oidc_subject = 'sub-cy'`); n != 0 {
				t.Errorf("users for the refused sub-cy: got %d, want 0", n)
			}
		})
	}
	if a, b := results[true], results[false]; len(a) != len(want) || len(b) != len(want) ||
		a["sub-ada"] != b["sub-ada"] || a["sub-bo"] != b["sub-bo"] {
		t.Errorf("the two modes disagree: ID token %+v, UserInfo only %+v", a, b)
	}
}

func TestInterop_ZitadelClaims(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*api.OIDCOptions)
		user   zitadeltest.User
		want   me // Username "": a generated user- name
	}{
		{"StringGroups", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "role", []string{"sre", "dev"}, []string{"sre"}
		}, zitadeltest.User{Username: "sol", Email: "sol@example.test", EmailVerified: true, Claims: map[string]any{"role": "sre"}},
			me{Username: "sol", Email: "sol@example.test", Role: store.RoleAdmin}},
		{"ClientRoles", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups = "resource_access.terdut.roles", []string{"oncall"}
		}, zitadeltest.User{Username: "oli", Claims: map[string]any{"resource_access": map[string]any{
			"terdut": map[string]any{"roles": []string{"oncall"}}}}},
			me{Username: "oli", Role: store.RoleMember}},
		{"CustomUsernameClaim", func(o *api.OIDCOptions) { o.UsernameClaim = "nickname" },
			zitadeltest.User{Username: "not-this", Email: "nick@example.test", EmailVerified: true, Claims: map[string]any{"nickname": "nicky"}},
			me{Username: "nicky", Email: "nick@example.test", Role: store.RoleMember}},
		{"CognitoEmailVerifiedString", nil,
			zitadeltest.User{Email: "cog@example.test", EmailVerified: "true"},
			me{Username: "cog@example.test", Email: "cog@example.test", Role: store.RoleMember}},
		{"EmailVerifiedMissing", nil,
			zitadeltest.User{Email: "maybe@example.test"},
			me{Email: "maybe@example.test", Role: store.RoleMember}},
		{"EmailVerifiedFalse", nil,
			zitadeltest.User{Email: "fake@example.test", EmailVerified: false},
			me{Role: store.RoleMember}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Claims only in UserInfo: the harder of the two modes.
			srv, p := newZitadel(t, zitadeltest.Options{}, tc.mutate)
			tc.user.Subject = "sub-" + strings.ToLower(tc.name)
			p.AddUser(tc.user)
			got := mustMe(t, srv, srv.MustSignInOIDC(t, p, tc.user.Subject))
			w := tc.want
			w.ID, w.Kind, w.SSO = got.ID, store.KindHuman, true
			if w.Username == "" && strings.HasPrefix(got.Username, "user-") {
				w.Username = got.Username
			}
			if got != w {
				t.Errorf("got %+v, want %+v", got, w)
			}
		})
	}
}

func TestInterop_ZitadelRename(t *testing.T) {
	srv, p := newZitadel(t, zitadeltest.Options{}, nil)
	other := apitest.MustPerson(t, srv.Store, "olga", store.RoleMember)
	signIn := func(username string) me {
		p.AddUser(zitadeltest.User{Subject: "sub-ren", Username: username, Email: "ren@example.test", EmailVerified: true})
		return mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-ren"))
	}
	first := signIn("ren")
	if renamed := signIn("renata"); renamed.ID != first.ID || renamed.Username != "renata" {
		t.Errorf("renamed at the provider: got %+v, want user %d as renata", renamed, first.ID)
	}
	if kept := signIn("olga"); kept.ID != first.ID || kept.Username != "renata" {
		t.Errorf("renamed to another user's name: got %+v, want user %d keeping renata", kept, first.ID)
	}
	if u, err := srv.Store.User(t.Context(), other.User.ID); err != nil || u.Username != "olga" {
		t.Errorf("olga: got %+v, %v, want her name kept", u, err)
	}
	if !strings.Contains(srv.Logs.String(), "belongs to another user") {
		t.Errorf("the log does not say why the name was kept:\n%s", srv.Logs.String())
	}
}

func TestInterop_ZitadelIssuerMismatch(t *testing.T) {
	const issuer = "https://zitadel.example.test"
	srv, p := newZitadel(t, zitadeltest.Options{Issuer: issuer}, nil)
	p.AddUser(zitadeltest.User{Subject: "sub-ada", Username: "ada"})
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
	msg := string(resp.Body)
	if resp.Status != http.StatusInternalServerError || resp.Code() != "sso_misconfigured" ||
		!strings.Contains(msg, "--oidc-issuer") || !strings.Contains(msg, p.URL()) || !strings.Contains(msg, issuer) {
		t.Errorf("login: got %d %s, want 500 sso_misconfigured naming --oidc-issuer, %s and %s", resp.Status, msg, p.URL(), issuer)
	}
	ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
	if ready.Status != http.StatusServiceUnavailable || strings.Contains(string(ready.Body), issuer) ||
		!strings.Contains(srv.Logs.String(), `"reason":"sso_wrong_issuer"`) {
		t.Errorf("readyz: got %d %s, want 503 without the reason, and the log naming it", ready.Status, ready.Body)
	}
}
