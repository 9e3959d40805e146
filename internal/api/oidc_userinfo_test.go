package api_test

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// withGroupRules admits the group "users" and makes "ops-admins" admins.
func withGroupRules(o *api.Options) {
	o.OIDC.AllowedGroups, o.OIDC.AdminGroups = []string{"users"}, []string{"ops-admins"}
}

// newUserInfoServer starts a provider, lets setup shape it before the instance discovers it
// (the discovery document is read once), and starts one claimed instance on a fresh database.
// The provider knows zoe, an admin whose ID token carries every claim.
func newUserInfoServer(t *testing.T, setup func(p *oidctest.Provider), mutate func(*api.Options)) (*apitest.Server, *oidctest.Provider) {
	t.Helper()
	p := oidctest.NewProvider(t)
	p.AddUser(oidctest.User{Subject: "sub-zoe", PreferredUsername: "zoe", Email: "zoe@example.test",
		Groups: []string{"users", "ops-admins"}})
	if setup != nil {
		setup(p)
	}
	// A UserInfo that setup moved elsewhere is on an origin the administrator names.
	var doc struct {
		UserInfo string `json:"userinfo_endpoint"`
	}
	resp, err := http.Get(p.URL() + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, func(o *api.Options) {
		if u, err := url.Parse(doc.UserInfo); err == nil && u.Host != "" {
			o.OIDC.EndpointOrigins = []string{u.Scheme + "://" + u.Host}
		}
		if mutate != nil {
			mutate(o)
		}
	})[0]
	srv.MustClaim(t)
	return srv, p
}

// closedURL returns a loopback URL at which nothing listens.
func closedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return "http://" + addr + "/userinfo"
}

// zoe is who zoe must be after any sign-in below.
func checkZoe(t *testing.T, srv *apitest.Server, c *http.Cookie) {
	t.Helper()
	got := mustMe(t, srv, c)
	want := me{ID: got.ID, Username: "zoe", Email: "zoe@example.test", Role: store.RoleAdmin, Kind: store.KindHuman, SSO: true}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestOIDC_UserInfoOnlyWhenNeeded(t *testing.T) {
	t.Run("ClaimsInIDToken", func(t *testing.T) {
		// The ID token has the username, the e-mail and its verification, and the groups:
		// UserInfo is not asked, so whatever state it is in does not matter.
		for _, tc := range []struct {
			name  string
			setup func(t *testing.T, p *oidctest.Provider)
		}{
			{"UserInfoRefusesTheToken", func(t *testing.T, p *oidctest.Provider) { p.SetUserInfoRefusesTokens(true) }},
			{"UserInfoDown", func(t *testing.T, p *oidctest.Provider) { p.SetUserInfoEndpoint(closedURL(t)) }},
			{"NoUserInfoInDiscovery", func(t *testing.T, p *oidctest.Provider) { p.SetUserInfoEndpoint("") }},
			{"UserInfoAboutAnotherSubject", func(t *testing.T, p *oidctest.Provider) {
				// Never read, so never checked: the ID token alone is who signs in.
				p.NextUserInfoOverride(func(c map[string]any) { c["sub"] = "someone-else" })
			}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv, p := newUserInfoServer(t, func(p *oidctest.Provider) { tc.setup(t, p) }, withGroupRules)
				checkZoe(t, srv, srv.MustSignInOIDC(t, p, "sub-zoe"))
				if n := p.UserInfoRequests(); n != 0 {
					t.Errorf("UserInfo requests: got %d, want 0", n)
				}
			})
		}
	})

	t.Run("GroupsUnreadWithoutGroupRules", func(t *testing.T) {
		// Without AllowedGroups or AdminGroups the groups claim decides nothing: its absence
		// from the ID token is no reason to ask a UserInfo that refuses the token.
		srv, p := newUserInfoServer(t, func(p *oidctest.Provider) { p.SetUserInfoRefusesTokens(true) }, nil)
		f := srv.MustStartOIDC(t, p, "sub-zoe")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "groups") })
		c := mustFinishSSO(t, srv, f)
		if got := mustMe(t, srv, c); got.Username != "zoe" || got.Role != store.RoleMember {
			t.Errorf("got %+v, want zoe, a member", got)
		}
		if n := p.UserInfoRequests(); n != 0 {
			t.Errorf("UserInfo requests: got %d, want 0", n)
		}
	})

	t.Run("ClaimsSplit", func(t *testing.T) {
		// Each claim the ID token lacks comes from UserInfo, asked once; the rest stays the
		// ID token's.
		for _, missing := range []string{"preferred_username", "email", "email_verified", "groups"} {
			t.Run(missing, func(t *testing.T) {
				srv, p := newUserInfoServer(t, nil, withGroupRules)
				f := srv.MustStartOIDC(t, p, "sub-zoe")
				p.NextTokenOverride(func(c map[string]any) { delete(c, missing) })
				c := mustFinishSSO(t, srv, f)
				checkZoe(t, srv, c)
				if n := p.UserInfoRequests(); n != 1 {
					t.Errorf("UserInfo requests: got %d, want 1", n)
				}
			})
		}
	})

	t.Run("ClaimsSplitCustomNames", func(t *testing.T) {
		// The username and groups claims are the configured ones, dotted paths included.
		srv, p := newUserInfoServer(t, func(p *oidctest.Provider) {
			p.AddUser(oidctest.User{Subject: "sub-kim", Email: "kim@example.test", ExtraClaims: map[string]any{
				"nickname": "kim", "realm_access": map[string]any{"roles": []string{"users", "ops-admins"}}}})
		}, func(o *api.Options) {
			withGroupRules(o)
			o.OIDC.UsernameClaim, o.OIDC.GroupsClaim = "nickname", "realm_access.roles"
		})
		f := srv.MustStartOIDC(t, p, "sub-kim")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "realm_access") })
		c := mustFinishSSO(t, srv, f)
		if got := mustMe(t, srv, c); got.Username != "kim" || got.Role != store.RoleAdmin {
			t.Errorf("got %+v, want kim, an admin by UserInfo's realm_access.roles", got)
		}
		if n := p.UserInfoRequests(); n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1", n)
		}
	})

	t.Run("NeededAndFailing", func(t *testing.T) {
		// A claim is missing and UserInfo cannot give it: the sign-in fails as it always did.
		for _, tc := range []struct {
			name   string
			setup  func(t *testing.T, p *oidctest.Provider)
			status int
			code   string
		}{
			{"RefusesTheToken", func(t *testing.T, p *oidctest.Provider) { p.SetUserInfoRefusesTokens(true) },
				http.StatusBadGateway, "sso_userinfo_failed"},
			{"Down", func(t *testing.T, p *oidctest.Provider) { p.SetUserInfoEndpoint(closedURL(t)) },
				http.StatusBadGateway, "sso_userinfo_failed"},
			{"AboutAnotherSubject", func(t *testing.T, p *oidctest.Provider) {
				p.NextUserInfoOverride(func(c map[string]any) { c["sub"] = "someone-else" })
			}, http.StatusUnauthorized, "invalid_userinfo"},
			{"WithoutSubject", func(t *testing.T, p *oidctest.Provider) {
				p.NextUserInfoOverride(func(c map[string]any) { delete(c, "sub") })
			}, http.StatusUnauthorized, "invalid_userinfo"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				srv, p := newUserInfoServer(t, func(p *oidctest.Provider) { tc.setup(t, p) }, withGroupRules)
				f := srv.MustStartOIDC(t, p, "sub-zoe")
				// Only whether the e-mail is verified is missing: the smallest need still reads
				// UserInfo, and reading it checks its subject.
				p.NextTokenOverride(func(c map[string]any) { delete(c, "email_verified") })
				before := countSignIns(t, srv)
				resp := srv.MustDo(t, f.Request())
				if resp.Status != tc.status || resp.Code() != tc.code {
					t.Errorf("got %d %s, want %d %s", resp.Status, resp.Body, tc.status, tc.code)
				}
				if resp.Cookie("terdut_session") != nil {
					t.Error("got a session cookie, want none")
				}
				if after := countSignIns(t, srv); after != before {
					t.Errorf("users, sessions, SSO users: got %+v, want %+v as before", after, before)
				}
			})
		}
	})
}

// mustFinishSSO completes the sign-in f and returns its session cookie; anything but a
// redirect with a session fails the test.
func mustFinishSSO(t *testing.T, srv *apitest.Server, f apitest.OIDCFlow) *http.Cookie {
	t.Helper()
	resp := srv.MustDo(t, f.Request())
	c := resp.Cookie("terdut_session")
	if resp.Status != http.StatusSeeOther || c == nil {
		t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
	}
	return c
}

// TestOIDC_ClaimsNotMixed: each claim the sign-in reads is resolved at its path in the ID
// token, and in UserInfo only where the ID token lacks it. A UserInfo answer (asked for here
// because the ID token lacks the e-mail) carrying a flat key literally named like the groups
// path, "realm_access.roles", neither overrides nor shadows the ID token's nested roles.
func TestOIDC_ClaimsNotMixed(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) {
		o.OIDC.GroupsClaim, o.OIDC.AllowedGroups, o.OIDC.AdminGroups = "realm_access.roles", []string{"user", "admin"}, []string{"admin"}
	})
	srv.MustClaim(t)
	p.AddUser(oidctest.User{Subject: "sub-kim", PreferredUsername: "kim", Email: "kim@example.test",
		ExtraClaims: map[string]any{"realm_access": map[string]any{"roles": []string{"user"}}}})
	f := srv.MustStartOIDC(t, p, "sub-kim")
	p.NextTokenOverride(func(c map[string]any) { delete(c, "email") })
	p.NextUserInfoOverride(func(c map[string]any) { c["realm_access.roles"] = []string{"admin"} })
	calls := p.UserInfoRequests()
	resp := srv.MustDo(t, f.Request())
	c := resp.Cookie("terdut_session")
	if resp.Status != http.StatusSeeOther || c == nil {
		t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
	}
	if got := mustMe(t, srv, c); got.Username != "kim" || got.Role != store.RoleMember {
		t.Errorf("got %+v, want kim, a member, as the ID token's realm_access.roles says", got)
	}
	if n := p.UserInfoRequests() - calls; n != 1 {
		t.Errorf("UserInfo requests: got %d, want 1", n)
	}
}
