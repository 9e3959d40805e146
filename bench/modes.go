package bench

import (
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
)

// modesClients is the concurrency of the statement modes' comparison.
const modesClients = 8

// RunModes measures what each of pgx's statement modes costs terdut-server: GET /api/me with
// an API key per second from the server on Postgres directly in each mode, and through a
// transaction-mode PgBouncer in each mode that works there, each over the server on Postgres
// directly in pgx's default mode (cache_statement), in alternating rounds at c=8. It is the
// figure behind --database-pooler=transaction's choice of mode (docs/pooler.md); not part of
// `make bench`. It writes the table to cfg.Out and returns the report.
func RunModes(tb testing.TB, cfg Config) Report {
	tb.Helper()
	cfg = cfg.withDefaults()
	start, load := time.Now(), loadAverage()
	e := newEnv(tb, cfg)
	if e.wrk == "" {
		tb.Fatal("bench: wrk is not installed (scripts/ensure-wrk.sh installs it)")
	}
	rep := Report{Date: start.UTC().Truncate(time.Second), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Postgres: e.pgVersion,
		Round: cfg.Round.String(), Rounds: cfg.Rounds, KeyRounds: cfg.KeyRounds, LoadStart: load}
	serverBin, _ := buildBinaries(tb)
	bouncer := pgbouncertest.Start(tb, e.cluster.URL("postgres"), pgbouncertest.Options{PoolSize: poolerPoolSize})
	pooledURL := bouncer.URL(tb, e.cluster.URL(appDB))
	type mode struct {
		name   string
		pooled bool
		proc   *process
		side   side
	}
	var modes []*mode
	for _, m := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		modes = append(modes, &mode{name: m})
	}
	for _, m := range []string{"cache_describe", "exec", "simple_protocol"} {
		modes = append(modes, &mode{name: m, pooled: true})
	}
	env := []string{"TERDUT_PASSWORD_HASH_COST=" + strconv.Itoa(floodHashCost)}
	for _, m := range modes {
		name, u := "terdut-server "+m.name, e.cluster.URL(appDB)
		vars := append([]string{}, env...)
		if m.pooled {
			name, u = name+" behind PgBouncer", pooledURL
			vars = append(vars, "TERDUT_DATABASE_POOLER=transaction")
		}
		vars = append(vars, "TERDUT_DATABASE_URL="+withQuery(u, "default_query_exec_mode", m.name))
		m.proc = startProcess(tb, name, serverBin, true, vars)
	}
	d := time.Duration(e.roundSeconds()) * time.Second
	var sides []func() error
	for _, m := range modes {
		sides = append(sides, func() error {
			r, err := e.wrkMe(tb.Context(), m.proc, modesClients, d)
			m.side.add(r)
			return err
		})
	}
	cfg.progressf("measuring %d statement modes, %d rounds each", len(modes), cfg.KeyRounds)
	if err := e.warmUp(sides...); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	for _, m := range modes {
		m.side = side{} // the warm-up's round does not count
	}
	if err := alternate(cfg.KeyRounds, sides...); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	base := modes[0]
	for _, m := range modes {
		where := "on Postgres"
		key := "mode_" + m.name
		if m.pooled {
			where, key = "behind PgBouncer", key+"_pooled"
		}
		f := newFigure(key, fmt.Sprintf("GET /api/me with an API key/s, %s %s / cache_statement on Postgres, c=%d", m.name, where, modesClients),
			"/s", median(m.side.rates), median(base.side.rates), Goal{},
			map[string]any{"rounds": m.side.rates, "cpu_us_per_op_rounds": m.side.cpuPerOps})
		f.CPURatio = median(base.side.cpuPerOps) / median(m.side.cpuPerOps)
		rep.Figures = append(rep.Figures, f)
	}
	rep.LoadEnd = loadAverage()
	if err := writeTable(cfg.Out, rep); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if cfg.JSONPath != "" {
		if err := writeJSON(cfg.JSONPath, rep); err != nil {
			tb.Fatalf("bench: %v", err)
		}
	}
	return rep
}
