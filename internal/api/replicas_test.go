package api_test

import (
	"net/http"
	"net/url"
	"slices"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// publicURL is where the replicas of a test are reached, as behind one load balancer: every
// replica builds the same OIDC redirect URL, and tests send the callback to whichever they like.
var publicURL = &url.URL{Scheme: "http", Host: "terdut.test"}

// newReplicas starts n instances over the database at dbURL, each with its own listener and
// pool, behind publicURL and signing in through p. mutate, if not nil, adjusts each one's options.
func newReplicas(t *testing.T, dbURL string, n int, p *oidctest.Provider, mutate func(*api.Options)) []*apitest.Server {
	t.Helper()
	replicas := make([]*apitest.Server, n)
	for i := range replicas {
		replicas[i] = apitest.NewServer(t, dbURL, func(o *api.Options) {
			o.PublicURL = publicURL
			o.OIDC = apitest.OIDC(p)
			if mutate != nil {
				mutate(o)
			}
		})
	}
	return replicas
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
		t.Fatalf("GET /api/me on %s: got %d %s, want 200", srv.URL, resp.Status, resp.Body)
	}
	var body struct{ User me }
	resp.JSON(t, &body)
	return body.User
}

// mustSignedOut fails unless every replica refuses the cookie with 401.
func mustSignedOut(t *testing.T, replicas []*apitest.Server, c *http.Cookie) {
	t.Helper()
	for i, srv := range replicas {
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
		if resp.Status != http.StatusUnauthorized || resp.Code() != "unauthorized" {
			t.Errorf("GET /api/me on replica %d after logout: got %d %s, want 401 unauthorized", i, resp.Status, resp.Body)
		}
	}
}

func mustLogout(t *testing.T, srv *apitest.Server, c *http.Cookie) {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Cookie: c})
	if resp.Status != http.StatusNoContent {
		t.Fatalf("logout: got %d %s, want 204", resp.Status, resp.Body)
	}
}

func TestReplicas_Sessions(t *testing.T) {
	p := oidctest.NewProvider(t)
	p.AddUser(oidctest.User{Subject: "roaming", Email: "roaming@example.test", PreferredUsername: "roaming",
		Groups: []string{"users"}})
	replicas := newReplicas(t, pgtest.MustDatabase(t), 3, p, nil)
	replicas[2].MustClaim(t)

	t.Run("OIDCStartedOnOneFinishedOnAnother", func(t *testing.T) {
		for _, hop := range [][2]int{{0, 1}, {1, 2}, {2, 0}} {
			flow := replicas[hop[0]].MustStartOIDC(t, p, "roaming")
			resp := replicas[hop[1]].MustDo(t, flow.Request())
			c := resp.Cookie("terdut_session")
			if resp.Status != http.StatusSeeOther || c == nil {
				t.Fatalf("callback started on %d, sent to %d: got %d %s, want 303 with a session cookie",
					hop[0], hop[1], resp.Status, resp.Body)
			}
			var ids []int64
			for _, srv := range replicas {
				u := mustMe(t, srv, c)
				if u.Username != "roaming" || !u.SSO {
					t.Errorf("me: got %+v, want the SSO user roaming", u)
				}
				ids = append(ids, u.ID)
			}
			if ids[0] != ids[1] || ids[1] != ids[2] {
				t.Errorf("user ids across replicas: got %v, want one id", ids)
			}
		}
		if n := count(t, replicas[0], `SELECT count(*) FROM users WHERE oidc_subject = 'roaming'`); n != 1 {
			t.Errorf("users for subject roaming: got %d, want 1", n)
		}
	})

	t.Run("StateUsedOnce", func(t *testing.T) {
		flow := replicas[0].MustStartOIDC(t, p, "roaming")
		if resp := replicas[1].MustDo(t, flow.Request()); resp.Status != http.StatusSeeOther {
			t.Fatalf("first callback: got %d %s, want 303", resp.Status, resp.Body)
		}
		// The same callback replayed against another replica must find the flow already used.
		resp := replicas[2].MustDo(t, flow.Request())
		if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_state" {
			t.Errorf("replayed callback on another replica: got %d %s, want 400 invalid_state", resp.Status, resp.Body)
		}
	})

	t.Run("PasswordSessionEverywhere", func(t *testing.T) {
		person := apitest.MustPerson(t, replicas[0].Store, "walker", store.RoleMember)
		c := replicas[0].MustLogin(t, "walker", person.Password)
		for _, srv := range replicas {
			if u := mustMe(t, srv, c); u.ID != person.User.ID {
				t.Errorf("me on %s: got user %d, want %d", srv.URL, u.ID, person.User.ID)
			}
		}
	})

	t.Run("LogoutOnOneEndsEverywhere", func(t *testing.T) {
		person := apitest.MustPerson(t, replicas[0].Store, "leaver", store.RoleMember)
		pw := replicas[1].MustLogin(t, "leaver", person.Password)
		sso := replicas[0].MustSignInOIDC(t, p, "roaming")
		other := replicas[2].MustLogin(t, "leaver", person.Password)
		for _, srv := range replicas {
			mustMe(t, srv, pw)
			mustMe(t, srv, sso)
		}
		mustLogout(t, replicas[2], pw)
		mustSignedOut(t, replicas, pw)
		mustLogout(t, replicas[1], sso)
		mustSignedOut(t, replicas, sso)
		// Ending one session leaves the person's other sessions alone.
		for _, srv := range replicas {
			mustMe(t, srv, other)
		}
	})
}

// TestReplicas_ConcurrentFirstSignIns releases, at once and over three replicas, the first
// callbacks of one person signing in from several browsers and of others who want the same
// username: every callback succeeds, and each person gets exactly one user, under a free name.
func TestReplicas_ConcurrentFirstSignIns(t *testing.T) {
	p := oidctest.NewProvider(t)
	subjects := []string{"twin", "twin", "twin", "twin", "twin-b", "twin-c", "twin-d"}
	for _, sub := range subjects {
		p.AddUser(oidctest.User{Subject: sub, PreferredUsername: "twin", Email: sub + "@example.test"})
	}
	replicas := newReplicas(t, pgtest.MustDatabase(t), 3, p, nil)
	replicas[0].MustClaim(t)
	for round := range 5 {
		if _, err := replicas[0].Store.Pool().Exec(t.Context(), `DELETE FROM users WHERE kind = 'human'`); err != nil {
			t.Fatal(err)
		}
		flows := make([]apitest.OIDCFlow, len(subjects))
		for i, sub := range subjects {
			flows[i] = replicas[i%3].MustStartOIDC(t, p, sub)
		}
		resps, errs := make([]apitest.Response, len(flows)), make([]error, len(flows))
		release := make(chan struct{})
		var wg sync.WaitGroup
		for i, f := range flows {
			wg.Go(func() {
				<-release
				resps[i], errs[i] = replicas[(i+1)%3].FinishOIDC(f)
			})
		}
		close(release)
		wg.Wait()
		for i, resp := range resps {
			if errs[i] != nil || resp.Status != http.StatusSeeOther || resp.Cookie("terdut_session") == nil {
				t.Errorf("round %d, %s: got %d %s %v, want 303 with a session", round, subjects[i], resp.Status, resp.Body, errs[i])
			}
		}
		// One user per subject; whoever committed first has the name they all wanted.
		subs := queryStrings(t, replicas[0], `SELECT oidc_subject FROM users WHERE kind = 'human'`)
		slices.Sort(subs)
		names := queryStrings(t, replicas[0], `SELECT username FROM users WHERE kind = 'human'`)
		if want := []string{"twin", "twin-b", "twin-c", "twin-d"}; !slices.Equal(subs, want) || !slices.Contains(names, "twin") {
			t.Errorf("round %d: got subjects %v named %v, want %v, one of them named twin", round, subs, names, want)
		}
		if n := count(t, replicas[0], `SELECT count(*) FROM sessions`); n != len(subjects) {
			t.Errorf("round %d: sessions: got %d, want %d", round, n, len(subjects))
		}
	}
}
