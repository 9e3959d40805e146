package bench

import (
	"context"
	"runtime"
	"time"

	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// RunScale measures the scale side alone (`make bench-scale`), its people and then its incident
// half, on a throwaway cluster of its own, and reports it as Run does: the table to cfg.Out, the
// JSON to cfg.JSONPath.
func RunScale(tb testing.TB, cfg Config) Report {
	tb.Helper()
	cfg = cfg.withDefaults()
	ctx := tb.Context()
	start, load := time.Now(), loadAverage()
	e := &env{cfg: cfg, client: newClient()}
	cfg.progressf("starting a throwaway PostgreSQL cluster")
	var err error
	if e.cluster, err = pglocal.Start(ctx, pglocal.Options{}); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	tb.Cleanup(func() {
		if err := e.cluster.Stop(); err != nil {
			tb.Errorf("bench: stop cluster: %v", err)
		}
	})
	if e.cpu, err = newCPUMeter(e.cluster.Dir); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if e.pgVersion, err = serverVersion(ctx, e.cluster.URL("postgres")); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	e.wrk = e.findWrk(ctx, cfg.InstallWrk)
	rep := Report{Date: start.UTC().Truncate(time.Second), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Postgres: e.pgVersion,
		Round: cfg.Round.String(), Rounds: cfg.Rounds, KeyRounds: cfg.KeyRounds, LoadStart: load}
	if rep.Figures, err = e.scale(tb, ctx); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	incidents, err := e.scaleIncidents(tb, ctx)
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	rep.Figures = append(rep.Figures, incidents...)
	return finish(tb, cfg, rep, start)
}

// serverVersion is the server's version, as Run reports it.
func serverVersion(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&v)
	return v, err
}
