//go:build patroni

package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/patronitest"
	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
)

// TestPatroniPooler runs terdut-server replicas with --database-pooler=transaction through
// PgBouncer configured as Zalando's pooler (transaction mode, SCRAM, auth_query), in front of
// HAProxy on a Patroni cluster (the pooler Deployment reaches the leader through the
// cluster's Service), beside replicas on HAProxy directly, and kills the leader mid-claim
// under load: the pooler's server connections die with it. It migrates through the pooler
// first. The same checks as TestPatroni: no 500 and no failed request, 503 only with
// Retry-After, no sign-in while pending, every acknowledged claim, reset and session on the
// new leader, no person refused 429 for the right password, Reconcile converges.
func TestPatroniPooler(t *testing.T) {
	began := time.Now()
	c := patronitest.Start(t)
	ctx := t.Context()
	bouncer := pgbouncertest.Start(t, c.SuperuserURL("postgres"), pgbouncertest.Options{PoolSize: 10})
	bouncer.Install(t, c.SuperuserURL(patronitest.App))
	pooledURL := bouncer.URLFor(patronitest.App, patronitest.AppPassword, patronitest.App)
	pooled := store.WithPooler(store.PoolerTransaction)
	// Two replicas migrate at once through the pooler.
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := store.Migrate(ctx, pooledURL, pooled); errs <- err }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			c.Fail("migrate through PgBouncer: %v\n%s", err, bouncer.Log())
		}
	}
	p := oidctest.NewProvider(t)
	opts := func(o *api.Options) {
		o.ResetLimit = store.RateLimit{Max: 1 << 20, Window: time.Minute}
		o.OIDC = apitest.OIDC(p)
	}
	s := &suite{t: t, c: c, rec: &answers{}, hammer: "on-call"}
	s.routes = []*route{
		{name: "PgBouncer", replicas: []*apitest.Server{
			apitest.NewServerOn(t, apitest.OpenStore(t, pooledURL, pooled), opts),
			apitest.NewServerOn(t, apitest.OpenStore(t, pooledURL, pooled), opts)}},
		{name: "HAProxy", replicas: []*apitest.Server{apitest.NewServer(t, c.HAProxyURL(), opts)}},
	}
	var err error
	if s.operator, err = client.New(s.routes[0].replicas[0].URL, client.WithOperatorToken(apitest.OperatorToken)); err != nil {
		t.Fatal(err)
	}
	first, err := s.operator.Reconcile(ctx, "")
	if err != nil || first.Action != client.ActionClaimed {
		c.Fail("first reconcile through PgBouncer: got %+v, %v, want claimed", first, err)
	}
	s.held = claimResult{state: store.StateComplete, gen: first.Generation, key: first.APIKey.Key}
	person := apitest.MustPerson(t, s.routes[0].replicas[0].Store, s.hammer, store.RoleMember)
	var people []apitest.Person
	for i := range 4 {
		people = append(people, apitest.MustPerson(t, s.routes[0].replicas[1].Store, fmt.Sprintf("person-%d", i), store.RoleMember))
	}
	c.Logf("cluster, PgBouncer, replicas and people ready after %s", time.Since(began).Round(time.Second))
	endLoad := startLoad(t, s, p, person, people)

	var killed *patronitest.Member
	for _, f := range []fault{
		{name: "leader killed mid-claim", midOp: "claim", inject: func(s *suite, probe func(time.Time, ...*patronitest.Member)) {
			killed = s.c.Leader(ctx)
			probe(time.Now(), killed)
			s.c.Kill(killed)
		}},
		{name: "old leader rejoins", inject: func(s *suite, _ func(time.Time, ...*patronitest.Member)) {
			s.logf("%s rejoined; pg_rewind ran: %v", killed.Name, s.c.Rejoin(ctx, killed))
		}},
	} {
		if !s.run(f) {
			break
		}
	}
	endLoad()
	t.Logf("Patroni faults through PgBouncer (ttl %d s, loop_wait %d s, retry_timeout %d s), in %s:\n"+
		"| fault | route | promoted | HAProxy routes to it | writes commit | terdut-server: first 2xx after the route reaches the leader | terdut-server: first write 2xx after writes commit | answers from the fault to that write |\n"+
		"|---|---|---|---|---|---|---|---|\n%s", patronitest.TTL, patronitest.LoopWait, patronitest.RetryTimeout,
		time.Since(began).Round(time.Second), strings.Join(s.results, "\n"))
	s.checkAnswers()
	var logs string
	for _, srv := range s.routes[0].replicas {
		logs += srv.Logs.String()
	}
	// As pgx writes a server's error (an access line's durations can hold the same digits).
	for _, bad := range []string{"(SQLSTATE 42P05)", "(SQLSTATE 26000)"} {
		if i := strings.Index(logs, bad); i >= 0 {
			line := logs[strings.LastIndexByte(logs[:i], '\n')+1:]
			line, _, _ = strings.Cut(line, "\n")
			t.Errorf("a replica behind PgBouncer logged %s: a prepared statement met another connection's: %.2000s", bad, line)
		}
	}
	if t.Failed() {
		s.logAttempts()
		t.Logf("PgBouncer's log:\n%s", bouncer.Log())
	}
	res, err := s.operator.Reconcile(ctx, s.held.key)
	if err != nil || res.Action != client.ActionNone {
		t.Errorf("the last reconcile: got %+v, %v, want none", res, err)
	}
	for _, rt := range s.routes {
		for _, srv := range rt.replicas {
			srv.MustLogin(t, person.User.Username, person.Password)
		}
	}
	for _, pp := range append(people, person) {
		assertPersonIntact(t, s.routes[0].replicas[0], pp)
	}
	// The cluster's waits fail the test that started it: wait here, not in the subtest.
	c.WaitReady(ctx)
	t.Run("incidents: leader killed mid-delivery", func(t *testing.T) {
		proveIncidentsThroughFailover(t, c, pooledURL, s.held.key, "--database-pooler", "transaction")
	})
}
