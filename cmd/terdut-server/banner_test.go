package main

import (
	"bytes"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// mustBuild builds terdut-server into a directory of its own and returns the directory, to
// put on PATH: the banner's commands call the program as terdut-server when it runs under
// another name (this test binary).
func mustBuild(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "terdut-server"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return dir
}

// bannerCommand returns the `bootstrap claim` command line the banner offers after
// "Or run:", or "" when it offers none.
func bannerCommand(banner string) string {
	_, after, ok := strings.Cut(banner, "Or run:\n  ")
	if !ok {
		return ""
	}
	line, _, _ := strings.Cut(after, "\n")
	return line
}

// mustRunAsWritten runs a command line with bash in an environment of PATH (with bin first)
// and HOME alone, as a person would paste it into a new shell, and returns its output.
func mustRunAsWritten(t *testing.T, bin, line string) string {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash is not installed (%v): the banner's command is run with bash -c", err)
	}
	cmd := exec.Command(bash, "-c", line)
	cmd.Env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + t.TempDir()}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", line, err, &stdout, &stderr)
	}
	return stdout.String() + stderr.String()
}

// withPassword returns the database URL u with a password, and the password: its own if it
// has one, else secretPassword, which the tests' servers (trust over loopback) never ask for.
func withPassword(t *testing.T, u string) (string, string) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := parsed.User.Password(); ok {
		return u, p
	}
	parsed.User = url.UserPassword(parsed.User.Username(), secretPassword)
	return parsed.String(), secretPassword
}

// TestServe_BannerClaimCommandRuns checks that the `bootstrap claim` command the start-up
// banner prints runs as written in a new shell, and claims this server's install; and that
// when the database URL carries a password the banner prints no command with it, and says
// which settings the command needs instead.
func TestServe_BannerClaimCommandRuns(t *testing.T) {
	bin := mustBuild(t)
	t.Run("URLFile", func(t *testing.T) {
		dbURL, password := withPassword(t, pgtest.MustEmptyDatabase(t))
		srv := startServe(t, env{"TERDUT_DATABASE_URL_FILE": mustFile(t, "database-url", dbURL+"\n")})
		banner := srv.Stdout.String()
		mustNotContain(t, "the banner", banner, password)
		line := bannerCommand(banner)
		if !strings.HasPrefix(line, "TERDUT_DATABASE_URL_FILE=/") || !strings.HasSuffix(line, " terdut-server bootstrap claim") {
			t.Fatalf("got the banner:\n%s\nwant Or run: TERDUT_DATABASE_URL_FILE=/... terdut-server bootstrap claim", banner)
		}
		out := mustRunAsWritten(t, bin, line)
		mustNotContain(t, "the command's output", out, password)
		if !strings.Contains(out, `"api_key": "`) {
			t.Fatalf("%s: got\n%s\nwant the claim's api_key", line, out)
		}
		var st struct{ State string }
		status, body := srv.get(t, "/api/bootstrap/status", "")
		mustStatus(t, "GET /api/bootstrap/status", status, body, http.StatusOK, &st)
		if st.State != "complete" {
			t.Errorf("got state %q after the banner's command, want complete", st.State)
		}
	})
	t.Run("URLWithPassword", func(t *testing.T) {
		dbURL, password := withPassword(t, pgtest.MustEmptyDatabase(t))
		srv := startServe(t, env{"TERDUT_DATABASE_URL": dbURL})
		banner := srv.Stdout.String()
		mustNotContain(t, "the banner", banner, password)
		if line := bannerCommand(banner); line != "" {
			t.Errorf("got the command %q, want none: the URL is a secret", line)
		}
		for _, want := range []string{"bootstrap claim` with this server's database settings", "TERDUT_DATABASE_URL", "--database-password-file"} {
			if !strings.Contains(banner, want) {
				t.Errorf("got the banner:\n%s\nwant it to contain %q", banner, want)
			}
		}
	})
}

// TestCLICommand checks the command lines the banner builds from each way of giving the
// database, and that no secret setting ever makes one.
func TestCLICommand(t *testing.T) {
	tests := []struct {
		name string
		db   DatabaseConfig
		want string // "": none may be printed
	}{
		{"URL", DatabaseConfig{URL: "postgres://terdut@db:5432/terdut?sslmode=disable"},
			"TERDUT_DATABASE_URL='postgres://terdut@db:5432/terdut?sslmode=disable' terdut-server bootstrap claim"},
		{"URLQuoted", DatabaseConfig{URL: "postgres://terdut@db:5432,db2:5432/terdut?target_session_attrs=read-write&x=it's"},
			`TERDUT_DATABASE_URL='postgres://terdut@db:5432,db2:5432/terdut?target_session_attrs=read-write&x=it'\''s' terdut-server bootstrap claim`},
		{"URLFile", DatabaseConfig{URL: "postgres://terdut:" + secretPassword + "@db/terdut", URLFile: "/run/db/url"},
			"TERDUT_DATABASE_URL_FILE=/run/db/url terdut-server bootstrap claim"},
		{"UserAndPasswordFile", DatabaseConfig{URL: "postgres://db/terdut", User: "app", PasswordFile: "/run/db/password"},
			"TERDUT_DATABASE_URL=postgres://db/terdut TERDUT_DATABASE_USER=app TERDUT_DATABASE_PASSWORD_FILE=/run/db/password terdut-server bootstrap claim"},
		{"BehindATransactionPooler", DatabaseConfig{URL: "postgres://app@db-pooler/terdut", PasswordFile: "/run/db/password", Pooler: store.PoolerTransaction},
			"TERDUT_DATABASE_URL=postgres://app@db-pooler/terdut TERDUT_DATABASE_POOLER=transaction TERDUT_DATABASE_PASSWORD_FILE=/run/db/password terdut-server bootstrap claim"},
		{"DirectSaysNoPooler", DatabaseConfig{URL: "postgres://app@db/terdut", Pooler: store.PoolerNone},
			"TERDUT_DATABASE_URL=postgres://app@db/terdut terdut-server bootstrap claim"},
		{"URLWithPassword", DatabaseConfig{URL: "postgres://terdut:" + secretPassword + "@db/terdut"}, ""},
		{"PasswordVariable", DatabaseConfig{URL: "postgres://db/terdut", PasswordVar: true}, ""},
		{"KeywordValue", DatabaseConfig{URL: "host=db password=" + secretPassword}, ""},
		{"KeywordValueWithoutSecret", DatabaseConfig{URL: "host=db dbname=terdut"},
			"TERDUT_DATABASE_URL='host=db dbname=terdut' terdut-server bootstrap claim"},
		{"QueryPassword", DatabaseConfig{URL: "postgres://terdut@db/terdut?sslmode=require&password=" + secretPassword}, ""},
		{"QuerySSLPassword", DatabaseConfig{URL: "postgres://terdut@db/terdut?sslkey=/k&sslpassword=" + secretPassword}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := cliCommand(tt.db, "bootstrap claim")
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("got %q, %v; want %q", got, ok, tt.want)
			}
			mustNotContain(t, "the command", orRunClaim(tt.db), secretPassword)
		})
	}
}
