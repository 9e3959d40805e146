package faults

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// call is one request of the load and what it got.
type call struct {
	kind       string // "sign-in", "me", "claim" or "reset"
	start, end time.Time
	status     int
	code       string
	err        error
}

// calls collects the load's requests from many goroutines.
type calls struct {
	mu  sync.Mutex
	all []call
}

func (c *calls) do(srv *apitest.Server, kind string, req apitest.Request) apitest.Response {
	start := time.Now()
	resp, err := srv.Do(req)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.all = append(c.all, call{kind: kind, start: start, end: time.Now(), status: resp.Status, code: resp.Code(), err: err})
	return resp
}

func (c *calls) snapshot() []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]call(nil), c.all...)
}

// count returns how many calls of kind since got status with code ("" for any code).
func (c *calls) count(kind string, since time.Time, status int, code string) int {
	n := 0
	for _, cl := range c.snapshot() {
		if cl.kind == kind && !cl.start.Before(since) && cl.err == nil && cl.status == status && (code == "" || cl.code == code) {
			n++
		}
	}
	return n
}

// claimResult is the claim's state after an operation of the claimer, as the server
// acknowledged it or would have had it committed.
type claimResult struct {
	state store.State
	gen   int64
	key   string // the claim's API key; "" after a reset or when unacknowledged
}

// claimer claims and resets the install in turn, one request at a time through the
// replicas in turn, until stopped or until an answer is not an acknowledgement.
type claimer struct {
	acked    []claimResult // what each acknowledged operation left, in order
	inFlight *claimResult  // what the unacknowledged last operation would have left
}

func (cl *claimer) run(t *testing.T, replicas []*apitest.Server, rec *calls, from claimResult, stop <-chan struct{}) {
	cur := from
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		srv := replicas[i%len(replicas)]
		if cur.state == store.StatePending {
			next := claimResult{state: store.StateComplete, gen: cur.gen + 1}
			resp := rec.do(srv, "claim", apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken})
			if resp.Status != http.StatusCreated {
				cl.inFlight = &next
				return
			}
			var body struct {
				APIKey     struct{ Key string } `json:"api_key"`
				Generation int64
			}
			if err := json.Unmarshal(resp.Body, &body); err != nil { // not t.Fatal: another goroutine
				t.Errorf("claim: decode %s: %v", resp.Body, err)
				return
			}
			next.key = body.APIKey.Key
			if body.Generation != next.gen {
				t.Errorf("claim: got generation %d, want %d", body.Generation, next.gen)
			}
			cur = next
		} else {
			next := claimResult{state: store.StatePending, gen: cur.gen}
			resp := rec.do(srv, "reset", apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken})
			if resp.Status != http.StatusOK {
				cl.inFlight = &next
				return
			}
			cur = next
		}
		cl.acked = append(cl.acked, cur)
	}
}

// TestFailover kills the primary (SIGKILL, with its every process) while two replicas serve
// sign-ins, API-key requests, claims and resets over a multi-host URL, then promotes the
// standby. Every answer is a success, 503 or 401/403, quickly; the replicas serve again from
// the new primary; no sign-in succeeds while the new primary says pending; one Reconcile
// brings the claim back; and the person's data is intact.
func TestFailover(t *testing.T) {
	t.Run("Synchronous", func(t *testing.T) {
		t.Parallel()
		testFailover(t, true)
	})
	t.Run("Asynchronous", func(t *testing.T) {
		t.Parallel()
		testFailover(t, false)
	})
}

func testFailover(t *testing.T, synchronous bool) {
	db := startReplicated(t, synchronous)
	manyResets := func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 1 << 20, Window: time.Minute} }
	replicas := []*apitest.Server{apitest.NewServer(t, db.url(), manyResets), apitest.NewServer(t, db.url(), manyResets)}
	operator, err := client.New(replicas[1].URL, client.WithOperatorToken(apitest.OperatorToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	first, err := operator.Reconcile(ctx, "")
	if err != nil || first.Action != client.ActionClaimed {
		t.Fatalf("first reconcile: got %+v, %v, want claimed", first, err)
	}
	person := apitest.MustPerson(t, replicas[0].Store, "on-call", store.RoleMember)
	db.waitReplayed()
	checkStandbyRefusesWrites(t, db, person)
	from := claimResult{state: store.StateComplete, gen: first.Generation, key: first.APIKey.Key}
	var survivor claimResult // what the standby will hold when promoted (asynchronous only)
	if !synchronous {
		// The standby gets the person and a reset claim; then it hears nothing more.
		if _, err := operator.Reset(ctx); err != nil {
			t.Fatal(err)
		}
		from = claimResult{state: store.StatePending, gen: first.Generation}
		survivor = from
		db.waitReplayed()
		db.freezeReplication()
	}

	rec := &calls{}
	stopLoad, stopClaims := make(chan struct{}), make(chan struct{})
	var load, claims sync.WaitGroup
	signIn := apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": person.User.Username, "password": person.Password}}
	me := apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: person.APIKey}
	for _, srv := range replicas {
		for kind, req := range map[string]apitest.Request{"sign-in": signIn, "me": me} {
			load.Go(func() {
				for {
					select {
					case <-stopLoad:
						return
					default:
					}
					rec.do(srv, kind, req)
					time.Sleep(5 * time.Millisecond) // a steady load, not a busy loop
				}
			})
		}
	}
	var cl claimer
	claims.Go(func() { cl.run(t, replicas, rec, from, stopClaims) })
	endLoad := sync.OnceFunc(func() {
		close(stopLoad)
		load.Wait()
	})
	t.Cleanup(endLoad)

	start := time.Now()
	waitFor(t, "claims, resets and sign-ins on the primary", func() bool {
		return rec.count("claim", start, http.StatusCreated, "") >= 2 && rec.count("reset", start, http.StatusOK, "") >= 2 &&
			rec.count("sign-in", start, http.StatusOK, "") >= 2
	})
	if !synchronous && !db.standbyMissesWrites() {
		t.Fatal("the standby received writes after its replication was frozen")
	}

	if err := db.primary.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now() // from now on, only the standby is there to answer
	close(stopClaims)
	claims.Wait()
	waitFor(t, "each replica to answer 503 unavailable with the primary gone", func() bool {
		return rec.count("me", killed, http.StatusServiceUnavailable, "unavailable") >= 2
	})
	if err := db.standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	state, gen := claimState(t, db.standby.URL("postgres"))

	// The replicas serve again from the new primary, within seconds.
	for i, srv := range replicas {
		waitFor(t, "the replica to serve from the new primary", func() bool {
			resp, err := srv.Do(me)
			return err == nil && resp.Status == http.StatusOK
		})
		t.Logf("replica %d served again %s after the promotion", i, time.Since(promoted).Round(time.Millisecond))
	}

	// What the claim became.
	last := claimResult{state: store.StateComplete, gen: first.Generation, key: first.APIKey.Key}
	if len(cl.acked) > 0 {
		last = cl.acked[len(cl.acked)-1]
	}
	t.Logf("claimer: %d operations acknowledged, last %s at %d; in flight %v; new primary: %s at %d",
		len(cl.acked), last.state, last.gen, cl.inFlight, state, gen)
	if synchronous {
		// No acknowledged operation is lost: the new primary holds the last acknowledged
		// one's result, or the next one's, which committed but whose answer was lost.
		lastHeld := state == last.state && gen == last.gen
		nextHeld := cl.inFlight != nil && state == cl.inFlight.state && gen == cl.inFlight.gen
		if !lastHeld && !nextHeld {
			t.Fatalf("new primary: %s at %d; want the last acknowledged %s at %d or the one in flight %v",
				state, gen, last.state, last.gen, cl.inFlight)
		}
		if lastHeld && last.key != "" {
			if resp := replicas[0].MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: last.key}); resp.Status != http.StatusOK {
				t.Fatalf("the last acknowledged claim's key after the failover: got %d %s, want 200", resp.Status, resp.Body)
			}
		}
	} else if state != survivor.state || gen != survivor.gen {
		t.Fatalf("new primary: %s at %d, want what the standby had received: %s at %d", state, gen, survivor.state, survivor.gen)
	}

	// While the new primary says pending, nobody signs in, on any replica.
	if state == store.StatePending {
		for i, srv := range replicas {
			resp := srv.MustDo(t, signIn)
			if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" {
				t.Errorf("sign-in on replica %d with the new primary pending: got %d %s, want 503 bootstrap_pending", i, resp.Status, resp.Body)
			}
		}
	}
	reconciling := time.Now()
	endLoad()
	checkAnswers(t, rec.snapshot(), killed, reconciling, state == store.StatePending)

	// One Reconcile with the last key the operator stored brings the claim back.
	res, err := operator.Reconcile(ctx, last.key)
	if err != nil {
		t.Fatalf("reconcile after the failover: %v", err)
	}
	switch {
	case !synchronous && res.Action != client.ActionClaimed:
		t.Fatalf("reconcile after losing the claim: got %s, want claimed", res.Action)
	case res.Action != client.ActionNone && res.Action != client.ActionClaimed && res.Action != client.ActionResetAndClaimed:
		t.Fatalf("reconcile after the failover: got %s", res.Action)
	}
	t.Logf("reconcile after the failover: %s at generation %d", res.Action, res.Generation)
	for i, srv := range replicas {
		srv.MustLogin(t, person.User.Username, person.Password)
		if resp := srv.MustDo(t, me); resp.Status != http.StatusOK {
			t.Errorf("replica %d: the person's key after the reconcile: got %d, want 200", i, resp.Status)
		}
	}
	assertPersonIntact(t, replicas[0], person)
}

// checkAnswers checks every answer of the load: a success, 503, 401 or 403, within
// answerBound, and, when the new primary came up pending, no sign-in that started after
// the kill (so could reach only the new primary) and ended before the reconcile succeeded.
func checkAnswers(t *testing.T, all []call, killed, reconciling time.Time, pending bool) {
	t.Helper()
	statuses := map[int]int{}
	var slowest time.Duration
	for _, c := range all {
		if c.err != nil {
			t.Errorf("%s: %v", c.kind, c.err)
			continue
		}
		statuses[c.status]++
		took := c.end.Sub(c.start)
		slowest = max(slowest, took)
		if took > answerBound {
			t.Errorf("%s took %s, want an answer within %s", c.kind, took, answerBound)
		}
		switch c.status {
		case http.StatusOK, http.StatusCreated, http.StatusServiceUnavailable, http.StatusUnauthorized, http.StatusForbidden:
		default:
			t.Errorf("%s: got %d %s, want a success, 503, 401 or 403", c.kind, c.status, c.code)
		}
		if c.status == http.StatusServiceUnavailable && c.code != "unavailable" && c.code != "bootstrap_pending" {
			t.Errorf("%s: got 503 %s, want unavailable or bootstrap_pending", c.kind, c.code)
		}
		if pending && c.kind == "sign-in" && c.status == http.StatusOK && c.start.After(killed) && c.end.Before(reconciling) {
			t.Errorf("a sign-in succeeded while the new primary said pending")
		}
	}
	t.Logf("answers: %v, slowest %s", statuses, slowest.Round(time.Millisecond))
}

// assertPersonIntact checks that the person made before the failover is as they were.
func assertPersonIntact(t *testing.T, srv *apitest.Server, p apitest.Person) {
	t.Helper()
	u, err := srv.Store.User(context.Background(), p.User.ID)
	if err != nil {
		t.Fatalf("the person after the failover: %v", err)
	}
	if u.Username != p.User.Username || u.Email != p.User.Email || u.Role != p.User.Role || !u.HasPassword {
		t.Errorf("the person after the failover: got %+v, want %+v", u, p.User)
	}
}

// checkStandbyRefusesWrites points a server at the standby alone (as a multi-host URL
// without target_session_attrs=read-write may): what needs a write answers 503 with
// Retry-After, as while the database is down, never 500.
func checkStandbyRefusesWrites(t *testing.T, db *replicated, p apitest.Person) {
	t.Helper()
	srv := apitest.NewServer(t, db.standby.URL("postgres"), nil)
	for _, req := range []apitest.Request{
		{Method: http.MethodPost, Path: "/api/auth/login", Body: map[string]string{"username": p.User.Username, "password": p.Password}},
		{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken},
	} {
		resp := srv.MustDo(t, req)
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s on the standby: got %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				req.Method, req.Path, resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
	}
}
