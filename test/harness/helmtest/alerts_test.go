//go:build chart

package helmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestChart_Alerts takes the PrometheusRule the chart renders (the zalando preset, release
// terdut-server in terdut), checks its rules with `promtool check rules` and runs the unit
// tests of testdata/alerts_test.yaml on them with `promtool test rules`: each alert fires on
// the series that should wake someone, with its labels and annotations, and stays quiet
// otherwise.
func TestChart_Alerts(t *testing.T) {
	tl := tools(t)
	var spec any
	for _, o := range objects(t, render(t, "terdut", "-f", presetFile(t, "zalando"))) {
		if o.Kind == "PrometheusRule" {
			spec = o.doc["spec"]
		}
	}
	if spec == nil {
		t.Fatal("got no PrometheusRule from the zalando preset, want one")
	}
	dir := t.TempDir()
	rules, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join("testdata", "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"rules.yaml": rules, "alerts_test.yaml": tests} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"check", "rules", "rules.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(tl.Promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %v: %v\n%s", args, err, out)
		} else {
			t.Logf("promtool %v:\n%s", args, out)
		}
	}
}
