package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// definedFlagPattern finds the flags the config*.go files define, as docs/settings_test.go
// does: read from the source, so that the help is checked against the code, not itself.
var definedFlagPattern = regexp.MustCompile(`fs\.\w+Var\(&[\w.]+,\s*"([a-z0-9-]+)"`)

func mustDefinedFlags(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("config*.go")
	if err != nil {
		t.Fatal(err)
	}
	var flags []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range definedFlagPattern.FindAllStringSubmatch(string(src), -1) {
			flags = append(flags, m[1])
		}
	}
	for _, want := range []string{"listen", "database-url", "database-password-file", "metrics-listen", "operator-oidc-issuer"} {
		if !slices.Contains(flags, want) {
			t.Fatalf("got flags %v from config*.go, want them to include %q: has the way flags are defined changed?", flags, want)
		}
	}
	return flags
}

// helpFlagLine reads a flag's first line of --help: its name, then its variable.
var helpFlagLine = regexp.MustCompile(`^  --([a-z0-9-]+)(?: \w+)?\s+(TERDUT_[A-Z0-9_]+)`)

// TestHelp_EveryFlag checks that terdut-server --help lists every flag once, under a group,
// with its own TERDUT_* variable, says which settings are required, and lists the commands.
func TestHelp_EveryFlag(t *testing.T) {
	out := mustRun(t, env{}, "--help").Stdout
	seen := map[string]int{}
	group := ""
	for _, line := range strings.Split(out, "\n") {
		if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") && line != "Usage:" {
			group = line
		}
		m := helpFlagLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		seen[m[1]]++
		if group == "" {
			t.Errorf("got --%s before any group heading, want every flag under one", m[1])
		}
		if want := envName(m[1]); m[2] != want {
			t.Errorf("got --%s with %s, want %s", m[1], m[2], want)
		}
	}
	flags := mustDefinedFlags(t)
	for _, f := range flags {
		if seen[f] != 1 {
			t.Errorf("got --%s %d times in --help, want once", f, seen[f])
		}
	}
	for f := range seen {
		if !slices.Contains(flags, f) {
			t.Errorf("got --%s in --help, want only flags config*.go defines", f)
		}
	}
	for _, want := range []string{
		"Listeners:\n", "Database:\n", "The claim and the operator's identity:\n", "Sign-in:\n", "Single sign-on:\n",
		"Limits:\n", "Housekeeping:\n", "Logging:\n",
		"TERDUT_DATABASE_URL, required: this, --database-url-file or their variable",
		"TERDUT_OIDC_CLIENT_ID, required with --oidc-issuer",
		"TERDUT_DATABASE_PASSWORD (a variable, no flag)", "TERDUT_OIDC_CLIENT_SECRET (a variable, no flag)",
		"terdut-server [serve] [flags]", "terdut-server migrate [flags]", "terdut-server bootstrap claim [flags]",
		"terdut-server bootstrap status [flags]", "terdut-server bootstrap reset [flags]", "terdut-server audit [flags]",
		"terdut-server version", "terdut-server help [COMMAND]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("got --help without %q, want it:\n%s", want, out)
		}
	}
	if strings.Contains(out, "terdut-server claim") {
		t.Errorf("got --help offering `terdut-server claim`, which is no command")
	}
}

// TestHelp_Commands checks that every command answers --help (and help COMMAND) with success
// and its usage, without a database: nothing here may need one.
func TestHelp_Commands(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--help"}, []string{"Usage:", "--listen"}},
		{[]string{"-h"}, []string{"Usage:", "--listen"}},
		{[]string{"help"}, []string{"Usage:", "--listen"}},
		{[]string{"serve", "--help"}, []string{"Usage:", "--listen"}},
		{[]string{"help", "serve"}, []string{"Usage:", "--listen"}},
		{[]string{"migrate", "--help"}, []string{"usage: terdut-server migrate", "--database-url", "TERDUT_DATABASE_PASSWORD_FILE"}},
		{[]string{"help", "migrate"}, []string{"usage: terdut-server migrate"}},
		{[]string{"bootstrap", "--help"}, []string{"usage: terdut-server bootstrap status|claim|reset", "claim", "reset"}},
		{[]string{"bootstrap", "-h"}, []string{"usage: terdut-server bootstrap status|claim|reset"}},
		{[]string{"help", "bootstrap"}, []string{"usage: terdut-server bootstrap status|claim|reset"}},
		{[]string{"bootstrap", "status", "--help"}, []string{"usage: terdut-server bootstrap status", "--database-url-file"}},
		{[]string{"bootstrap", "claim", "--help"}, []string{"usage: terdut-server bootstrap claim", "--database-user"}},
		{[]string{"bootstrap", "reset", "-h"}, []string{"usage: terdut-server bootstrap reset", "--database-url"}},
		{[]string{"audit", "--help"}, []string{"usage: terdut-server audit", "actor=", "--database-url"}},
		{[]string{"version", "--help"}, []string{"usage: terdut-server version"}},
		{[]string{"help", "version"}, []string{"usage: terdut-server version"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := mustRun(t, env{}, tt.args...)
			for _, w := range tt.want {
				if !strings.Contains(r.Stdout, w) {
					t.Errorf("got stdout without %q, want it:\n%s", w, r.Stdout)
				}
			}
			if r.Stderr != "" {
				t.Errorf("got stderr %q, want the help on stdout alone", r.Stderr)
			}
		})
	}
}

// TestHelp_UnknownFlag checks that a mistyped flag is answered in a line that names it and
// points at --help, not with every flag.
func TestHelp_UnknownFlag(t *testing.T) {
	for _, args := range [][]string{
		{"--no-such-setting"}, {"serve", "--listen", ":0", "--no-such-setting"}, {"migrate", "--no-such-setting"},
		{"bootstrap", "claim", "--no-such-setting"}, {"audit", "--no-such-setting"}, {"-no-such-setting=1"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := runCmd(t, env{}, args...)
			if r.Err == nil {
				t.Fatalf("got no error, want one naming --no-such-setting")
			}
			// What main prints: "terdut-server: " and the error, after anything run wrote.
			printed := strings.TrimSpace(r.Stdout + r.Stderr + "terdut-server: " + r.Err.Error())
			if n := len(strings.Split(printed, "\n")); n > 2 {
				t.Errorf("got %d lines:\n%s\nwant at most 2", n, printed)
			}
			for _, w := range []string{"unknown flag --no-such-setting", "--help"} {
				if !strings.Contains(r.Err.Error(), w) {
					t.Errorf("got %q, want it to contain %q", r.Err, w)
				}
			}
		})
	}
	r := runCmd(t, env{}, "--session-ttl", "forever")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "-session-ttl") || !strings.Contains(r.Err.Error(), "see terdut-server --help") ||
		r.Stdout+r.Stderr != "" {
		t.Errorf("got %v, stdout %q, stderr %q; want one error naming --session-ttl and --help", r.Err, r.Stdout, r.Stderr)
	}
	r = runCmd(t, env{}, "claim")
	if r.Err == nil || !strings.Contains(r.Err.Error(), `unknown command "claim"`) || !strings.Contains(r.Err.Error(), "terdut-server --help") {
		t.Errorf("got %v, want unknown command \"claim\" and a pointer to --help", r.Err)
	}
}

// TestVersion checks that --version and version print the version stamped at build time
// (-ldflags -X main.version=...), and the Go release.
func TestVersion(t *testing.T) {
	defer func(v, r string) { version, revision = v, r }(version, revision)
	version, revision = "v1.2.3-test", "0123abcd"
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		out := mustRun(t, env{}, args...).Stdout
		if want := "terdut-server v1.2.3-test (revision 0123abcd, go"; !strings.HasPrefix(out, want) {
			t.Errorf("%v: got %q, want it to start with %q", args, out, want)
		}
	}
	version, revision = "", ""
	if b := readBuildInfo(); b.Version == "" || b.Revision == "" || !strings.HasPrefix(b.GoVersion, "go") {
		t.Errorf("got %+v unstamped, want a version (the module's, or devel), a revision (or unknown) and the Go release", b)
	}
	if r := runCmd(t, env{}, "version", "now"); r.Err == nil {
		t.Errorf("version now: got no error, want one")
	}
}

// TestVersion_Stamped checks that the -ldflags of make build, scripts/server-image.sh and the
// Dockerfile reach the binary: a build stamped so reports that version and revision.
func TestVersion_Stamped(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "terdut-server")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7-stamp -X main.revision=feedc0de", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if want := "terdut-server v9.8.7-stamp (revision feedc0de, go"; err != nil || !strings.HasPrefix(string(out), want) {
		t.Fatalf("terdut-server --version: got %q, %v; want it to start with %q", out, err, want)
	}
	for _, f := range []string{"../../Makefile", "../../Dockerfile", "../../scripts/server-image.sh"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "-X main.version=") || !strings.Contains(string(b), "-X main.revision=") {
			t.Errorf("got %s without -X main.version= and -X main.revision=, want its build stamped", f)
		}
	}
}
