package api_test

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/oidctest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/store"
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
