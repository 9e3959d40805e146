package bench

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
)

// The side behind a connection pooler: GET /api/me with an API key from terdut-server with
// --database-pooler=transaction through a transaction-mode PgBouncer configured as Zalando's
// (test/harness/pgbouncertest), against the floor through the same PgBouncer in the same
// statement mode (simple_protocol, the server's there: pgx's default prepares statements by
// name, which such a pooler cannot carry), and the pooler's cost: the same server through PgBouncer over the
// server on Postgres directly (e.server). The floor sends its lookup's text, which Postgres
// parses and plans on every request, as the smallest program would; the server calls the
// function api_key_owner, whose plan each server connection keeps (migrations/00018).

// poolerGoal: behind the pooler, the server may cost at most 5% over the floor, as directly.
var poolerGoal = AtLeast(0.95)

// poolerPoolSize is PgBouncer's default_pool_size: more server connections than the server
// and the floor open together (pgxpool's default each), so that no client waits for one.
const poolerPoolSize = 20

// pooled is what the pooler side runs: PgBouncer, and the server and the floor through it.
type pooled struct {
	bouncer       *pgbouncertest.Pooler
	server, floor *process
}

// poolerSide returns the measurement of the pooler side: it starts PgBouncer and the two
// processes behind it (stopped when tb ends), then measures at each of apiKeyConcurrencies.
func (e *env) poolerSide(tb testing.TB) func(*env, context.Context) ([]Figure, error) {
	return func(e *env, ctx context.Context) ([]Figure, error) {
		if e.wrk == "" {
			return nil, fmt.Errorf("wrk is not installed (scripts/ensure-wrk.sh installs it)")
		}
		p := e.startPooled(tb, "simple_protocol")
		var figures []Figure
		for _, c := range apiKeyConcurrencies {
			fs, err := e.pooledAt(ctx, p, c)
			if err != nil {
				return nil, fmt.Errorf("c=%d: %w", c, err)
			}
			figures = append(figures, fs...)
		}
		return figures, nil
	}
}

// startPooled starts PgBouncer in front of the bench's cluster, and terdut-server with
// --database-pooler=transaction and the floor in statement mode floorMode through it.
func (e *env) startPooled(tb testing.TB, floorMode string) *pooled {
	tb.Helper()
	e.cfg.progressf("starting PgBouncer (transaction mode) and the server and the floor behind it")
	bouncer := pgbouncertest.Start(tb, e.cluster.URL("postgres"), pgbouncertest.Options{PoolSize: poolerPoolSize})
	dbURL := bouncer.URL(tb, e.cluster.URL(appDB))
	serverBin, floorBin := buildBinaries(tb)
	p := &pooled{bouncer: bouncer}
	p.server = startProcess(tb, "terdut-server behind PgBouncer", serverBin, true, []string{"TERDUT_DATABASE_URL=" + dbURL,
		"TERDUT_DATABASE_POOLER=transaction", "TERDUT_PASSWORD_HASH_COST=" + strconv.Itoa(floodHashCost)})
	p.floor = startProcess(tb, "floor behind PgBouncer", floorBin, false, nil,
		"--database-url", withQuery(dbURL, "default_query_exec_mode", floorMode))
	return p
}

// pooledAt measures the pooler side at one concurrency: three sides in alternating rounds.
func (e *env) pooledAt(ctx context.Context, p *pooled, clients int) ([]Figure, error) {
	d := time.Duration(e.roundSeconds()) * time.Second
	server, floor, direct := &side{}, &side{}, &side{}
	me := func(into *side, proc *process) func() error {
		return func() error {
			r, err := e.wrkMe(ctx, proc, clients, d)
			if into != nil {
				into.add(r)
			}
			return err
		}
	}
	if err := e.warmUp(me(nil, p.server), me(nil, p.floor), me(nil, e.server)); err != nil {
		return nil, err
	}
	if err := alternate(e.cfg.KeyRounds, me(server, p.server), me(floor, p.floor), me(direct, e.server)); err != nil {
		return nil, err
	}
	details := map[string]any{
		"clients":                       clients,
		"wrk":                           fmt.Sprintf("-t 2 -c %d -d %ds, one key", clients, e.roundSeconds()),
		"pooler":                        "PgBouncer, pool_mode transaction, SCRAM, auth_query (as Zalando's)",
		"pgbouncer_default_pool_size":   poolerPoolSize,
		"server_pgx_exec_mode":          "--database-pooler=transaction: simple_protocol",
		"floor_pgx_exec_mode":           "simple_protocol (default_query_exec_mode in its URL)",
		"server_lookup":                 "SELECT * FROM api_key_owner($1): PL/pgSQL, its plan kept by each server connection",
		"floor_lookup":                  "the statement's text, parsed and planned on every request",
		"rounds_server_pooled":          server.rates,
		"rounds_floor_pooled":           floor.rates,
		"rounds_server_direct":          direct.rates,
		"cpu_us_per_op_rounds_server":   server.cpuPerOps,
		"cpu_us_per_op_rounds_floor":    floor.cpuPerOps,
		"cpu_us_per_op_rounds_direct":   direct.cpuPerOps,
		"process_cpu_us_per_op_server":  server.selfCPUPerOp(),
		"process_cpu_us_per_op_floor":   floor.selfCPUPerOp(),
		"postgres_cpu_us_per_op_server": server.serverCPUPerOp(),
		"postgres_cpu_us_per_op_floor":  floor.serverCPUPerOp(),
		"postgres_cpu_us_per_op_direct": direct.serverCPUPerOp(),
		"cpu_us_per_op_definition":      "the server's (or floor's) process and Postgres; PgBouncer's and wrk's apart",
	}
	rate := newFigure(fmt.Sprintf("pooler_apikey_vs_floor_c%d", clients),
		fmt.Sprintf("behind PgBouncer: GET /api/me with an API key/s, server / floor, c=%d", clients), "/s",
		median(server.rates), median(floor.rates), poolerGoal, details)
	rate.CPURatio = median(floor.cpuPerOps) / median(server.cpuPerOps)
	cost := newFigure(fmt.Sprintf("pooler_cost_c%d", clients),
		fmt.Sprintf("GET /api/me with an API key/s, server behind PgBouncer / server on Postgres, c=%d", clients), "/s",
		median(server.rates), median(direct.rates), Goal{}, map[string]any{"see": rate.Key})
	cost.CPURatio = median(direct.cpuPerOps) / median(server.cpuPerOps)
	return []Figure{rate, cost}, nil
}

// withQuery returns the URL u with the query parameter key set to value.
func withQuery(u, key, value string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return u
	}
	q := parsed.Query()
	q.Set(key, value)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
