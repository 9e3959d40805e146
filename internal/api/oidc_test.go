package api_test

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// count runs a SELECT count(*) query directly on srv's database.
func count(t *testing.T, srv *apitest.Server, query string, args ...any) int {
	t.Helper()
	var n int
	if err := srv.Store.Pool().QueryRow(t.Context(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// newOIDCServer starts one instance on a fresh database that signs in through a new provider.
func newOIDCServer(t *testing.T, mutate func(*api.Options)) (*apitest.Server, *oidctest.Provider) {
	t.Helper()
	p := oidctest.NewProvider(t)
	return newReplicas(t, pgtest.MustDatabase(t), 1, p, mutate)[0], p
}

// checkPending fails unless resp is the gate's refusal: 503 with Retry-After, a page for
// browsers or bootstrap_pending for API clients, and no cookie of any kind.
func checkPending(t *testing.T, what string, resp apitest.Response, html bool) {
	t.Helper()
	if resp.Status != http.StatusServiceUnavailable {
		t.Errorf("%s: got %d %s, want 503", what, resp.Status, resp.Body)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s <= 0 {
		t.Errorf("%s: got Retry-After %q, want a positive number of seconds", what, resp.Header.Get("Retry-After"))
	}
	for _, c := range resp.Cookies {
		t.Errorf("%s: got cookie %s, want none", what, c.Name)
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case html && (!strings.HasPrefix(ct, "text/html") || !strings.Contains(string(resp.Body), `id="pending"`)):
		t.Errorf("%s: got %s %s, want the pending page", what, ct, resp.Body)
	case !html && (!strings.HasPrefix(ct, "application/json") || resp.Code() != "bootstrap_pending"):
		t.Errorf("%s: got %s %s, want JSON with code bootstrap_pending", what, ct, resp.Body)
	}
}

func TestOIDC_Pending(t *testing.T) {
	p := oidctest.NewProvider(t)
	dbURL := pgtest.MustDatabase(t)
	srv := newReplicas(t, dbURL, 1, p, nil)[0]
	// The login start is gated too, so a replica with the gate off starts the flows whose
	// callbacks then reach srv while the install is pending.
	starter := newReplicas(t, dbURL, 1, p, func(o *api.Options) { o.Gate = false })[0]

	for _, tc := range []struct {
		name   string
		accept string
		html   bool
	}{{"JSON", "application/json", false}, {"HTML", "text/html,application/xhtml+xml", true}} {
		t.Run(tc.name, func(t *testing.T) {
			accept := http.Header{"Accept": {tc.accept}}
			start := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login?login_hint=alice",
				Header: accept})
			checkPending(t, "login start", start, tc.html)
			req := starter.MustStartOIDC(t, p, "alice").Request()
			req.Header = accept
			tokens := p.TokenRequests()
			checkPending(t, "callback", srv.MustDo(t, req), tc.html)
			if n := p.TokenRequests() - tokens; n != 0 {
				t.Errorf("token requests for a refused callback: got %d, want 0", n)
			}
		})
	}
	if n := count(t, srv, `SELECT count(*) FROM users`); n != 0 {
		t.Errorf("users after refused sign-ins: got %d, want 0", n)
	}
	if n := count(t, srv, `SELECT count(*) FROM sessions`); n != 0 {
		t.Errorf("sessions after refused sign-ins: got %d, want 0", n)
	}

	srv.MustClaim(t)
	if u := mustMe(t, srv, srv.MustSignInOIDC(t, p, "alice")); u.Username != "alice" {
		t.Errorf("after the claim: got user %+v, want alice", u)
	}
}

func TestOIDC_Provisioning(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.OIDC.AdminGroups = []string{"ops-admins"} })
	srv.MustClaim(t)
	add := func(sub, preferred, email string, groups ...string) {
		p.AddUser(oidctest.User{Subject: sub, PreferredUsername: preferred, Email: email, Groups: groups})
	}

	t.Run("Member", func(t *testing.T) {
		add("sub-mia", "mia", "mia@example.test", "users")
		got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-mia"))
		want := me{ID: got.ID, Username: "mia", Email: "mia@example.test", Role: store.RoleMember, Kind: store.KindHuman, SSO: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
	})

	t.Run("Admin", func(t *testing.T) {
		add("sub-ada", "ada", "ada@example.test", "users", "ops-admins")
		if got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-ada")); got.Role != store.RoleAdmin || got.Username != "ada" {
			t.Errorf("got %+v, want ada as admin", got)
		}
	})

	t.Run("UnverifiedEmailIgnored", func(t *testing.T) {
		// No preferred_username: an unverified address must not become the name or be stored.
		p.AddUser(oidctest.User{Subject: "sub-uma", Email: "boss@example.test",
			ExtraClaims: map[string]any{"email_verified": false}})
		got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-uma"))
		if got.Email != "" || strings.Contains(got.Username, "boss") || !strings.HasPrefix(got.Username, "user-") {
			t.Errorf("got %+v, want no e-mail and a generated user- name", got)
		}
	})

	t.Run("SameSubjectReusesUser", func(t *testing.T) {
		add("sub-sam", "sam", "sam@example.test")
		first := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-sam"))
		// The person's e-mail and name change at the provider; the subject keeps them one user.
		add("sub-sam", "samuel", "samuel@example.test")
		second := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-sam"))
		if second.ID != first.ID || second.Email != "samuel@example.test" {
			t.Errorf("second sign-in: got %+v, want user %d with the new e-mail", second, first.ID)
		}
		if n := count(t, srv, `SELECT count(*) FROM users WHERE oidc_subject = 'sub-sam'`); n != 1 {
			t.Errorf("users for the subject: got %d, want 1", n)
		}
		if n := count(t, srv, `SELECT count(*) FROM sessions WHERE user_id = $1`, first.ID); n != 2 {
			t.Errorf("sessions of the user: got %d, want 2", n)
		}
	})

	t.Run("SameEmailOtherSubject", func(t *testing.T) {
		add("sub-eve-1", "eve", "eve@example.test")
		add("sub-eve-2", "eve", "eve@example.test")
		a := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-eve-1"))
		b := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-eve-2"))
		if a.ID == b.ID || a.Username == b.Username {
			t.Errorf("got %+v and %+v, want two users with different names", a, b)
		}
	})

	t.Run("UsernameTaken", func(t *testing.T) {
		taken := apitest.MustPerson(t, srv.Store, "taken", store.RoleMember)
		add("sub-taken", "taken", "taken-too@example.test")
		got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-taken"))
		if got.ID == taken.User.ID || got.Username == "taken" || got.Username == "" {
			t.Errorf("got %+v, want a new user with another name than %q", got, "taken")
		}
		if c := srv.MustLogin(t, "taken", taken.Password); mustMe(t, srv, c).SSO {
			t.Errorf("the password user %q gained an SSO identity", "taken")
		}
	})

	t.Run("UsernameReserved", func(t *testing.T) {
		for i, name := range []string{store.PrincipalUsername, strings.ToUpper(store.PrincipalUsername)} {
			sub := fmt.Sprintf("sub-mallory-%d", i)
			add(sub, name, store.PrincipalEmail, "ops-admins")
			got := mustMe(t, srv, srv.MustSignInOIDC(t, p, sub))
			if strings.EqualFold(got.Username, store.PrincipalUsername) || got.Kind != store.KindHuman {
				t.Errorf("preferred %q: got %+v, want a human with a name unlike %q", name, got, store.PrincipalUsername)
			}
		}
		b, err := srv.Store.Bootstrap(t.Context())
		if err != nil || b.PrincipalID == nil {
			t.Fatalf("bootstrap state: got %+v %v, want a principal", b, err)
		}
		if n := count(t, srv, `SELECT count(*) FROM users WHERE lower(username) = $1`, store.PrincipalUsername); n != 1 {
			t.Errorf("users named like %q: got %d, want 1", store.PrincipalUsername, n)
		}
		if n := count(t, srv, `SELECT count(*) FROM users WHERE username = $1 AND kind = 'service' AND id = $2`,
			store.PrincipalUsername, *b.PrincipalID); n != 1 {
			t.Errorf("the principal %d is no longer the service user %q", *b.PrincipalID, store.PrincipalUsername)
		}
	})
}

func TestOIDC_SameSubjectOtherIssuer(t *testing.T) {
	dbURL := pgtest.MustDatabase(t)
	p1, p2 := oidctest.NewProvider(t), oidctest.NewProvider(t)
	srv1, srv2 := newReplicas(t, dbURL, 1, p1, nil)[0], newReplicas(t, dbURL, 1, p2, nil)[0]
	srv1.MustClaim(t)
	// Both providers' default user has the subject "alice": two people, as far as anyone knows.
	first := mustMe(t, srv1, srv1.MustSignInOIDC(t, p1, "alice"))
	other := mustMe(t, srv2, srv2.MustSignInOIDC(t, p2, "alice"))
	again := mustMe(t, srv1, srv1.MustSignInOIDC(t, p1, "alice"))
	if other.ID == first.ID || again.ID != first.ID {
		t.Errorf("got users %d, %d, %d, want a user for each issuer and the first again", first.ID, other.ID, again.ID)
	}
}

func TestOIDC_GateOff(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.Gate = false })
	person := apitest.MustPerson(t, srv.Store, "early", store.RoleMember)
	p.AddUser(oidctest.User{Subject: "sub-squatter", PreferredUsername: store.PrincipalUsername,
		Email: store.PrincipalEmail, Groups: []string{"users"}})

	pw := srv.MustLogin(t, "early", person.Password)
	alice := srv.MustSignInOIDC(t, p, "alice")
	squatter := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-squatter"))
	if squatter.Username == store.PrincipalUsername {
		t.Errorf("a person got the principal's name: %+v", squatter)
	}
	if b, err := srv.Store.Bootstrap(t.Context()); err != nil || b.State != store.StatePending {
		t.Fatalf("after sign-ins with the gate off: got %+v %v, want pending", b, err)
	}

	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken})
	if resp.Status != http.StatusCreated {
		t.Fatalf("claim after sign-ins: got %d %s, want 201", resp.Status, resp.Body)
	}
	var claim struct {
		User       me
		Generation int64
	}
	resp.JSON(t, &claim)
	want := me{ID: claim.User.ID, Username: store.PrincipalUsername, Email: store.PrincipalEmail,
		Role: store.RoleAdmin, Kind: store.KindService}
	if claim.User != want || claim.Generation != 1 {
		t.Errorf("claim: got %+v generation %d, want %+v generation 1", claim.User, claim.Generation, want)
	}
	for _, c := range []*http.Cookie{pw, alice} {
		if u := mustMe(t, srv, c); u.ID == claim.User.ID || u.Kind != store.KindHuman {
			t.Errorf("after the claim: got %+v, want a person apart from the principal %d", u, claim.User.ID)
		}
	}
	if n := count(t, srv, `SELECT count(*) FROM users`); n != 4 {
		t.Errorf("users: got %d, want 4 (early, alice, the squatter, the principal)", n)
	}
}

func TestOIDC_UserInfo(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.OIDC.AdminGroups = []string{"ops-admins"} })
	srv.MustClaim(t)
	p.AddUser(oidctest.User{Subject: "sub-zoe", PreferredUsername: "zoe", Email: "zoe@example.test",
		Groups: []string{"users", "ops-admins"}})

	t.Run("ClaimsOnlyInUserInfo", func(t *testing.T) {
		// As Zitadel and Okta send them: the ID token names the subject, UserInfo the rest.
		p.SetClaimsInUserInfoOnly(true)
		defer p.SetClaimsInUserInfoOnly(false)
		calls := p.UserInfoRequests()
		got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-zoe"))
		want := me{ID: got.ID, Username: "zoe", Email: "zoe@example.test", Role: store.RoleAdmin, Kind: store.KindHuman, SSO: true}
		if got != want {
			t.Errorf("got %+v, want %+v", got, want)
		}
		if n := p.UserInfoRequests() - calls; n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1", n)
		}
	})

	t.Run("IDTokenWins", func(t *testing.T) {
		// UserInfo fills only what the ID token lacks (here the groups, so it is read): the
		// verified token's claims stand.
		p.AddUser(oidctest.User{Subject: "sub-ida", PreferredUsername: "ida", Email: "ida@example.test", Groups: []string{"users"}})
		f := srv.MustStartOIDC(t, p, "sub-ida")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "groups") })
		p.NextUserInfoOverride(func(c map[string]any) {
			c["preferred_username"], c["email"], c["email_verified"] = "mallory", "mallory@example.test", false
		})
		calls := p.UserInfoRequests()
		resp := srv.MustDo(t, f.Request())
		c := resp.Cookie("terdut_session")
		if resp.Status != http.StatusSeeOther || c == nil {
			t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
		}
		if got := mustMe(t, srv, c); got.Username != "ida" || got.Email != "ida@example.test" || got.Role != store.RoleMember {
			t.Errorf("got %+v, want ida, a member, as the ID token says", got)
		}
		if n := p.UserInfoRequests() - calls; n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1", n)
		}
	})

	t.Run("EmailWithItsVerification", func(t *testing.T) {
		// The ID token says "verified" about no address; the address UserInfo gives is unverified.
		p.AddUser(oidctest.User{Subject: "sub-una", Email: "boss@example.test"})
		f := srv.MustStartOIDC(t, p, "sub-una")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "email") })
		p.NextUserInfoOverride(func(c map[string]any) { c["email_verified"] = false })
		resp := srv.MustDo(t, f.Request())
		c := resp.Cookie("terdut_session")
		if resp.Status != http.StatusSeeOther || c == nil {
			t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
		}
		if got := mustMe(t, srv, c); got.Email != "" || !strings.HasPrefix(got.Username, "user-") {
			t.Errorf("got %+v, want no e-mail and a generated name", got)
		}
	})

	t.Run("VerificationOfAnotherAddress", func(t *testing.T) {
		// The ID token's address comes without a verdict; UserInfo verified another address.
		// That verdict is not about the ID token's address: it stays contact, never a username.
		p.AddUser(oidctest.User{Subject: "sub-vic", Email: "boss@example.test"})
		f := srv.MustStartOIDC(t, p, "sub-vic")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "email_verified") })
		p.NextUserInfoOverride(func(c map[string]any) { c["email"], c["email_verified"] = "vic@example.test", true })
		resp := srv.MustDo(t, f.Request())
		c := resp.Cookie("terdut_session")
		if resp.Status != http.StatusSeeOther || c == nil {
			t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
		}
		if got := mustMe(t, srv, c); got.Email != "boss@example.test" || !strings.HasPrefix(got.Username, "user-") {
			t.Errorf("got %+v, want the ID token's e-mail as contact and a generated name", got)
		}
	})

	t.Run("VerificationOfTheSameAddress", func(t *testing.T) {
		// UserInfo verifies the very address the ID token gives: the verdict applies.
		p.AddUser(oidctest.User{Subject: "sub-val", Email: "val@example.test"})
		f := srv.MustStartOIDC(t, p, "sub-val")
		p.NextTokenOverride(func(c map[string]any) { delete(c, "email_verified") })
		resp := srv.MustDo(t, f.Request())
		c := resp.Cookie("terdut_session")
		if resp.Status != http.StatusSeeOther || c == nil {
			t.Fatalf("got %d %s, want 303 with a session", resp.Status, resp.Body)
		}
		if got := mustMe(t, srv, c); got.Email != "val@example.test" || got.Username != "val@example.test" {
			t.Errorf("got %+v, want the verified e-mail as contact and username", got)
		}
	})
}

func TestOIDC_Scopes(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scopes []string
		want   string
	}{
		{"Default", nil, "openid profile email"},
		{"Configured", []string{"email", "groups"}, "openid email groups"},
		{"OpenIDOnce", []string{"profile", "openid", "groups"}, "openid profile groups"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newOIDCServer(t, func(o *api.Options) { o.OIDC.Scopes = tc.scopes })
			srv.MustClaim(t)
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
			loc, err := url.Parse(resp.Header.Get("Location"))
			if resp.Status != http.StatusFound || err != nil {
				t.Fatalf("got %d %s, want 302 to the provider", resp.Status, resp.Body)
			}
			if got := loc.Query().Get("scope"); got != tc.want {
				t.Errorf("scope: got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOIDC_ClaimMapping(t *testing.T) {
	type want struct {
		username string // "" for the generated user- name
		email    string
		role     store.Role
	}
	for _, tc := range []struct {
		name   string
		mutate func(o *api.OIDCOptions)
		user   oidctest.User
		want   want
	}{
		{"UsernameClaim", func(o *api.OIDCOptions) { o.UsernameClaim = "nickname" },
			oidctest.User{PreferredUsername: "ignored", Email: "nick@example.test", ExtraClaims: map[string]any{"nickname": "nicky"}},
			want{"nicky", "nick@example.test", store.RoleMember}},
		{"UsernameClaimMissingVerifiedEmail", func(o *api.OIDCOptions) { o.UsernameClaim = "nickname" },
			oidctest.User{PreferredUsername: "ignored", Email: "vera@example.test"},
			want{"vera@example.test", "vera@example.test", store.RoleMember}},
		{"EmailVerifiedMissing", nil,
			oidctest.User{Email: "maybe@example.test", ExtraClaims: map[string]any{"email_verified": nil}},
			want{"", "maybe@example.test", store.RoleMember}},
		{"EmailVerifiedStringTrue", nil,
			oidctest.User{Email: "cognito@example.test", ExtraClaims: map[string]any{"email_verified": "true"}},
			want{"cognito@example.test", "cognito@example.test", store.RoleMember}},
		{"EmailVerifiedStringFalse", nil,
			oidctest.User{Email: "fake@example.test", ExtraClaims: map[string]any{"email_verified": "false"}},
			want{"", "", store.RoleMember}},
		{"UsernameClaimEmailUnverified", func(o *api.OIDCOptions) { o.UsernameClaim = "email" },
			oidctest.User{Email: "boss@example.test", ExtraClaims: map[string]any{"email_verified": nil}},
			want{"", "boss@example.test", store.RoleMember}},
		{"NestedGroups", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "realm_access.roles", []string{"terdut-user"}, []string{"terdut-admin"}
		}, oidctest.User{PreferredUsername: "kc", ExtraClaims: map[string]any{
			"realm_access": map[string]any{"roles": []string{"offline_access", "terdut-user", "terdut-admin"}}}},
			want{"kc", "", store.RoleAdmin}},
		{"NestedClientRoles", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups = "resource_access.terdut.roles", []string{"oncall"}
		}, oidctest.User{PreferredUsername: "kc2", ExtraClaims: map[string]any{
			"resource_access": map[string]any{"terdut": map[string]any{"roles": []string{"oncall"}}, "other": map[string]any{"roles": []string{"admin"}}}}},
			want{"kc2", "", store.RoleMember}},
		{"StringGroup", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "role", []string{"sre", "dev"}, []string{"sre"}
		}, oidctest.User{PreferredUsername: "solo", ExtraClaims: map[string]any{"role": "sre"}},
			want{"solo", "", store.RoleAdmin}},
		{"ObjectGroups", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "urn:zitadel:iam:org:project:roles", []string{"oncall", "admin"}, []string{"admin"}
		}, oidctest.User{PreferredUsername: "zita", ExtraClaims: map[string]any{"urn:zitadel:iam:org:project:roles": map[string]any{
			"admin": map[string]any{"291633": "acme.zitadel.test"}, "oncall": map[string]any{"291633": "acme.zitadel.test"}}}},
			want{"zita", "", store.RoleAdmin}},
		{"ObjectGroupsMember", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AllowedGroups, o.AdminGroups = "urn:zitadel:iam:org:project:roles", []string{"oncall", "admin"}, []string{"admin"}
		}, oidctest.User{PreferredUsername: "zeno", ExtraClaims: map[string]any{"urn:zitadel:iam:org:project:roles": map[string]any{
			"oncall": map[string]any{"291633": "acme.zitadel.test"}}}},
			want{"zeno", "", store.RoleMember}},
		{"DottedClaimName", func(o *api.OIDCOptions) {
			o.GroupsClaim, o.AdminGroups = "https://terdut.example/groups", []string{"admins"}
		}, oidctest.User{PreferredUsername: "auth0", ExtraClaims: map[string]any{"https://terdut.example/groups": []string{"admins"}}},
			want{"auth0", "", store.RoleAdmin}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, p := newOIDCServer(t, func(o *api.Options) {
				if tc.mutate != nil {
					tc.mutate(o.OIDC)
				}
			})
			srv.MustClaim(t)
			tc.user.Subject = "sub-" + strings.ToLower(tc.name)
			p.AddUser(tc.user)
			got := mustMe(t, srv, srv.MustSignInOIDC(t, p, tc.user.Subject))
			wantName := tc.want.username
			if wantName == "" && strings.HasPrefix(got.Username, "user-") {
				wantName = got.Username
			}
			if got.Username != wantName || got.Email != tc.want.email || got.Role != tc.want.role {
				t.Errorf("got %+v, want %+v (\"\": a generated user- name)", got, tc.want)
			}
		})
	}

	t.Run("ErrNestedGroupNotAllowed", func(t *testing.T) {
		srv, p := newOIDCServer(t, func(o *api.Options) {
			o.OIDC.GroupsClaim, o.OIDC.AllowedGroups = "realm_access.roles", []string{"terdut-user"}
		})
		srv.MustClaim(t)
		// The group sits at another path, the path leads to no list, or to an object without it
		// among its keys: not admitted.
		for i, extra := range []map[string]any{
			{"realm_access": map[string]any{"groups": []string{"terdut-user"}}},
			{"realm_access": "terdut-user"},
			{"roles": []string{"terdut-user"}},
			{"realm_access": map[string]any{"roles": map[string]any{"viewer": true}}},
		} {
			sub := fmt.Sprintf("sub-outsider-%d", i)
			p.AddUser(oidctest.User{Subject: sub, PreferredUsername: sub, ExtraClaims: extra})
			resp, err := srv.SignInOIDC(t.Context(), p, sub)
			if err != nil || resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
				t.Errorf("%v: got %d %s (%v), want 403 group_not_allowed", extra, resp.Status, resp.Body, err)
			}
		}
		if n := count(t, srv, `SELECT count(*) FROM users WHERE oidc_subject IS NOT NULL`); n != 0 {
			t.Errorf("SSO users: got %d, want 0", n)
		}
	})
}

func TestOIDC_ProviderRename(t *testing.T) {
	srv, p := newOIDCServer(t, nil)
	srv.MustClaim(t)
	taken := apitest.MustPerson(t, srv.Store, "taken", store.RoleMember)
	signIn := func(t *testing.T, preferred string) me {
		t.Helper()
		p.AddUser(oidctest.User{Subject: "sub-ren", PreferredUsername: preferred, Email: "ren@example.test"})
		return mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-ren"))
	}
	first := signIn(t, "ren")

	t.Run("Followed", func(t *testing.T) {
		if got := signIn(t, "renata"); got.ID != first.ID || got.Username != "renata" {
			t.Errorf("got %+v, want user %d renamed to renata", got, first.ID)
		}
		if !strings.Contains(srv.Logs.String(), `"to":"renata"`) {
			t.Errorf("the log does not say the name followed the provider:\n%s", srv.Logs.String())
		}
	})

	t.Run("TakenKept", func(t *testing.T) {
		for _, name := range []string{"taken", "TAKEN"} {
			if got := signIn(t, name); got.ID != first.ID || got.Username != "renata" {
				t.Errorf("provider says %q: got %+v, want user %d keeping renata", name, got, first.ID)
			}
		}
		if u, err := srv.Store.User(t.Context(), taken.User.ID); err != nil || u.Username != "taken" {
			t.Errorf("the other user: got %+v, %v, want taken unchanged", u, err)
		}
		logs := srv.Logs.String()
		if !strings.Contains(logs, "belongs to another user") || !strings.Contains(logs, `"provider_username":"taken"`) {
			t.Errorf("the log does not say why the name was kept:\n%s", logs)
		}
	})

	t.Run("NoNameReported", func(t *testing.T) {
		// A provider that stops sending a usable username, and has no verified e-mail, does not
		// turn the person into user-1a2b3c4d; nor can it give them the principal's name.
		for _, preferred := range []string{"", store.PrincipalUsername, "..."} {
			p.AddUser(oidctest.User{Subject: "sub-ren", PreferredUsername: preferred, Email: "ren@example.test",
				ExtraClaims: map[string]any{"email_verified": nil}})
			if got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-ren")); got.Username != "renata" {
				t.Errorf("provider says %q: got %+v, want renata kept", preferred, got)
			}
		}
	})

	t.Run("FollowsVerifiedEmail", func(t *testing.T) {
		// Without a username claim, a verified e-mail is the name, for a returning person as for a new one.
		p.AddUser(oidctest.User{Subject: "sub-ren", Email: "ren@example.test"})
		if got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "sub-ren")); got.ID != first.ID || got.Username != "ren@example.test" {
			t.Errorf("got %+v, want user %d renamed to ren@example.test", got, first.ID)
		}
	})
}

func TestOIDC_Issuer(t *testing.T) {
	t.Run("TrailingSlash", func(t *testing.T) {
		for name, setup := range map[string]func(p *oidctest.Provider, o *api.OIDCOptions){
			"Configured": func(p *oidctest.Provider, o *api.OIDCOptions) { o.Issuer = p.URL() + "/" },
			"Discovered": func(p *oidctest.Provider, o *api.OIDCOptions) { p.SetIssuer(p.URL() + "/") },
		} {
			t.Run(name, func(t *testing.T) {
				p := oidctest.NewProvider(t)
				srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, func(o *api.Options) { setup(p, o.OIDC) })[0]
				srv.MustClaim(t)
				if got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "alice")); got.Username != "alice" {
					t.Errorf("got %+v, want alice", got)
				}
				if resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"}); resp.Status != http.StatusOK {
					t.Errorf("readyz: got %d %s, want 200", resp.Status, resp.Body)
				}
			})
		}
	})

	t.Run("ErrMismatch", func(t *testing.T) {
		p := oidctest.NewProvider(t)
		const discovered = "https://idp.example.test/realms/other"
		p.SetIssuer(discovered)
		srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, nil)[0]
		srv.MustClaim(t)
		configured := p.URL()
		mentionsAll := func(s string) bool {
			return strings.Contains(s, "--oidc-issuer") && strings.Contains(s, configured) && strings.Contains(s, discovered)
		}
		// At start, before anyone signs in: in the log, and in /readyz.
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(srv.Logs.String(), "misconfigured") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if logs := srv.Logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !mentionsAll(logs) {
			t.Errorf("the log at start does not name --oidc-issuer and both URLs:\n%s", logs)
		}
		// /readyz answers 503 and says no more; the log says why.
		ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
		if ready.Status != http.StatusServiceUnavailable || strings.Contains(string(ready.Body), configured) {
			t.Errorf("readyz: got %d %s, want 503 without the detail", ready.Status, ready.Body)
		}
		notReady := logLines(t, srv, func(l logLine) bool { return l["msg"] == "not ready: /readyz answers 503" })
		if len(notReady) != 1 || notReady[0]["reason"] != "sso_wrong_issuer" || !mentionsAll(fmt.Sprint(notReady[0]["detail"])) {
			t.Errorf("the log of readiness: got %v, want reason sso_wrong_issuer naming --oidc-issuer and both URLs", notReady)
		}

		// Sign-in says it is a configuration error, to API clients and browsers alike.
		for _, accept := range []string{"application/json", "text/html"} {
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login",
				Header: http.Header{"Accept": {accept}}})
			text := html.UnescapeString(string(resp.Body))
			if resp.Status != http.StatusInternalServerError || !mentionsAll(text) || strings.Contains(text, "try again shortly") ||
				resp.Header.Get("Retry-After") != "" || resp.Header.Get("Location") != "" {
				t.Errorf("%s: got %d %s, want 500 naming --oidc-issuer and both URLs, not a retry", accept, resp.Status, resp.Body)
			}
			if accept == "application/json" && resp.Code() != "sso_misconfigured" {
				t.Errorf("got code %q, want sso_misconfigured", resp.Code())
			}
		}
		page := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/login", Header: http.Header{"Accept": {"text/html"}}})
		if page.Status != http.StatusOK || !mentionsAll(html.UnescapeString(string(page.Body))) {
			t.Errorf("login page: got %d %s, want the message for administrators", page.Status, page.Body)
		}
		if n := count(t, srv, `SELECT count(*) FROM users WHERE oidc_subject IS NOT NULL`); n != 0 || p.AuthorizeRequests() != 0 {
			t.Errorf("SSO users %d, authorize requests %d: want none", n, p.AuthorizeRequests())
		}

		// Once the provider names the configured issuer, a later sign-in discovers it again
		// (no sooner than the retry delay) and the server is ready.
		p.SetIssuer(p.URL())
		deadline = time.Now().Add(20 * time.Second)
		for {
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
			if resp.Status == http.StatusFound {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("after the fix: got %d %s, want 302 within 20s", resp.Status, resp.Body)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"}); ready.Status != http.StatusOK {
			t.Errorf("readyz after the fix: got %d %s, want 200", ready.Status, ready.Body)
		}
		if got := mustMe(t, srv, srv.MustSignInOIDC(t, p, "alice")); got.Username != "alice" {
			t.Errorf("after the fix: got %+v, want alice", got)
		}
	})

	t.Run("ReadyzRecovers", func(t *testing.T) {
		// A NotReady pod gets no sign-ins: /readyz alone must notice the fixed provider.
		p := oidctest.NewProvider(t)
		p.SetIssuer("https://idp.example.test/realms/other")
		srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, nil)[0]
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(srv.Logs.String(), "misconfigured") && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"}); ready.Status != http.StatusServiceUnavailable {
			t.Fatalf("readyz while misconfigured: got %d %s, want 503", ready.Status, ready.Body)
		}
		p.SetIssuer(p.URL())
		deadline = time.Now().Add(20 * time.Second)
		for {
			ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
			if ready.Status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("readyz after the fix: got %d %s, want 200 within 20s", ready.Status, ready.Body)
			}
			time.Sleep(250 * time.Millisecond)
		}
		if n := p.AuthorizeRequests(); n != 0 {
			t.Errorf("authorize requests: got %d, want none", n)
		}
	})

	t.Run("ProviderDown", func(t *testing.T) {
		// A provider that is merely unreachable is an outage, not a configuration error.
		down := httptest.NewServer(http.NotFoundHandler())
		issuer := down.URL
		down.Close()
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
			o.PublicURL = publicURL
			o.OIDC = &api.OIDCOptions{Issuer: issuer, ClientID: "terdut", ClientSecret: "secret", GroupsClaim: "groups"}
		})
		srv.MustClaim(t)
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "sso_unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("login: got %d %s, want 503 sso_unavailable with Retry-After", resp.Status, resp.Body)
		}
		if ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"}); ready.Status != http.StatusOK {
			t.Errorf("readyz: got %d %s, want 200: the provider being down does not make this server unready", ready.Status, ready.Body)
		}
	})
}
