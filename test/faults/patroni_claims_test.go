//go:build patroni

package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/patronitest"
)

func parseURL(s string) (*url.URL, error) { return url.Parse(s) }

// op is one claim or reset of the operator and what it left, as far as the operator knows.
type op struct {
	kind       string // claim or reset
	start, end time.Time
	acked      bool        // answered 201 (claim) or 200 (reset)
	result     claimResult // the state it left if it committed
}

// opClaimer claims and resets the install in turn, one request at a time through every
// replica of every route in turn, until stopped. An answer that is not an acknowledgement
// leaves the operation's outcome unknown, as it is to the operator: the claimer then reads
// GET /api/bootstrap/status until it answers, checks that it shows the state before the
// operation or after it (anything else lost an acknowledged operation), and goes on from there.
type opClaimer struct {
	t       *testing.T
	mu      sync.Mutex
	ops     []op
	current string      // the kind of the operation in flight
	started chan string // the kind of each operation as it is sent

	known        claimResult    // the state as the claimer knows it for sure
	unknown      *op            // an unacknowledged operation not yet resolved
	resolved     int            // unacknowledged operations resolved by a status read
	spans        [][2]time.Time // spans in which the install was certainly pending
	pendingSince time.Time      // the start of the open pending span (zero: none open)
}

func (o *op) String() string {
	if o == nil {
		return "none"
	}
	return fmt.Sprintf("a %s sent at %s, answered at %s, which would leave %s at %d",
		o.kind, o.start.Format(time.StampMilli), o.end.Format(time.StampMilli), o.result.state, o.result.gen)
}

func newClaimer(t *testing.T, from claimResult) *opClaimer {
	return &opClaimer{t: t, started: make(chan string, 1024), known: from}
}

func (cl *opClaimer) run(rec *answers, routes []*route, stop <-chan struct{}) {
	type target struct {
		rt  *route
		srv *apitest.Server
	}
	var targets []target
	for _, rt := range routes {
		for _, srv := range rt.replicas {
			targets = append(targets, target{rt, srv})
		}
	}
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		tg := targets[i%len(targets)]
		if cl.unknown != nil {
			cl.resolve(rec, tg.rt, tg.srv)
			continue
		}
		cl.mu.Lock()
		cur := cl.known
		o := op{kind: "reset", result: claimResult{state: store.StatePending, gen: cur.gen}}
		req := apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken}
		want := http.StatusOK
		if cur.state == store.StatePending {
			o = op{kind: "claim", result: claimResult{state: store.StateComplete, gen: cur.gen + 1}}
			req.Path, want = "/api/bootstrap", http.StatusCreated
		}
		cl.current = o.kind
		cl.mu.Unlock()
		select {
		case cl.started <- o.kind:
		default:
		}
		resp, a := rec.do(tg.rt, tg.srv, o.kind, req)
		o.start, o.end = a.start, a.end
		if a.err == nil && resp.Status == want {
			o.acked = true
			if o.kind == "claim" {
				var body struct {
					APIKey     struct{ Key string } `json:"api_key"`
					Generation int64
				}
				if err := json.Unmarshal(resp.Body, &body); err != nil || body.Generation != o.result.gen {
					cl.t.Errorf("claim: got %s (%v), want generation %d", resp.Body, err, o.result.gen)
				}
				o.result.key = body.APIKey.Key
			}
		}
		cl.mu.Lock()
		cl.ops = append(cl.ops, o)
		switch {
		case !o.acked:
			cl.unknown = &cl.ops[len(cl.ops)-1]
		case o.kind == "claim":
			cl.closeSpan(o.start)
			cl.known = o.result
		default:
			cl.pendingSince = o.end
			cl.known = o.result
		}
		cl.mu.Unlock()
		if !o.acked {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// resolve reads the claim's state after an unacknowledged operation.
func (cl *opClaimer) resolve(rec *answers, rt *route, srv *apitest.Server) {
	resp, a := rec.do(rt, srv, "status", apitest.Request{Method: http.MethodGet, Path: "/api/bootstrap/status"})
	var body struct {
		State      store.State
		Generation int64
	}
	if a.err != nil || resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &body) != nil {
		time.Sleep(20 * time.Millisecond)
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	o, before := cl.unknown, cl.known
	cl.unknown = nil
	cl.resolved++
	switch {
	case body.State == before.state && body.Generation == before.gen: // it did not commit
	case body.State == o.result.state && body.Generation == o.result.gen: // it did
		if o.kind == "claim" {
			cl.closeSpan(o.start)
		} else {
			cl.pendingSince = a.end
		}
		cl.known = claimResult{state: body.State, gen: body.Generation} // a claim's key never arrived
	default:
		cl.t.Errorf("after %v: status %s at %d, want %s at %d (before it) or %s at %d (after it)",
			o, body.State, body.Generation, before.state, before.gen, o.result.state, o.result.gen)
		cl.known = claimResult{state: body.State, gen: body.Generation}
		cl.pendingSince = time.Time{}
	}
}

// closeSpan ends the open pending span at end, when a claim may have committed.
func (cl *opClaimer) closeSpan(end time.Time) {
	if !cl.pendingSince.IsZero() {
		cl.spans = append(cl.spans, [2]time.Time{cl.pendingSince, end})
		cl.pendingSince = time.Time{}
	}
}

// waitStarted waits until the claimer sends an operation of kind, and returns at once.
func (cl *opClaimer) waitStarted(t *testing.T, kind string) {
	t.Helper()
	for len(cl.started) > 0 {
		<-cl.started
	}
	deadline := time.After(hangBound)
	for {
		select {
		case k := <-cl.started:
			if k == kind {
				return
			}
		case <-deadline:
			t.Fatalf("waited %s for the claimer to send a %s", hangBound, kind)
		}
	}
}

// inFlight returns the kind of the operation the claimer has sent and not yet been answered.
func (cl *opClaimer) inFlight() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.current
}

// holdMidOp waits until the claimer's operation of kind (claim or reset) is inside its
// transaction on the leader, held there by a lock on api_keys (both revoke the principal's
// keys), so that a fault strikes it mid-transaction; release lets it go.
func (cl *opClaimer) holdMidOp(t *testing.T, leader *patronitest.Member, kind string) (release func()) {
	t.Helper()
	ctx := t.Context()
	for range 50 {
		cl.waitStarted(t, kind)
		conn, err := pgx.Connect(ctx, leader.SuperuserURL(patronitest.App))
		if err != nil {
			t.Fatal(err)
		}
		release = func() { _ = conn.Close(context.Background()) }
		if _, err := conn.Exec(ctx, `BEGIN; LOCK TABLE api_keys IN EXCLUSIVE MODE`); err != nil {
			t.Fatal(err)
		}
		held := false
		for deadline := time.Now().Add(2 * time.Second); !held && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
				AND (query LIKE '%revoked_at = now()%' OR query LIKE '%INSERT INTO api_keys%'))`).Scan(&held)
			if err != nil {
				t.Fatal(err)
			}
		}
		if held && cl.inFlight() == kind {
			return release
		}
		release() // the operation of that kind got past the lock first: try the next one
	}
	t.Fatalf("could not hold a %s mid-transaction in 50 tries", kind)
	return nil
}

// outcome returns what the claimer knows (the state it last knew for sure), its unresolved
// unacknowledged operation, if any, and how many operations were acknowledged and resolved.
func (cl *opClaimer) outcome() (known claimResult, unknown *op, acked, resolved int) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for _, o := range cl.ops {
		if o.acked {
			acked++
		}
	}
	if cl.unknown != nil {
		u := *cl.unknown
		unknown = &u
	}
	return cl.known, unknown, acked, cl.resolved
}

// pendingSpans returns the spans in which the install was certainly pending, the last one
// up to until when the claimer left it pending; leaderPending is what the leader holds
// after the claimer stopped, which resolves an operation left unknown.
func (cl *opClaimer) pendingSpans(leaderPending bool, until time.Time) [][2]time.Time {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	spans := append([][2]time.Time(nil), cl.spans...)
	open := cl.pendingSince
	if u := cl.unknown; u != nil {
		switch {
		case u.kind == "claim" && !leaderPending && !open.IsZero(): // it committed
			spans = append(spans, [2]time.Time{open, u.start})
			open = time.Time{}
		case u.kind == "reset" && leaderPending: // it committed
			open = u.end
		}
	}
	if !open.IsZero() && leaderPending {
		spans = append(spans, [2]time.Time{open, until})
	}
	return spans
}
