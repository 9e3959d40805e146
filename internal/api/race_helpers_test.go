package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// raceTally counts, over every round, what shows that the requests really raced.
type raceTally struct {
	mu                               sync.Mutex
	refused, duringClaim, afterClaim int
}

func (t *raceTally) add(refused, duringClaim, afterClaim int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.refused, t.duringClaim, t.afterClaim = t.refused+refused, t.duringClaim+duringClaim, t.afterClaim+afterClaim
}

// mustPrepareRace readies everyone who signs in during a round, so that only the callbacks and
// logins race: one OIDC sign-in per subject, started and approved by the provider, and the
// password users, created directly in the database. The OIDC login start is gated like the
// callback, so the flows are started on a replica with the gate off; they live in the shared
// database, as in production. One sign-in in ten retries if refused.
func mustPrepareRace(t *testing.T, dbURL string, p *oidctest.Provider, hash string) []*signIn {
	t.Helper()
	starter := newReplicas(t, dbURL, 1, p, func(o *api.Options) { o.Gate = false })[0]
	flows := make([]apitest.OIDCFlow, raceCallbacks)
	errs := make([]error, raceCallbacks)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < raceCallbacks; i += 4 {
				flows[i], errs[i] = starter.StartOIDC(t.Context(), p, fmt.Sprintf("sso-%02d", i))
			}
		})
	}
	wg.Wait()
	var people []*signIn
	for i, f := range flows {
		if errs[i] != nil {
			t.Fatalf("start the racing sign-ins: %v", errs[i])
		}
		people = append(people, &signIn{kind: "oidc", who: fmt.Sprintf("sso-%02d", i), replica: i % 3,
			req: f.Request(), retry: i%10 == 0})
	}

	// Marked as this version's (migration 00010), which decides the gate itself: the install
	// is pending here.
	_, err := starter.Store.Pool().Exec(t.Context(), `WITH marked AS (SELECT set_config('terdut.gate', 'checked', true))
		INSERT INTO users (username, email, password_hash)
		SELECT 'pw-' || lpad(g::text, 2, '0'), 'pw-' || g || '@example.test', $1 FROM generate_series(0, $2 - 1) g, marked`,
		hash, raceLogins)
	if err != nil {
		t.Fatalf("create password users: %v", err)
	}
	for i := range raceLogins {
		who := fmt.Sprintf("pw-%02d", i)
		people = append(people, &signIn{kind: "password", who: who, replica: (i + 1) % 3, retry: i%10 == 0,
			req: apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
				Body: map[string]string{"username": who, "password": racePassword}}})
	}
	return people
}

// checkClaims fails the round unless one claim won (201) and the other lost (403
// bootstrap_already_completed), and returns the winner.
func checkClaims(t *testing.T, claims []try) try {
	t.Helper()
	var won []try
	for i, c := range claims {
		switch {
		case c.err != nil:
			t.Fatalf("claim on replica %d: %v", i, c.err)
		case c.resp.Status == http.StatusCreated:
			won = append(won, c)
		case c.resp.Status != http.StatusForbidden || c.resp.Code() != "bootstrap_already_completed":
			t.Fatalf("claim on replica %d: got %d %s, want 201 or 403 bootstrap_already_completed", i, c.resp.Status, c.resp.Body)
		}
	}
	if len(won) != 1 {
		t.Fatalf("claims answered 201: got %d, want 1", len(won))
	}
	return won[0]
}

// checkRaceDatabase fails unless the database holds exactly what the successes account for:
// the password users, the principal of the winning claim, one user per successful OIDC sign-in,
// and one session per successful sign-in. A refused sign-in that had left a user or a session
// behind would show here.
func checkRaceDatabase(t *testing.T, srv *apitest.Server, won try, withSession, ssoUsers []string) {
	t.Helper()
	sessions := queryStrings(t, srv, `SELECT u.username FROM sessions s JOIN users u ON u.id = s.user_id`)
	slices.Sort(sessions)
	if slices.Sort(withSession); !slices.Equal(sessions, withSession) {
		t.Errorf("sessions by username: got %v, want %v", sessions, withSession)
	}
	subjects := queryStrings(t, srv, `SELECT oidc_subject FROM users WHERE oidc_subject IS NOT NULL`)
	slices.Sort(subjects)
	if slices.Sort(ssoUsers); !slices.Equal(subjects, ssoUsers) {
		t.Errorf("SSO users by subject: got %v, want %v", subjects, ssoUsers)
	}
	if n, want := count(t, srv, `SELECT count(*) FROM users`), raceLogins+1+len(ssoUsers); n != want {
		t.Errorf("users: got %d, want %d", n, want)
	}
	var claim struct{ User me }
	won.resp.JSON(t, &claim)
	b, err := srv.Store.Bootstrap(t.Context())
	if err != nil || b.State != store.StateComplete || b.Generation != 1 || b.PrincipalID == nil || *b.PrincipalID != claim.User.ID {
		t.Errorf("bootstrap state: got %+v %v, want complete, generation 1, principal %d", b, err, claim.User.ID)
	}
	if n := count(t, srv, `SELECT count(*) FROM users WHERE kind = 'service'`); n != 1 {
		t.Errorf("service users: got %d, want 1", n)
	}
}

// queryStrings runs a query of one text column directly on srv's database.
func queryStrings(t *testing.T, srv *apitest.Server, query string) []string {
	t.Helper()
	rows, err := srv.Store.Pool().Query(t.Context(), query)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}
