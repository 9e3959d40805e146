package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// settingsReference is the one complete reference of the settings, which the pages link to.
const settingsReference = "settings.md"

// settingsRowPattern reads a row of the reference's tables: | `--flag` | `TERDUT_FLAG` | ...
var settingsRowPattern = regexp.MustCompile("^\\| (?:`--([a-z0-9-]+)`|\\(none\\)) \\| `(TERDUT_[A-Z0-9_]+)` \\|")

// TestSettingsReference checks that the settings page has a row for every flag of the
// binary, with the flag's own TERDUT_* variable, in the group `terdut-server --help` shows it
// in, and no row for a flag the binary does not have; and a row for each variable that has no
// flag.
func TestSettingsReference(t *testing.T) {
	b, err := os.ReadFile(settingsReference)
	if err != nil {
		t.Fatal(err)
	}
	flags, vars := mustServeFlags(t), mustServeVariables(t)
	helpGroups := mustHelpGroups(t)
	var listed []string
	group := ""
	for _, line := range strings.Split(string(b), "\n") {
		if title, ok := strings.CutPrefix(line, "## "); ok {
			group = title
		}
		if !strings.HasPrefix(line, "| `") && !strings.HasPrefix(line, "| (none)") {
			continue
		}
		m := settingsRowPattern.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("got the row %q, want | `--flag` | `TERDUT_FLAG` | default | meaning |", line)
			continue
		}
		if m[1] == "" { // a variable with no flag, such as TERDUT_OIDC_CLIENT_SECRET
			if slices.Contains(flags, envFlag(m[2])) {
				t.Errorf("got %s without its flag, want the row of --%s", m[2], envFlag(m[2]))
			}
			if !slices.Contains(vars, m[2]) {
				t.Errorf("got a row for %s, want only variables cmd/terdut-server reads (%s)", m[2], strings.Join(vars, ", "))
			}
			listed = append(listed, m[2])
			continue
		}
		if envFlag(m[2]) != m[1] {
			t.Errorf("got --%s with the variable %s, want TERDUT_%s", m[1], m[2], strings.ToUpper(strings.ReplaceAll(m[1], "-", "_")))
		}
		if !slices.Contains(flags, m[1]) {
			t.Errorf("got a row for --%s, want only flags of config*.go (%s)", m[1], strings.Join(flags, ", "))
		}
		if helpGroups[m[1]] != group {
			t.Errorf("got --%s under %q, want it under %q, as terdut-server --help shows it", m[1], group, helpGroups[m[1]])
		}
		listed = append(listed, m[1])
	}
	for _, f := range append(flags, vars...) {
		if !slices.Contains(listed, f) {
			t.Errorf("got no row for %s in %s, want every flag and variable listed there", f, settingsReference)
		}
	}
}

// variablePattern finds the variables without a flag that cmd/terdut-server reads itself,
// such as getenv("TERDUT_OIDC_CLIENT_SECRET").
var variablePattern = regexp.MustCompile(`getenv\("(TERDUT_[A-Z0-9_]+)"\)`)

// mustServeVariables returns the TERDUT_* variables that config*.go reads by name: secrets,
// which have no flag.
func mustServeVariables(t *testing.T) []string {
	t.Helper()
	vars := mustConfigMatches(t, variablePattern)
	if !slices.Contains(vars, "TERDUT_OIDC_CLIENT_SECRET") {
		t.Fatalf("got variables %v from config*.go, want TERDUT_OIDC_CLIENT_SECRET among them: has the way they are read changed?", vars)
	}
	return vars
}

// mustServerBinary builds terdut-server into a directory of the test and returns its path.
func mustServerBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "terdut-server")
	build := exec.Command("go", "build", "-o", bin, "../cmd/terdut-server")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// helpFlagPattern reads a flag's first line in terdut-server --help.
var helpFlagPattern = regexp.MustCompile(`^  --([a-z0-9-]+)`)

// mustHelpGroups returns the group each flag is under in terdut-server --help.
func mustHelpGroups(t *testing.T) map[string]string {
	t.Helper()
	out, err := exec.Command(mustServerBinary(t), "--help").Output()
	if err != nil {
		t.Fatalf("terdut-server --help: %v", err)
	}
	groups := map[string]string{}
	group := ""
	for _, line := range strings.Split(string(out), "\n") {
		if title, ok := strings.CutSuffix(line, ":"); ok && line != "" && !strings.HasPrefix(line, " ") {
			group = title
		}
		if m := helpFlagPattern.FindStringSubmatch(line); m != nil {
			groups[m[1]] = group
		}
	}
	if len(groups) < 10 {
		t.Fatalf("got %d flags in terdut-server --help, want them all:\n%s", len(groups), out)
	}
	return groups
}
