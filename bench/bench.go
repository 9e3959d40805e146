// Package bench measures terdut-server against baselines taken in the same run on the same
// machine, so that every figure is a ratio that means the same on a laptop and in CI:
//
//   - the bootstrap gate's cost: password sign-ins and OIDC callbacks per second with the gate
//     on, over the same with the gate off;
//   - API-key requests (GET /api/me, sent by wrk) per second on the terdut-server process,
//     over the same on the floor (bench/floor: the smallest correct server for that work),
//     and their CPU time per request with Postgres's, at concurrency 8 and 32; and, as the
//     database's ceiling, over `pgbench -S -M prepared` transactions per second;
//   - p99 password sign-in latency while claims and resets run back to back, over p99 with
//     none running;
//   - p99 latency of real password sign-ins on the terdut-server process while wrk floods it
//     with sign-ins for random usernames, over p99 without the flood;
//   - the scale side (scale.go): each endpoint's rate over a million bulk-loaded people, over
//     the same over a thousand, and the server's peak memory over the whole user list; and its
//     incident half (scale_incidents.go): the queue, the alert feed, a timeline and the
//     webhook's refresh of a group over a million alert occurrences, over a thousand;
//   - the ingest side (ingest.go): Alertmanager's notifications stored per second by the
//     terdut-server process, over the same by the floor, and a storm of 10,000 alerts.
//
// Run starts its own throwaway Postgres cluster (package pglocal), instances of the API
// (package apitest), an OIDC provider (package oidctest), and builds and runs terdut-server
// and the floor as processes of their own; nothing needs setting up by hand. `make bench` runs BenchmarkReport, which prints the table and writes
// bench/out/results.json.
package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

// Config sizes a run. The zero value is the full run of `make bench`.
type Config struct {
	// Round is how long one measured round lasts (default 1.5s). pgbench counts whole
	// seconds, so the API-key rounds last Round rounded up to a second, at least two.
	Round time.Duration
	// Rounds is how many rounds each side of a comparison gets, interleaved (default 5).
	Rounds int
	// KeyRounds is the same for the API-key figures (default 9): their goals are within 5%,
	// and the median of more rounds moves less with other work on the machine.
	KeyRounds int
	// NoWarmup skips the unmeasured round each side of a throughput comparison gets first
	// (connections, caches, first sign-ins): for a quick check that the harness works.
	NoWarmup bool
	// Out receives the table; nil discards it.
	Out io.Writer
	// Progress receives a line as each measurement starts; nil discards them.
	Progress io.Writer
	// JSONPath, if set, is where the report is written as JSON (its directory is created).
	JSONPath string
	// ScalePeople is the number of people of the scale side's large database (default a
	// million), compared with a thousand.
	ScalePeople int
	// ScaleOccurrences is the number of alert occurrences of the incident half's large
	// database, a multiple of 1,000 (default a million, in 100,000 incidents), compared with
	// a thousand (in 100).
	ScaleOccurrences int
	// InstallWrk lets the run install wrk, the load generator of the API-key figures and
	// the sign-in flood, with scripts/ensure-wrk.sh (as root, from Debian) when it is
	// missing. Without wrk the run fails.
	InstallWrk bool
	// Sides, when not empty, names the sides to measure (gate, apikey, contest, flood,
	// pooler, scale, scale-incidents, ingest); empty: every side. `make bench SIDES=pooler`
	// sets it.
	Sides []string
	// IngestGroups and IngestAlerts size the ingest side's groups (default 20 groups of 50
	// alerts), IngestStorm its storm, one notification of that many alerts (default 10,000).
	IngestGroups, IngestAlerts, IngestStorm int
}

func (c Config) withDefaults() Config {
	if c.Round <= 0 {
		c.Round = 1500 * time.Millisecond
	}
	if c.Rounds <= 0 {
		c.Rounds = 5
	}
	if c.KeyRounds <= 0 {
		c.KeyRounds = 9
	}
	if c.IngestGroups <= 0 {
		c.IngestGroups = 20
	}
	if c.IngestAlerts <= 0 {
		c.IngestAlerts = 50
	}
	if c.IngestStorm <= 0 {
		c.IngestStorm = 10_000
	}
	if c.Out == nil {
		c.Out = io.Discard
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	return c
}

func (c Config) progressf(format string, args ...any) {
	fmt.Fprintf(c.Progress, "bench: "+format+"\n", args...)
}

// Report is the outcome of a run.
type Report struct {
	Date       time.Time `json:"date"`
	GoVersion  string    `json:"go_version"`
	GOMAXPROCS int       `json:"gomaxprocs"`
	NumCPU     int       `json:"num_cpu"`
	Postgres   string    `json:"postgres"`
	Round      string    `json:"round"`
	Rounds     int       `json:"rounds"`
	KeyRounds  int       `json:"api_key_rounds"`
	// LoadStart and LoadEnd are the 1-minute load averages when the run started and ended:
	// well above NumCPU, other work shared the machine and the ratios are noisier.
	LoadStart float64  `json:"load_average_start,omitempty"`
	LoadEnd   float64  `json:"load_average_end,omitempty"`
	Figures   []Figure `json:"figures"`
}

// Run measures every figure and returns the report, after writing the table to cfg.Out and
// the JSON to cfg.JSONPath. A missed goal is a result, not a failure: Run fails tb only when
// it cannot measure (a cluster that does not start, a request that gets a wrong answer).
func Run(tb testing.TB, cfg Config) Report {
	tb.Helper()
	cfg = cfg.withDefaults()
	start, load := time.Now(), loadAverage()
	e := newEnv(tb, cfg)
	rep := Report{Date: start.UTC().Truncate(time.Second), GoVersion: runtime.Version(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), Postgres: e.pgVersion,
		Round: cfg.Round.String(), Rounds: cfg.Rounds, KeyRounds: cfg.KeyRounds, LoadStart: load}
	measures := []measure{
		{"gate", "gate overhead on password sign-in", one((*env).gatePassword)},
		{"gate", "gate overhead on the OIDC callback", one((*env).gateOIDC)},
		{"apikey", "API-key requests against the floor and pgbench -S -M prepared", (*env).apiKeys},
		{"contest", "sign-in latency during a contested claim", one((*env).contestedSignIn)},
		{"flood", "sign-in latency during a sign-in flood", one((*env).signInFlood)},
		{"pooler", "API-key requests behind PgBouncer, against the floor and directly", e.poolerSide(tb)},
		{"scale", "scale: the same endpoints at a thousand people and at Config.ScalePeople",
			func(e *env, ctx context.Context) ([]Figure, error) { return e.scale(tb, ctx) }},
		{"scale-incidents", "scale: the incident domain at a thousand alert occurrences and at Config.ScaleOccurrences",
			func(e *env, ctx context.Context) ([]Figure, error) { return e.scaleIncidents(tb, ctx) }},
		{"ingest", "ingest: Alertmanager's notifications against the floor, and a storm",
			func(e *env, ctx context.Context) ([]Figure, error) { return e.ingest(tb, ctx) }},
	}
	for _, side := range cfg.Sides {
		if !slices.ContainsFunc(measures, func(m measure) bool { return m.side == side }) {
			tb.Fatalf("bench: no side %q: use gate, apikey, contest, flood, pooler, scale, scale-incidents or ingest", side)
		}
	}
	for _, m := range measures {
		if len(cfg.Sides) > 0 && !slices.Contains(cfg.Sides, m.side) {
			continue
		}
		cfg.progressf("measuring %s", m.what)
		fs, err := m.run(e, tb.Context())
		if err != nil {
			tb.Fatalf("bench: %s: %v", m.what, err)
		}
		rep.Figures = append(rep.Figures, fs...)
	}
	return finish(tb, cfg, rep, start)
}

// measure is one side of Run: what it measures, for the progress lines, and how.
type measure struct {
	side, what string
	run        func(*env, context.Context) ([]Figure, error)
}

// finish notes the load at the end and writes rep as a table to cfg.Out and as JSON to
// cfg.JSONPath, for Run and RunScale alike.
func finish(tb testing.TB, cfg Config, rep Report, start time.Time) Report {
	tb.Helper()
	rep.LoadEnd = loadAverage()
	if err := writeTable(cfg.Out, rep); err != nil {
		tb.Fatalf("bench: write table: %v", err)
	}
	if cfg.JSONPath != "" {
		if err := writeJSON(cfg.JSONPath, rep); err != nil {
			tb.Fatalf("bench: %v", err)
		}
	}
	cfg.progressf("done in %s", time.Since(start).Round(100*time.Millisecond))
	return rep
}

// one adapts a measurement of one figure to Run's list.
func one(m func(*env, context.Context) (Figure, error)) func(*env, context.Context) ([]Figure, error) {
	return func(e *env, ctx context.Context) ([]Figure, error) {
		f, err := m(e, ctx)
		return []Figure{f}, err
	}
}

// loadAverage returns the 1-minute load average, or 0 where the system does not say.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var load float64
	if _, err := fmt.Sscan(string(b), &load); err != nil {
		return 0
	}
	return load
}
