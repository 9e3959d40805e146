package pglocal

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	opts.Logf = t.Logf
	c, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	return c
}

func exec1(t *testing.T, c *Cluster, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func TestStartStopThrowaway(t *testing.T) {
	c := startCluster(t, Options{})
	exec1(t, c, "SELECT 1")
	pid := c.cmd.Process.Pid
	dir := c.Dir

	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("postmaster %d still exists after Stop (kill 0: %v)", pid, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("data dir %s not removed: %v", dir, err)
	}
	if err := c.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestPersistentReuse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pgdata")
	c := startCluster(t, Options{Dir: dir, Persistent: true})
	exec1(t, c, "CREATE TABLE kept (id int)")
	if err := c.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); err != nil {
		t.Fatalf("persistent data dir not kept: %v", err)
	}

	c = startCluster(t, Options{Dir: dir, Persistent: true})
	exec1(t, c, "INSERT INTO kept VALUES (1)") // fails unless the table survived
}

func TestThrowawayRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	keep := filepath.Join(dir, "precious")
	if err := os.WriteFile(keep, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if c, err := Start(ctx, Options{Dir: dir}); err == nil {
		_ = c.Stop()
		t.Fatal("Start succeeded on a non-empty dir")
	}
	if _, err := os.Stat(keep); err != nil {
		t.Fatalf("existing file was removed: %v", err)
	}
}

func TestURL(t *testing.T) {
	c := &Cluster{Port: 5433}
	want := "postgres://postgres@127.0.0.1:5433/app?sslmode=disable"
	if got := c.URL("app"); got != want {
		t.Errorf("URL = %q, want %q", got, want)
	}
}

// TestStandbyKillPromote runs a primary and a streaming standby, kills the primary like a
// crashed machine and promotes the standby, which then has the primary's data and takes writes.
func TestStandbyKillPromote(t *testing.T) {
	primary := startCluster(t, Options{})
	exec1(t, primary, "CREATE TABLE replicated (id int)")
	standby := startCluster(t, Options{StandbyOf: primary})
	exec1(t, primary, "INSERT INTO replicated VALUES (1)")

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, standby.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		var n int
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM replicated").Scan(&n); err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the standby did not receive the primary's row within a minute")
		}
	}
	if _, err := conn.Exec(ctx, "INSERT INTO replicated VALUES (2)"); err == nil {
		t.Fatal("the standby took a write before its promotion")
	}

	pid := primary.cmd.Process.Pid
	children := childrenOf(pid)
	if len(children) == 0 {
		t.Fatal("the primary's postmaster has no children to kill")
	}
	if err := primary.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	for _, p := range append(children, pid) {
		if running(p) {
			t.Errorf("process %d of the killed primary is still running", p)
		}
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatalf("Promote: %v", err)
	}
	if _, err := conn.Exec(ctx, "INSERT INTO replicated VALUES (2)"); err != nil {
		t.Fatalf("write after the promotion: %v", err)
	}
}

func TestSettingsOverrideDefaults(t *testing.T) {
	c := startCluster(t, Options{Settings: map[string]string{"synchronous_commit": "on"}})
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var got string
	if err := conn.QueryRow(ctx, "SHOW synchronous_commit").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if got != "on" {
		t.Errorf("synchronous_commit = %q, want on (Settings must override the throwaway default off)", got)
	}
}
