// Package faults proves that the claim and sign-in stay correct when Postgres or a replica
// fails in the middle: each test runs its own PostgreSQL cluster so that it can stop it.
// With the build tag patroni (make failover), TestPatroni does it on a Patroni cluster
// (test/harness/patronitest), the engine a Zalando/Spilo install runs.
package faults

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// binary is terdut-server built once for the tests that kill a replica.
var binary string

// Budgets that bound a hang, never how fast things go: the tests run beside others on busy
// machines, where starting a cluster can take tens of seconds.
const (
	// hangBound is how long a test waits for a condition before failing.
	hangBound = 2 * time.Minute
	// answerBound is the longest a request may take while the database is down or failing
	// over (the store gives up connecting after 5 s).
	answerBound = 20 * time.Second
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "terdut-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	binary = filepath.Join(dir, "terdut-server")
	build := exec.Command("go", "build", "-o", binary, "../../cmd/terdut-server")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build terdut-server:", err)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cluster is a PostgreSQL server the test can stop and start again on the same port and data.
type cluster struct {
	t    *testing.T
	opts pglocal.Options
	c    *pglocal.Cluster
}

func startCluster(t *testing.T) *cluster {
	t.Helper()
	cl := &cluster{t: t, opts: pglocal.Options{Dir: filepath.Join(t.TempDir(), "pgdata"), Persistent: true, Disposable: true}}
	cl.start()
	cl.opts.Port = cl.c.Port
	t.Cleanup(func() { _ = cl.c.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	if _, err := store.Migrate(ctx, cl.url()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return cl
}

func (cl *cluster) start() {
	cl.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	c, err := pglocal.Start(ctx, cl.opts)
	if err != nil {
		cl.t.Fatalf("start postgres: %v", err)
	}
	cl.c = c
}

func (cl *cluster) stop() {
	cl.t.Helper()
	if err := cl.c.Stop(); err != nil {
		cl.t.Fatalf("stop postgres: %v", err)
	}
}

func (cl *cluster) url() string { return cl.c.URL("postgres") }

// waitFor polls cond until it holds, failing the test after hangBound.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(hangBound); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", hangBound, what)
		}
	}
}
