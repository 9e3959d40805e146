package bench_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/bench"
)

// scaleKeys are the scale side's figures, in the order it reports them, and scaleIncidentKeys
// its incident half's.
var (
	scaleKeys = []string{"scale_apikey", "scale_signin", "scale_users_page", "scale_audit_actor",
		"scale_audit_event_prefix", "scale_users_stream", "scale_users_stream_memory", "scale_sweep"}
	scaleIncidentKeys = []string{"scale_incidents_queue", "scale_alerts_feed", "scale_incident_timeline",
		"scale_stats_alerts", "scale_stats_incidents", "scale_stats_top", "scale_stats_by_hour", "scale_stats_by_day",
		"scale_webhook_refresh", "scale_incidents_memory"}
)

// TestRunScale runs the scale side alone in its shortest form (3000 people against 1000, 3000
// alert occurrences against 1000), to keep it working. It checks that every figure was measured
// and reported, never how fast.
func TestRunScale(t *testing.T) {
	var table bytes.Buffer
	rep := bench.RunScale(t, bench.Config{Round: 200 * time.Millisecond, Rounds: 1, KeyRounds: 1, NoWarmup: true, ScalePeople: 3000,
		ScaleOccurrences: 3000, Out: &table, JSONPath: filepath.Join(t.TempDir(), "scale.json"), InstallWrk: true})
	t.Logf("the short run's table (its figures mean nothing):\n%s", table.String())
	keys := append(slices.Clone(scaleKeys), scaleIncidentKeys...)
	if len(rep.Figures) != len(keys) {
		t.Fatalf("got %d figures, want %d", len(rep.Figures), len(keys))
	}
	for i, f := range rep.Figures {
		if f.Key != keys[i] {
			t.Errorf("figure %d: got key %q, want %q", i, f.Key, keys[i])
		}
		if !(f.Value > 0) || !(f.Baseline > 0) || math.IsInf(f.Value, 0) || math.IsInf(f.Baseline, 0) {
			t.Errorf("%s: got value %v and baseline %v, want both positive and finite", f.Key, f.Value, f.Baseline)
		}
		if got, want := f.Met, f.Goal.Met(f.Ratio); got != want {
			t.Errorf("%s: got met %v, want %v", f.Key, got, want)
		}
		if f.Goal.Op == "" {
			t.Errorf("%s: no goal, want one", f.Key)
		}
		if !strings.Contains(table.String(), f.Name) {
			t.Errorf("%s: table does not name the figure %q", f.Key, f.Name)
		}
		large, small := "people_large", "people_small"
		if slices.Contains(scaleIncidentKeys, f.Key) {
			large, small = "occurrences_large", "occurrences_small"
		}
		if f.Details[large] != 3000 || f.Details[small] != 1000 {
			t.Errorf("%s: got %s %v and %s %v, want 3000 and 1000", f.Key, large, f.Details[large], small, f.Details[small])
		}
	}
}

// BenchmarkScale is `make bench-scale`: the scale side alone, a million people against a
// thousand, printing its table and writing out/scale.json.
func BenchmarkScale(b *testing.B) {
	var rep bench.Report
	for b.Loop() {
		rep = bench.RunScale(b, bench.Config{Out: os.Stdout, Progress: os.Stderr,
			JSONPath: filepath.Join("out", "scale.json"), InstallWrk: true})
	}
	for _, f := range rep.Figures {
		b.ReportMetric(f.Ratio, f.Key+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}
