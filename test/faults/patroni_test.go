//go:build patroni

package faults

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/patronitest"
)

// suite is the state the faults of TestPatroni share: one cluster, the replicas on both
// routes, the load's answers, and what the operator holds.
type suite struct {
	t        *testing.T
	c        *patronitest.Cluster
	routes   []*route
	rec      *answers
	operator *client.Client
	held     claimResult // the claim as the operator last reconciled it
	results  []string    // the table's rows
	// hammer is the person the load signs in every 20 ms from each replica, never reading
	// Retry-After: the load, not a client.
	hammer string
	// gateRefused counts the sign-ins refused as pending in spans the claimer knew pending:
	// without any, the gate check tested nothing.
	gateRefused int
}

// fault is one thing that happens to the cluster while the load runs. inject does it, and
// calls probe when Patroni's time to a writable leader starts to count: at is when the fault
// began, exclude the members whose writes do not count (an old leader that takes writes for
// a moment more). A fault that never calls probe is not measured.
type fault struct {
	name   string
	midOp  string // wait for a claim or reset in flight before injecting
	inject func(s *suite, probe func(at time.Time, exclude ...*patronitest.Member))
}

// TestPatroni runs terdut-server replicas on a Patroni cluster (3 members, strict synchronous
// replication) both ways a Spilo install is reached, a libpq multi-host URL with
// target_session_attrs=read-write and HAProxy following GET /primary, with password and OIDC
// sign-ins, API-key requests, claims and resets running, through the faults of a real
// cluster, one after another. After each: no 500 and no dropped connection, 503 only with
// Retry-After, no sign-in while the leader said pending, every acknowledged claim, reset and
// session on the new leader, Reconcile converges, and the people are as they were. People sign
// in at the default sign-in limit, retrying as clients do, and are never refused 429. etcd goes
// away twice more under failsafe_mode, for longer than the TTL: then nothing fails. It prints
// Patroni's time to a writable leader and terdut-server's extra time per fault and route.
func TestPatroni(t *testing.T) {
	began := time.Now()
	c := patronitest.Start(t)
	ctx := t.Context()
	if _, err := store.Migrate(ctx, c.MultiHostURL()); err != nil {
		c.Fail("migrate: %v", err)
	}
	p := oidctest.NewProvider(t)
	opts := func(o *api.Options) {
		o.ResetLimit = store.RateLimit{Max: 1 << 20, Window: time.Minute}
		// The sign-in limit is the default (10 failed sign-ins in 15 minutes): a sign-in cut
		// off by a fault is no failed guess, however often people retry through it.
		o.OIDC = apitest.OIDC(p)
	}
	s := &suite{t: t, c: c, rec: &answers{}, hammer: "on-call"}
	for _, r := range []struct{ name, url string }{{"multi-host", c.MultiHostURL()}, {"HAProxy", c.HAProxyURL()}} {
		s.routes = append(s.routes, &route{name: r.name, replicas: []*apitest.Server{
			apitest.NewServer(t, r.url, opts), apitest.NewServer(t, r.url, opts)}})
	}
	var err error
	if s.operator, err = client.New(s.routes[0].replicas[0].URL, client.WithOperatorToken(apitest.OperatorToken)); err != nil {
		t.Fatal(err)
	}
	first, err := s.operator.Reconcile(ctx, "")
	if err != nil || first.Action != client.ActionClaimed {
		c.Fail("first reconcile: got %+v, %v, want claimed", first, err)
	}
	s.held = claimResult{state: store.StateComplete, gen: first.Generation, key: first.APIKey.Key}
	person := apitest.MustPerson(t, s.routes[0].replicas[0].Store, s.hammer, store.RoleMember)
	alice := s.routes[1].replicas[0].MustSignInOIDC(t, p, "alice")
	aliceUser := apitest.Person{}
	if resp := s.routes[1].replicas[0].MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: alice}); resp.Status != http.StatusOK {
		t.Fatalf("alice after her sign-in: got %d %s", resp.Status, resp.Body)
	} else {
		var me struct{ User store.User }
		resp.JSON(t, &me)
		aliceUser.User = me.User
	}
	c.Logf("cluster, replicas and people ready after %s", time.Since(began).Round(time.Second))

	var people []apitest.Person
	for i := range 4 {
		people = append(people, apitest.MustPerson(t, s.routes[0].replicas[0].Store, fmt.Sprintf("person-%d", i), store.RoleMember))
	}
	endLoad := startLoad(t, s, p, person, people)

	var killed *patronitest.Member
	now := time.Now
	faults := []fault{
		{name: "leader killed mid-claim", midOp: "claim", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			killed = s.c.Leader(ctx)
			probe(now(), killed)
			s.c.Kill(killed)
		}},
		{name: "old leader rejoins", inject: func(s *suite, _ func(time.Time, ...*patronitest.Member)) {
			s.logf("%s rejoined; pg_rewind ran: %v", killed.Name, s.c.Rejoin(ctx, killed))
		}},
		{name: "leader killed mid-reset", midOp: "reset", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			m := s.c.Leader(ctx)
			probe(now(), m)
			s.c.Kill(m)
			s.c.WaitWritable(ctx, m) //nolint:errcheck // the probe reports it
			s.logf("%s rejoined; pg_rewind ran: %v", m.Name, s.c.Rejoin(ctx, m))
		}},
		{name: "switchover to the sync standby", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			leader, _ := s.c.WaitReady(ctx)
			probe(now(), leader)
			from, to, _ := s.c.Switchover(ctx)
			s.logf("switched over from %s to %s", from.Name, to.Name)
			s.c.WaitReady(ctx)
		}},
		{name: "leader cut off from etcd", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			leader, _ := s.c.WaitReady(ctx)
			probe(now(), leader)
			s.c.CutFromEtcd(leader, true)
			s.waitDemoted(leader)
			s.c.WaitWritable(ctx, leader) //nolint:errcheck // the probe reports it
			s.c.CutFromEtcd(leader, false)
			s.c.WaitReady(ctx)
		}},
		{name: "etcd down 12 s", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			leader, _ := s.c.WaitReady(ctx)
			s.c.PauseEtcd(true)
			at := now()
			s.waitDemoted(leader)
			probe(at)
			time.Sleep(time.Until(at.Add(12 * time.Second)))
			s.c.PauseEtcd(false)
			after, _ := s.c.WaitReady(ctx)
			unavailable := s.rec.count(at, time.Now(), func(a answer) bool { return a.status >= 500 && a.code != "bootstrap_pending" })
			s.logf("without failsafe_mode: leader before etcd went down: %s; after: %s; %d answers 5xx (not the gate's)",
				leader.Name, after.Name, unavailable)
		}},
		{name: "etcd down 15 s under failsafe_mode", inject: func(s *suite, _ func(time.Time, ...*patronitest.Member)) {
			s.c.SetFailsafe(ctx, true)
			s.withoutEtcd(func() { s.c.PauseEtcd(true) }, func() { s.c.PauseEtcd(false) })
		}},
		{name: "etcd killed and restarted after 15 s under failsafe_mode", inject: func(s *suite, _ func(time.Time, ...*patronitest.Member)) {
			s.withoutEtcd(s.c.StopEtcd, s.c.StartEtcd)
		}},
		{name: "rolling restart", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			s.c.RollingRestart(ctx, func(m *patronitest.Member, leader bool) {
				s.logf("restarting %s (leader: %v)", m.Name, leader)
				if leader {
					probe(now(), m)
				}
			})
		}},
	}
	for _, f := range faults {
		if !s.run(f) {
			break
		}
	}
	endLoad()
	t.Logf("Patroni faults (ttl %d s, loop_wait %d s, retry_timeout %d s, synchronous_mode_strict), in %s:\n"+
		"| fault | route | promoted | HAProxy routes to it | writes commit | terdut-server: first 2xx after the route reaches the leader | terdut-server: first write 2xx after writes commit | answers from the fault to that write |\n"+
		"|---|---|---|---|---|---|---|---|\n%s", patronitest.TTL, patronitest.LoopWait, patronitest.RetryTimeout,
		time.Since(began).Round(time.Second), strings.Join(s.results, "\n"))
	s.checkAnswers()
	if s.gateRefused == 0 {
		t.Error("no sign-in was refused while the install was certainly pending: the gate check tested nothing")
	}
	for _, rt := range s.routes {
		var logs string
		for _, srv := range rt.replicas {
			logs += srv.Logs.String()
		}
		var seen []string
		for _, what := range []string{"25006", "57P01", "57P03", "08006", "connection refused", "unexpected EOF", "read only connection"} {
			seen = append(seen, fmt.Sprintf("%s×%d", what, strings.Count(logs, what)))
		}
		t.Logf("%s: the database errors the replicas logged: %s", rt.name, strings.Join(seen, " "))
	}
	if t.Failed() {
		s.logAttempts()
	}
	res, err := s.operator.Reconcile(ctx, s.held.key)
	if err != nil || res.Action != client.ActionNone {
		t.Errorf("the last reconcile: got %+v, %v, want none", res, err)
	}
	for _, rt := range s.routes {
		for i, srv := range rt.replicas {
			srv.MustLogin(t, person.User.Username, person.Password)
			if resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: alice}); resp.Status != http.StatusOK {
				t.Errorf("%s replica %d: alice's first session: got %d, want 200", rt.name, i, resp.Status)
			}
		}
	}
	for _, pp := range append(people, person) {
		assertPersonIntact(t, s.routes[0].replicas[0], pp)
	}
	if u, err := s.routes[1].replicas[1].Store.User(ctx, aliceUser.User.ID); err != nil || u.Username != aliceUser.User.Username {
		t.Errorf("alice after the faults: got %+v, %v, want %+v", u, err, aliceUser.User)
	}
	// The cluster's waits fail the test that started it: wait here, not in the subtest.
	c.WaitReady(ctx)
	t.Run("incidents: leader killed mid-delivery", func(t *testing.T) {
		proveIncidentsThroughFailover(t, c, c.MultiHostURL(), s.held.key)
	})
}

func (s *suite) logf(format string, args ...any) { s.c.Logf(format, args...) }

// run injects one fault under load, with the claimer running, waits until both routes answer
// again, and checks what the new leader holds. It returns false when the test failed.
func (s *suite) run(f fault) bool {
	t, ctx := s.t, s.t.Context()
	s.c.WaitReady(ctx)
	phase := time.Now()
	cl := newClaimer(t, s.held)
	stopClaims := make(chan struct{})
	claiming := make(chan struct{})
	go func() {
		defer close(claiming)
		cl.run(s.rec, s.routes, stopClaims)
	}()
	waitFor(t, f.name+": claims, resets and sign-ins on both routes", func() bool {
		_, _, acked, _ := cl.outcome()
		okOn := 0
		for _, rt := range s.routes {
			if _, ok := s.rec.firstOK(rt.name, phase, true); ok {
				okOn++
			}
		}
		return acked >= 2 && okOn == len(s.routes)
	})
	if f.midOp != "" {
		leader, _ := s.c.WaitReady(ctx)
		defer cl.holdMidOp(t, leader, f.midOp)()
	}
	type probed struct {
		w   patronitest.Writable
		err error
	}
	at := time.Now()
	var measured chan probed
	f.inject(s, func(faultAt time.Time, exclude ...*patronitest.Member) {
		at, measured = faultAt, make(chan probed, 1)
		go func() {
			w, err := s.c.WaitWritable(ctx, exclude...)
			measured <- probed{w, err}
		}()
	})
	w := patronitest.Writable{Promoted: at, HAProxy: at, At: at}
	if measured != nil {
		r := <-measured
		if r.err != nil {
			s.c.Fail("%s: %v", f.name, r.err)
		}
		w = r.w
		s.logf("%s: %s promoted %s, reached through HAProxy %s and writable %s after the fault", f.name, w.Member.Name,
			w.Promoted.Sub(at).Round(10*time.Millisecond), w.HAProxy.Sub(at).Round(10*time.Millisecond), w.At.Sub(at).Round(10*time.Millisecond))
	}
	// Both routes answer again: any request after the promotion, a write once writes commit.
	answered, wrote := map[string]time.Time{}, map[string]time.Time{}
	for _, rt := range s.routes {
		waitFor(t, f.name+": "+rt.name+" to answer 2xx again", func() bool {
			var ok1, ok2 bool
			answered[rt.name], ok1 = s.rec.firstOK(rt.name, reachable(rt.name, w), false)
			wrote[rt.name], ok2 = s.rec.firstOK(rt.name, w.At, true)
			return ok1 && ok2
		})
	}
	close(stopClaims)
	<-claiming
	leader, _ := s.c.WaitReady(ctx)
	state, gen := claimState(t, leader.AppURL())
	last, inFlight, acked, resolved := cl.outcome()
	s.logf("%s: %d operations acknowledged, %d unacknowledged ones resolved, last known %s at %d; unresolved %v; leader %s: %s at %d",
		f.name, acked, resolved, last.state, last.gen, inFlight, leader.Name, state, gen)
	lastHeld := state == last.state && gen == last.gen
	if !lastHeld && (inFlight == nil || state != inFlight.result.state || gen != inFlight.result.gen) {
		s.c.Fail("%s: the leader holds %s at %d; want the last known %s at %d or the unresolved %v",
			f.name, state, gen, last.state, last.gen, inFlight)
	}
	if resolved == 0 && f.midOp != "" {
		t.Errorf("%s: the operation held mid-transaction was acknowledged; want it cut off by the fault", f.name)
	}
	if lastHeld && last.key != "" {
		if resp := s.routes[1].replicas[0].MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: last.key}); resp.Status != http.StatusOK {
			t.Errorf("%s: the last acknowledged claim's key: got %d %s, want 200", f.name, resp.Status, resp.Body)
		}
	}
	reconciling := time.Now()
	s.checkGate(f.name, cl, state == store.StatePending, reconciling)
	s.checkSessions(f.name, phase)
	held := last.key
	if !lastHeld {
		held = "" // the committed operation's key never reached the operator
	}
	res, err := s.operator.Reconcile(ctx, held)
	if err != nil {
		s.c.Fail("%s: reconcile: %v", f.name, err)
	}
	s.held = claimResult{state: store.StateComplete, gen: res.Generation, key: held}
	if res.Action != client.ActionNone {
		s.held.key = res.APIKey.Key
	}
	s.logf("%s: reconcile %s at generation %d", f.name, res.Action, res.Generation)
	for _, rt := range s.routes {
		row := fmt.Sprintf("| %s | %s |", f.name, rt.name)
		if measured != nil {
			row += fmt.Sprintf(" %s | %s | %s | %s | %s |", seconds(w.Promoted.Sub(at)), seconds(w.HAProxy.Sub(at)), seconds(w.At.Sub(at)),
				seconds(answered[rt.name].Sub(reachable(rt.name, w))), seconds(wrote[rt.name].Sub(w.At)))
		} else {
			row += " – | – | – | – | – |"
		}
		row += " " + s.rec.statuses(rt.name, at, wrote[rt.name]) + " |"
		s.results = append(s.results, row)
	}
	return !t.Failed()
}

// reachable is when the route could first reach the new leader: at its promotion for the
// multi-host URL, once HAProxy routes to it for HAProxy and PgBouncer (in front of HAProxy).
func reachable(route string, w patronitest.Writable) time.Time {
	if route != "multi-host" {
		return w.HAProxy
	}
	return w.Promoted
}

func seconds(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

// waitDemoted waits until m no longer takes writes: a leader that lost etcd demotes itself.
func (s *suite) waitDemoted(m *patronitest.Member) {
	start := time.Now()
	waitFor(s.t, m.Name+" to demote itself", func() bool {
		st, err := m.Status(s.t.Context())
		return err == nil && st.Role != "master" && st.Role != "primary"
	})
	s.logf("%s demoted itself %s after losing etcd", m.Name, time.Since(start).Round(10*time.Millisecond))
}

// withoutEtcd takes etcd away with down, for longer than the leader's TTL, under
// failsafe_mode, and brings it back with up. The leader must keep leading and committing
// throughout: it never demotes itself, leads afterwards, and no request answers 5xx.
func (s *suite) withoutEtcd(down, up func()) {
	ctx := s.t.Context()
	leader, _ := s.c.WaitReady(ctx)
	at := time.Now()
	down()
	outage := time.Duration(patronitest.TTL+5) * time.Second
	demoted := ""
	for time.Since(at) < outage {
		if st, err := leader.Status(ctx); err == nil && st.Role != "master" && st.Role != "primary" && demoted == "" {
			demoted = fmt.Sprintf("%s %s after etcd went", st.Role, time.Since(at).Round(10*time.Millisecond))
		}
		time.Sleep(250 * time.Millisecond)
	}
	back := time.Now()
	up()
	after, _ := s.c.WaitReady(ctx)
	until := time.Now()
	// 503 bootstrap_pending is the gate while the claimer's reset holds: no failure.
	failed := s.rec.count(at, until, func(a answer) bool {
		if a.err != nil || a.status >= 500 && a.code != "bootstrap_pending" {
			s.logf("under failsafe_mode: %s %s on %s at %s: %d %s %v", a.kind, a.who, a.route, a.end.Format(time.StampMilli), a.status, a.code, a.err)
			return true
		}
		return false
	})
	wrote := s.rec.count(at, back, func(a answer) bool { return a.write() && a.ok() })
	s.logf("etcd gone for %s: leader before %s, after %s; %d writes acknowledged meanwhile, %d answers 5xx or failed",
		back.Sub(at).Round(10*time.Millisecond), leader.Name, after.Name, wrote, failed)
	if demoted != "" {
		s.t.Errorf("under failsafe_mode with every member reachable, the leader %s demoted itself: %s", leader.Name, demoted)
	}
	if after != leader {
		s.t.Errorf("under failsafe_mode the leader changed from %s to %s", leader.Name, after.Name)
	}
	if failed > 0 {
		s.t.Errorf("under failsafe_mode %d answers were 5xx or failed while etcd was gone, want none", failed)
	}
	if wrote == 0 {
		s.t.Error("under failsafe_mode no write was acknowledged while etcd was gone: the load tested nothing")
	}
}

// checkGate fails the test if a sign-in succeeded while the install was certainly pending.
func (s *suite) checkGate(name string, cl *opClaimer, leaderPending bool, until time.Time) {
	spans := cl.pendingSpans(leaderPending, until)
	refused := 0
	for _, a := range s.rec.snapshot() {
		for _, sp := range spans {
			if a.start.Before(sp[0]) || a.end.After(sp[1]) {
				continue
			}
			if a.code == "bootstrap_pending" {
				refused++
			}
			if a.signIn() {
				s.t.Errorf("%s: a %s on %s succeeded (%d) while the install was pending (%s to %s)",
					name, a.kind, a.route, a.status, sp[0].Format(time.StampMilli), sp[1].Format(time.StampMilli))
			}
		}
	}
	s.logf("%s: %d spans in which the install was certainly pending, %d sign-ins refused in them", name, len(spans), refused)
	s.gateRefused += refused
}

// checkSessions checks that every session a sign-in acknowledged since from still works
// (the last 200 of them, and all of those acknowledged after the oldest of those).
func (s *suite) checkSessions(name string, from time.Time) {
	var sessions []answer
	for _, a := range s.rec.snapshot() {
		if a.session != nil && a.end.After(from) {
			sessions = append(sessions, a)
		}
	}
	if len(sessions) > 200 {
		sessions = sessions[len(sessions)-200:]
	}
	srv := s.routes[0].replicas[1]
	for _, a := range sessions {
		resp, err := srv.Do(apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: a.session})
		if err != nil || resp.Status != http.StatusOK {
			s.t.Errorf("%s: a session acknowledged by a %s on %s at %s: got %d %v, want 200",
				name, a.kind, a.route, a.end.Format(time.StampMilli), resp.Status, err)
		}
	}
}

// checkAnswers checks every answer of the run: a success, 401, 403, 429, or 503 with
// Retry-After and code unavailable or bootstrap_pending; never 500 or another status, never
// a failed request, and within answerBound. A sign-in (always with the right password) is
// never refused 429, but the hammer's for at most a check's lease.
func (s *suite) checkAnswers() {
	counts := map[string]map[string]int{} // route → "kind status" → count
	var slowest time.Duration
	bad, hammerRefused := 0, 0
	lease := api.DefaultCheckLease(s.routes[0].replicas[0].Options.PasswordCheckWait)
	for _, a := range s.rec.snapshot() {
		if counts[a.route] == nil {
			counts[a.route] = map[string]int{}
		}
		fail := func(format string, args ...any) {
			if bad++; bad <= 20 {
				s.t.Errorf("%s %s at %s: "+format, append([]any{a.route, a.kind, a.start.Format(time.StampMilli)}, args...)...)
			}
		}
		if a.err != nil {
			fail("the request failed: %v", a.err)
			continue
		}
		counts[a.route][fmt.Sprintf("%s %d %s", a.kind, a.status, a.code)]++
		if a.kind == "sign-in" && a.status == http.StatusTooManyRequests {
			// A sign-in whose outcome a fault hid (its reservation committed, the answer lost)
			// counts for its lease, never as a failed guess: only the hammer, retrying every
			// 20 ms, can run up the limit with them, and then only for a lease.
			wait, _ := strconv.Atoi(a.retryAfter)
			if a.who != s.hammer || time.Duration(wait)*time.Second > lease+time.Second {
				fail("%s's sign-in with the right password was refused %d %s (Retry-After %s): a fault was counted as a failed guess",
					a.who, a.status, a.code, a.retryAfter)
			} else {
				hammerRefused++
			}
		}
		took := a.end.Sub(a.start)
		slowest = max(slowest, took)
		if took > answerBound {
			fail("took %s, want an answer within %s", took, answerBound)
		}
		switch a.status {
		case http.StatusOK, http.StatusCreated, http.StatusFound, http.StatusSeeOther,
			http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		case http.StatusServiceUnavailable:
			if a.retryAfter == "" || a.code != "unavailable" && a.code != "bootstrap_pending" {
				fail("got 503 %q with Retry-After %q, want unavailable or bootstrap_pending with Retry-After", a.code, a.retryAfter)
			}
		default:
			fail("got %d %s, want 2xx, 401, 403, 429 or 503", a.status, a.code)
		}
	}
	if bad > 20 {
		s.t.Errorf("... and %d more", bad-20)
	}
	s.t.Logf("answers by route and status: %v, slowest %s; %s's sign-ins refused for a lease: %d", counts,
		slowest.Round(time.Millisecond), s.hammer, hammerRefused)
}

// logAttempts logs the guessing counts the leader holds, to tell a failed guess from a check
// whose outcome was never written.
func (s *suite) logAttempts() {
	ctx := s.t.Context()
	leader, _ := s.c.WaitReady(ctx)
	conn, err := pgx.Connect(ctx, leader.AppURL())
	if err != nil {
		s.t.Logf("read login_attempts: %v", err)
		return
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT encode(key, 'hex'), attempts::text, pending::text, admitted, touched_at FROM login_attempts ORDER BY touched_at`)
	if err != nil {
		s.t.Logf("read login_attempts: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var key, attempts, pending string
		var admitted bool
		var touched time.Time
		if err := rows.Scan(&key, &attempts, &pending, &admitted, &touched); err == nil {
			s.t.Logf("login_attempts %s…: failed %s, running %s, admitted %v, touched %s", key[:8], attempts, pending, admitted, touched.Format(time.StampMilli))
		}
	}
}
