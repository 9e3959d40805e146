package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// passwordCluster is a Postgres cluster of its own whose superuser signs in over loopback
// without a password (to set it up) and every other role with its password (SCRAM), as a
// postgres-operator's database does: pgtest's server trusts everyone, which would let a
// wrong password through.
type passwordCluster struct {
	port     int
	user     string
	password string
	database string
}

func mustPasswordCluster(t *testing.T) passwordCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatalf("start a Postgres cluster for the password test: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	// The file stays the server user's (written in place, not replaced): only its rules change.
	hba := "local all all trust\nhost all " + pglocal.Superuser + " 127.0.0.1/32 trust\n" +
		"host all all 127.0.0.1/32 scram-sha-256\nhost all all ::1/128 scram-sha-256\n"
	if err := os.WriteFile(filepath.Join(c.Dir, "pg_hba.conf"), []byte(hba), 0o600); err != nil {
		t.Fatal(err)
	}
	pc := passwordCluster{port: c.Port, user: "zalando_app", password: "pw-" + strconv.FormatInt(time.Now().UnixNano(), 36), database: "terdut"}
	admin, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, sql := range []string{
		"SELECT pg_reload_conf()",
		"SET password_encryption = 'scram-sha-256'",
		"CREATE ROLE " + pc.user + " LOGIN PASSWORD '" + pc.password + "'",
		"CREATE DATABASE " + pc.database + " OWNER " + pc.user,
	} {
		if _, err := admin.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", strings.ReplaceAll(sql, pc.password, "***"), err)
		}
	}
	return pc
}

// url is the database's URL without a password, as a postgres-operator's Service names it.
func (pc passwordCluster) url() string {
	return "postgres://127.0.0.1:" + strconv.Itoa(pc.port) + "/" + pc.database + "?sslmode=disable"
}

// TestServe_DatabasePasswordApart checks, on a database that asks for the password, that a
// server given a URL without one, --database-user and --database-password-file (a
// postgres-operator credentials Secret's username and password) connects and serves, as do the
// offline commands and the banner's claim command; that TERDUT_DATABASE_PASSWORD does the
// same; and that a wrong password stops it with an error that names neither password.
func TestServe_DatabasePasswordApart(t *testing.T) {
	pc := mustPasswordCluster(t)
	passwordFile := mustFile(t, "password", pc.password+"\n")
	e := env{"TERDUT_DATABASE_URL": pc.url(), "TERDUT_DATABASE_USER": pc.user, "TERDUT_DATABASE_PASSWORD_FILE": passwordFile}

	t.Run("WrongPassword", func(t *testing.T) {
		// First: it shows that the database does ask for the password.
		wrong := "wrong-" + pc.password
		r := runCmd(t, env{"TERDUT_DATABASE_URL": pc.url(), "TERDUT_DATABASE_USER": pc.user,
			"TERDUT_DATABASE_PASSWORD_FILE": mustFile(t, "wrong", wrong)}, "serve", "--listen", "127.0.0.1:0")
		if r.Err == nil || !strings.Contains(r.Err.Error(), "password authentication failed") {
			t.Fatalf("got %v, want the database's password authentication failed", r.Err)
		}
		for _, out := range []string{r.Err.Error(), r.Stdout, r.Stderr} {
			mustNotContain(t, "the error and the output", out, wrong, pc.password)
		}
	})
	t.Run("Serve", func(t *testing.T) {
		srv := startServe(t, e, "--metrics-listen", "127.0.0.1:0")
		status, body := srv.get(t, "/readyz", "")
		mustStatus(t, "GET /readyz", status, body, http.StatusOK, nil)
		var bodies []string
		for _, path := range []string{"/api/me", "/api/bootstrap/status", "/no-such-path"} {
			_, b := srv.get(t, path, "")
			bodies = append(bodies, b)
		}
		_, metrics := srv.doAt(t, listenURL(srv.Stderr.String(), "terdut-server listening for metrics"), http.MethodGet, "/metrics", "")
		// The banner's command, pasted into a new shell, claims the install.
		line := bannerCommand(srv.Stdout.String())
		if !strings.Contains(line, "TERDUT_DATABASE_PASSWORD_FILE="+passwordFile) {
			t.Fatalf("got the banner:\n%s\nwant a command with TERDUT_DATABASE_PASSWORD_FILE=%s", srv.Stdout, passwordFile)
		}
		out := mustRunAsWritten(t, mustBuild(t), line)
		if !strings.Contains(out, `"api_key": "`) {
			t.Fatalf("%s: got\n%s\nwant the claim's api_key", line, out)
		}
		if err := srv.stop(); err != nil {
			t.Fatalf("stop: %v", err)
		}
		for what, got := range map[string]string{"stdout": srv.Stdout.String(), "the log": srv.Stderr.String(),
			"the answers": strings.Join(bodies, "\n"), "/metrics": metrics, "the claim command": line + "\n" + out} {
			mustNotContain(t, what, got, pc.password)
		}
	})
	t.Run("PasswordVariable", func(t *testing.T) {
		r := mustRun(t, env{"TERDUT_DATABASE_URL": pc.url(), "TERDUT_DATABASE_USER": pc.user, "TERDUT_DATABASE_PASSWORD": pc.password},
			"bootstrap", "status")
		if !strings.Contains(r.Stdout, `"state": "complete"`) {
			t.Errorf("bootstrap status: got %s, want the claim Serve made", r.Stdout)
		}
		mustNotContain(t, "bootstrap status", r.Stdout+r.Stderr, pc.password)
		mustRun(t, e, "migrate")
	})
}
