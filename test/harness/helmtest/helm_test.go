//go:build chart || node

package helmtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// What the chart's tests (tag chart) and the node's (tag node) share: the programs, the chart
// and helm run with homes of its own.

var (
	buildOnce sync.Once
	built     Tools
	buildErr  error
)

// tools builds the programs once for the package's tests (minutes on a cold cache).
func tools(t *testing.T) Tools {
	t.Helper()
	buildOnce.Do(func() { built, buildErr = Build() })
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// chartDir is the chart's directory.
func chartDir(t *testing.T) string {
	t.Helper()
	dir, err := ChartDir()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// presetFile is the values file of a preset.
func presetFile(t *testing.T, preset string) string {
	return filepath.Join(chartDir(t), "ci", preset+"-values.yaml")
}

// helm runs helm with its own home directories (nothing of the user's is read or written)
// and returns what it printed to stdout and to stderr.
func helm(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command(tools(t).Helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}
