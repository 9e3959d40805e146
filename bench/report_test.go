package bench

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// TestWriteJSON_UnmeasuredDetail: a detail of a short round in which nothing of its kind
// completed (a percentile of no samples is NaN) is written as null, and the report is
// written, where encoding/json refuses NaN and the whole run failed.
func TestWriteJSON_UnmeasuredDetail(t *testing.T) {
	f := newFigure("k", "name", "ms", 2, 1, AtMost(2), map[string]any{
		"p99_ok_ms": percentile(nil, 99), "inf": math.Inf(1), "kept": 1.5, "label": "x"})
	path := filepath.Join(t.TempDir(), "results.json")
	if err := writeJSON(path, Report{Figures: []Figure{f}}); err != nil {
		t.Fatalf("writeJSON: got %v, want nil", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Figures []struct {
			Details map[string]any `json:"details"`
		} `json:"figures"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	d := got.Figures[0].Details
	for _, k := range []string{"p99_ok_ms", "inf"} {
		if v, ok := d[k]; !ok || v != nil {
			t.Errorf("details[%q]: got %v (present %v), want null", k, v, ok)
		}
	}
	if d["kept"] != 1.5 || d["label"] != "x" {
		t.Errorf("details: got %v, want kept 1.5 and label x unchanged", d)
	}
}
