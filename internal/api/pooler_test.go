package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// pooledReplicas starts n instances over the database at dbURL through a transaction-mode
// pooler, each with its own pool, as replicas behind Zalando's pooler Service.
func pooledReplicas(t *testing.T, url string, n int) []*apitest.Server {
	t.Helper()
	replicas := make([]*apitest.Server, n)
	for i := range replicas {
		replicas[i] = apitest.NewServerOn(t, apitest.OpenStore(t, url, store.WithPooler(store.PoolerTransaction)),
			func(o *api.Options) { o.ResetLimit.Max = 1000 }) // the reset is raced every round
	}
	return replicas
}

// TestPooler_Replicas: three replicas behind a transaction-mode PgBouncer configured as
// Zalando's, with fewer server connections than the replicas' clients, round after round: the
// claim raced across them has one winner; concurrent password sign-ins, GET /api/me, key
// creation and password changes all succeed (no 500: before --database-pooler, prepared
// statements collided on the shared server connections); and the reset, raced across them,
// brings the install back to pending for the next round.
func TestPooler_Replicas(t *testing.T) {
	p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{PoolSize: 4})
	replicas := pooledReplicas(t, p.URL(t, pgtest.MustDatabase(t)), 3)
	const rounds, people = 4, 9
	var persons []apitest.Person
	for i := range people {
		persons = append(persons, apitest.MustPerson(t, replicas[0].Store, fmt.Sprintf("pooled-%d", i), store.RoleMember))
	}
	for round := range rounds {
		// The claim, raced: one 201.
		claims := make([]try, 6)
		var wg sync.WaitGroup
		for i := range claims {
			wg.Go(func() {
				claims[i].do(replicas[i%3], apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken})
			})
		}
		wg.Wait()
		checkClaims(t, claims)

		// Each person signs in on one replica, then on the next reads /api/me, creates a key
		// and changes the password, all at once.
		errs := make(chan error, people)
		for i, person := range persons {
			wg.Go(func() { errs <- pooledPerson(replicas, i, round, person) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		if t.Failed() {
			t.FailNow()
		}

		// The reset, raced: every answer 200, and the install is pending again.
		resets := make([]apitest.Response, 3)
		for i := range resets {
			wg.Go(func() {
				resets[i] = replicas[i].MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken})
			})
		}
		wg.Wait()
		for i, r := range resets {
			if r.Status != http.StatusOK {
				t.Fatalf("round %d: reset on replica %d: got %d %s, want 200", round, i, r.Status, r.Body)
			}
		}
		if s := mustStatus(t, replicas[round%3]); s.State != "pending" {
			t.Fatalf("round %d: state after the reset: got %q, want pending", round, s.State)
		}
	}
}

// pooledPerson signs person in on one replica and uses the session on the next.
func pooledPerson(replicas []*apitest.Server, i, round int, person apitest.Person) error {
	password := person.Password
	if round > 0 {
		password = fmt.Sprintf("pooled-password-%d-%d-long-enough", i, round-1)
	}
	login, err := replicas[i%3].Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": person.User.Username, "password": password}})
	if err != nil || login.Status != http.StatusOK || login.Cookie("terdut_session") == nil {
		return fmt.Errorf("%s: login: got %d %s %v, want 200 with a session", person.User.Username, login.Status, login.Body, err)
	}
	c, next := login.Cookie("terdut_session"), replicas[(i+1)%3]
	user := fmt.Sprintf("/api/users/%d", person.User.ID)
	for _, step := range []struct {
		req  apitest.Request
		want int
	}{
		{apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c}, http.StatusOK},
		{apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: person.APIKey}, http.StatusOK},
		{apitest.Request{Method: http.MethodPost, Path: user + "/api-keys", Cookie: c,
			Body: map[string]string{"name": fmt.Sprintf("r%d", round), "current_password": password}}, http.StatusCreated},
		{apitest.Request{Method: http.MethodPut, Path: user + "/password", Cookie: c,
			Body: map[string]string{"current_password": password, "password": fmt.Sprintf("pooled-password-%d-%d-long-enough", i, round)}}, http.StatusNoContent},
	} {
		resp, err := next.Do(step.req)
		if err != nil || resp.Status != step.want {
			return fmt.Errorf("%s: %s %s: got %d %s %v, want %d", person.User.Username, step.req.Method, step.req.Path,
				resp.Status, strings.TrimSpace(string(resp.Body)), err, step.want)
		}
	}
	return nil
}

// TestPooler_Readyz: the log says what failed readiness. Two replicas without
// --database-pooler behind a transaction-mode pooler with one server connection: the first
// prepares its statements on it, the second's collide with them (42P05), which its /readyz
// answers 503 and its log reports as such, not as an outdated schema. With the setting, both
// are ready.
func TestPooler_Readyz(t *testing.T) {
	p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{PoolSize: 1})
	url := p.URL(t, pgtest.MustDatabase(t))
	readyz := func(srv *apitest.Server) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
	}
	first := apitest.NewServerOn(t, apitest.OpenStore(t, url), nil)
	if r := readyz(first); r.Status != http.StatusOK {
		t.Fatalf("first replica: got %d %s, want 200", r.Status, r.Body)
	}
	second := apitest.NewServerOn(t, apitest.OpenStore(t, url), nil)
	if r := readyz(second); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("second replica without the setting: got %d %s, want 503", r.Status, r.Body)
	}
	lines := logLines(t, second, func(l logLine) bool { return l["msg"] == "not ready: /readyz answers 503" })
	if len(lines) != 1 || lines[0]["reason"] != "database_error" {
		t.Fatalf("second replica's log: got %v, want one line saying why, reason database_error", lines)
	}
	if d, _ := lines[0]["detail"].(string); strings.Contains(d, "schema is not current") ||
		!strings.Contains(d, "42P05") || !strings.Contains(d, "--database-pooler=transaction") {
		t.Fatalf("second replica's log: got %q, want SQLSTATE 42P05 and the setting named", d)
	}
	for _, srv := range pooledReplicas(t, url, 2) {
		if r := readyz(srv); r.Status != http.StatusOK {
			t.Fatalf("a replica with --database-pooler=transaction: got %d %s, want 200", r.Status, r.Body)
		}
	}
}
