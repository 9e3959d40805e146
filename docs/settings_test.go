package docs

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// settingsReference is the one complete reference of the settings, which the pages link to.
const settingsReference = "../README.md"

// settingsRowPattern reads a row of the reference's table: | `--flag` | `TERDUT_FLAG` | ...
var settingsRowPattern = regexp.MustCompile("^\\| (?:`--([a-z0-9-]+)`|\\(none\\)) \\| `(TERDUT_[A-Z0-9_]+)` \\|")

// TestSettingsReference checks that the settings table of the README has a row for every
// flag of the binary, with the flag's own TERDUT_* variable, and no row for a flag the
// binary does not have.
func TestSettingsReference(t *testing.T) {
	b, err := os.ReadFile(settingsReference)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Settings\n")
	if !ok {
		t.Fatalf("got no \"## Settings\" section in %s, want the settings reference there", settingsReference)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	flags := mustServeFlags(t)
	var listed []string
	for _, line := range strings.Split(section, "\n") {
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
			continue
		}
		if envFlag(m[2]) != m[1] {
			t.Errorf("got --%s with the variable %s, want TERDUT_%s", m[1], m[2], strings.ToUpper(strings.ReplaceAll(m[1], "-", "_")))
		}
		if !slices.Contains(flags, m[1]) {
			t.Errorf("got a row for --%s, want only flags of config.go (%s)", m[1], strings.Join(flags, ", "))
		}
		listed = append(listed, m[1])
	}
	for _, f := range flags {
		if !slices.Contains(listed, f) {
			t.Errorf("got no row for --%s in %s's settings, want every flag listed there", f, settingsReference)
		}
	}
}
