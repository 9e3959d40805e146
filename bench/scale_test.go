package bench_test

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/bench"
)

// scaleKeys are the scale side's figures, in the order it reports them.
var scaleKeys = []string{"scale_apikey", "scale_signin", "scale_users_page", "scale_audit_actor",
	"scale_audit_event_prefix", "scale_users_stream", "scale_users_stream_memory", "scale_sweep"}

// TestRunScale runs the scale side alone in its shortest form (3000 people against 1000), to
// keep it working. It checks that every figure was measured and reported, never how fast.
func TestRunScale(t *testing.T) {
	var table bytes.Buffer
	rep := bench.RunScale(t, bench.Config{Round: 200 * time.Millisecond, Rounds: 1, NoWarmup: true, ScalePeople: 3000,
		Out: &table, JSONPath: filepath.Join(t.TempDir(), "scale.json"), InstallWrk: true})
	t.Logf("the short run's table (its figures mean nothing):\n%s", table.String())
	if len(rep.Figures) != len(scaleKeys) {
		t.Fatalf("got %d figures, want %d", len(rep.Figures), len(scaleKeys))
	}
	for i, f := range rep.Figures {
		if f.Key != scaleKeys[i] {
			t.Errorf("figure %d: got key %q, want %q", i, f.Key, scaleKeys[i])
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
		if f.Details["people_large"] != 3000 || f.Details["people_small"] != 1000 {
			t.Errorf("%s: got people %v and %v, want 3000 and 1000", f.Key, f.Details["people_large"], f.Details["people_small"])
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
