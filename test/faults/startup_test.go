package faults

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// TestStartBehindStandbyWithoutDatabase starts terdut-server on a multi-host URL whose first
// host is a standby that has not replayed the creation of the server's database, as a Spilo
// replica that trails the leader right after the operator made the database: the standby
// answers "database does not exist", at which pgx stops trying hosts. The server must start
// against the writable host behind it, migrate there and serve.
func TestStartBehindStandbyWithoutDatabase(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	primary, err := pglocal.Start(ctx, pglocal.Options{Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	standby, err := pglocal.Start(ctx, pglocal.Options{StandbyOf: primary, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	thaw := freezeWALSenders(t, primary)
	t.Cleanup(thaw) // before the clusters stop: a frozen WAL sender holds up a fast shutdown
	if _, err := connect(t, primary.URL("postgres")).Exec(ctx, "CREATE DATABASE terdut"); err != nil {
		t.Fatal(err)
	}
	if _, err := pgx.Connect(ctx, standby.URL("terdut")); err == nil || !strings.Contains(err.Error(), "3D000") {
		t.Fatalf("the standby with database terdut: got %v, want 3D000 database does not exist", err)
	}
	url := fmt.Sprintf("postgres://%s@127.0.0.1:%d,127.0.0.1:%d/terdut?sslmode=disable&target_session_attrs=read-write",
		pglocal.Superuser, standby.Port, primary.Port)

	// With no host that takes it, the server exits and says what each host answered.
	noWriter := fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d,127.0.0.1:1/terdut?sslmode=disable&target_session_attrs=read-write",
		pglocal.Superuser, "secret-never-logged", standby.Port)
	refused := exec.CommandContext(ctx, binary, "--listen", "127.0.0.1:0", "--password-hash-cost", "4")
	refused.Env = append(os.Environ(), "TERDUT_DATABASE_URL="+noWriter)
	out, err := refused.CombinedOutput()
	if err == nil || !strings.Contains(string(out), `database "terdut" does not exist`) || !strings.Contains(string(out), "127.0.0.1:1") ||
		strings.Contains(string(out), "secret-never-logged") {
		t.Fatalf("terdut-server with only a standby without the database and a closed port: got %v and\n%s\nwant an exit that names each host's answer, never the password", err, out)
	}

	tokenFile := filepath.Join(t.TempDir(), "token")
	apitest.WriteFile(t, tokenFile, apitest.OperatorToken+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var logs apitest.SyncBuffer
	cmd := exec.Command(binary, "--listen", addr, "--password-hash-cost", "4")
	cmd.Env = append(os.Environ(), "TERDUT_DATABASE_URL="+url, "TERDUT_OPERATOR_TOKEN_FILE="+tokenFile)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })

	base := "http://" + addr
	for deadline := time.Now().Add(hangBound); ; time.Sleep(50 * time.Millisecond) {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("terdut-server exited (%v) with the standby listed first; want it to start on the primary. Its output:\n%s", err, logs.String())
		default:
		}
		if resp, err := http.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("terdut-server not ready after %s; its output:\n%s", hangBound, logs.String())
		}
	}
	srv := &apitest.Server{URL: base}
	srv.MustClaim(t)
	var migrated bool
	if err := connect(t, primary.URL("terdut")).QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bootstrap_state WHERE state = 'complete')`).Scan(&migrated); err != nil || !migrated {
		t.Fatalf("the primary's terdut database: claimed %v (%v), want migrated and claimed", migrated, err)
	}
}

// freezeWALSenders stops the primary's WAL senders (SIGSTOP): the standby receives nothing
// more until thaw is called.
func freezeWALSenders(t *testing.T, primary *pglocal.Cluster) (thaw func()) {
	t.Helper()
	conn := connect(t, primary.URL("postgres"))
	var pids []int
	waitFor(t, "the standby to stream", func() bool {
		rows, err := conn.Query(context.Background(), `SELECT pid FROM pg_stat_replication WHERE state = 'streaming'`)
		if err != nil {
			t.Fatal(err)
		}
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int])
		return err == nil && len(pids) > 0
	})
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	return func() {
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT)
		}
	}
}
