package bench_test

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/bench"
)

// TestRun runs the whole harness in its shortest form, to keep it compiling and working.
// It checks that every figure was measured and reported, never how fast anything is.
func TestRun(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var table bytes.Buffer
		path := filepath.Join(t.TempDir(), "out", "results.json")
		rep := bench.Run(t, bench.Config{Round: 200 * time.Millisecond, Rounds: 1, KeyRounds: 1, NoWarmup: true,
			ScalePeople: 3000, ScaleOccurrences: 3000, IngestGroups: 6, IngestAlerts: 3, IngestStorm: 40, Out: &table, JSONPath: path, InstallWrk: true})
		t.Logf("the short run's table (its figures mean nothing):\n%s", table.String())

		wantKeys := []string{"gate_password", "gate_oidc",
			"apikey_vs_floor_c8", "apikey_cpu_vs_floor_c8", "apikey_access_log_c8", "apikey_access_log_cpu_c8",
			"apikey_vs_floor_c32", "apikey_cpu_vs_floor_c32", "apikey_access_log_c32", "apikey_access_log_cpu_c32",
			"apikey_vs_pgbench_c8", "apikey_vs_pgbench_c32", "contested_p99", "signin_flood_p99",
			"pooler_apikey_vs_floor_c8", "pooler_cost_c8", "pooler_apikey_vs_floor_c32", "pooler_cost_c32"}
		wantKeys = append(wantKeys, scaleKeys...)
		wantKeys = append(wantKeys, scaleIncidentKeys...)
		wantKeys = append(wantKeys, ingestKeys...)
		// Latency figures and the CPU figures themselves have no cpu ratio.
		noCPURatio := map[string]bool{"contested_p99": true, "signin_flood_p99": true, "scale_apikey": true, "scale_signin": true,
			"scale_users_page": true, "scale_audit_actor": true, "scale_audit_event_prefix": true, "scale_users_stream": true,
			"scale_users_stream_memory": true, "scale_sweep": true, "scale_incidents_queue": true, "scale_alerts_feed": true,
			"scale_incident_timeline": true, "scale_incidents_memory": true, "scale_stats_alerts": true,
			"scale_stats_incidents": true, "scale_stats_top": true, "scale_stats_by_hour": true, "scale_stats_by_day": true,
			"ingest_storm": true, "ingest_storm_memory": true, "ingest_storm_incident": true,
			"apikey_cpu_vs_floor_c8": true, "apikey_cpu_vs_floor_c32": true,
			"apikey_access_log_cpu_c8": true, "apikey_access_log_cpu_c32": true}
		if len(rep.Figures) != len(wantKeys) {
			t.Fatalf("got %d figures, want %d", len(rep.Figures), len(wantKeys))
		}
		for i, f := range rep.Figures {
			if f.Key != wantKeys[i] {
				t.Errorf("figure %d: got key %q, want %q", i, f.Key, wantKeys[i])
			}
			if !(f.Value > 0) || !(f.Baseline > 0) || math.IsInf(f.Value, 0) || math.IsInf(f.Baseline, 0) {
				t.Errorf("%s: got value %v and baseline %v, want both positive and finite", f.Key, f.Value, f.Baseline)
			}
			if got, want := f.Ratio, f.Value/f.Baseline; got != want {
				t.Errorf("%s: got ratio %v, want %v", f.Key, got, want)
			}
			if !noCPURatio[f.Key] && (!(f.CPURatio > 0) || math.IsInf(f.CPURatio, 0)) {
				t.Errorf("%s: got CPU ratio %v, want it positive and finite", f.Key, f.CPURatio)
			}
			if got, want := f.Met, f.Goal.Met(f.Ratio); got != want {
				t.Errorf("%s: got met %v, want %v", f.Key, got, want)
			}
			if !strings.Contains(table.String(), f.Name) {
				t.Errorf("%s: table does not name the figure %q:\n%s", f.Key, f.Name, table.String())
			}
		}

		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("read JSON: %v", err)
		}
		var fromJSON bench.Report
		if err := json.Unmarshal(b, &fromJSON); err != nil {
			t.Fatalf("decode JSON: %v", err)
		}
		if got, want := len(fromJSON.Figures), len(rep.Figures); got != want {
			t.Fatalf("JSON: got %d figures, want %d", got, want)
		}
		for i, f := range fromJSON.Figures {
			if f.Key != rep.Figures[i].Key || f.Ratio != rep.Figures[i].Ratio || f.Met != rep.Figures[i].Met {
				t.Errorf("JSON figure %d: got %s ratio %v met %v, want %s ratio %v met %v", i, f.Key, f.Ratio, f.Met,
					rep.Figures[i].Key, rep.Figures[i].Ratio, rep.Figures[i].Met)
			}
		}
	})
}

// ingestKeys are the ingest side's figures, in the order it reports them.
var ingestKeys = []string{"ingest_mix", "ingest_replay", "ingest_storm", "ingest_storm_memory", "ingest_storm_incident"}

// TestRun_Sides: a run with Config.Sides (make bench SIDES=pooler) measures those sides
// alone.
func TestRun_Sides(t *testing.T) {
	var table bytes.Buffer
	rep := bench.Run(t, bench.Config{Round: 200 * time.Millisecond, Rounds: 1, KeyRounds: 1, NoWarmup: true,
		Out: &table, InstallWrk: true, Sides: []string{"pooler"}})
	var keys []string
	for _, f := range rep.Figures {
		keys = append(keys, f.Key)
	}
	want := []string{"pooler_apikey_vs_floor_c8", "pooler_cost_c8", "pooler_apikey_vs_floor_c32", "pooler_cost_c32"}
	if !slices.Equal(keys, want) {
		t.Fatalf("got figures %v, want %v alone", keys, want)
	}
}

// TestGoal_Met checks the goal arithmetic the table's last column rests on.
func TestGoal_Met(t *testing.T) {
	tests := []struct {
		goal  bench.Goal
		ratio float64
		want  bool
	}{
		{bench.AtLeast(0.97), 0.97, true},
		{bench.AtLeast(0.97), 0.96, false},
		{bench.AtLeast(0.6), 1.2, true},
		{bench.AtMost(2), 2, true},
		{bench.AtMost(2), 2.01, false},
		{bench.AtMost(2), 0.5, true},
		{bench.Goal{}, 0.01, true},
		{bench.Goal{}, 100, true},
	}
	for _, tt := range tests {
		if got := tt.goal.Met(tt.ratio); got != tt.want {
			t.Errorf("%s met by %v: got %v, want %v", tt.goal, tt.ratio, got, tt.want)
		}
	}
}

// BenchmarkReport is `make bench`: the full run, once, printing the table to stdout and
// progress to stderr, writing out/results.json, and reporting each ratio as a metric (for
// benchstat). Run it with -benchtime 1x: every iteration is a whole report of a minute or two.
func BenchmarkReport(b *testing.B) {
	var rep bench.Report
	for b.Loop() {
		rep = bench.Run(b, bench.Config{Out: os.Stdout, Progress: os.Stderr,
			JSONPath: filepath.Join("out", "results.json"), InstallWrk: true, Sides: benchSides()})
	}
	for _, f := range rep.Figures {
		b.ReportMetric(f.Ratio, f.Key+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

// benchSides is the sides `make bench SIDES=...` names (TERDUT_BENCH_SIDES, comma-separated);
// none: every side.
func benchSides() []string {
	var sides []string
	for _, s := range strings.Split(os.Getenv("TERDUT_BENCH_SIDES"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			sides = append(sides, s)
		}
	}
	return sides
}

// BenchmarkPoolerModes measures each of pgx's statement modes on Postgres and behind a
// transaction-mode PgBouncer (bench.RunModes), writing out/modes.json: the figures behind
// --database-pooler=transaction's mode. Run it with -benchtime 1x; about 4 minutes.
func BenchmarkPoolerModes(b *testing.B) {
	var rep bench.Report
	for b.Loop() {
		rep = bench.RunModes(b, bench.Config{Out: os.Stdout, Progress: os.Stderr,
			JSONPath: filepath.Join("out", "modes.json"), InstallWrk: true})
	}
	for _, f := range rep.Figures {
		b.ReportMetric(f.Ratio, f.Key+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}
