// Package pgtest gives every test package its own PostgreSQL databases.
//
// Call Main from TestMain with the migration function of the schema under
// test. Main finds a server, creates a uniquely named template database,
// migrates it once and runs the tests; each test then gets a fresh, migrated
// database in milliseconds from MustDatabase:
//
//	func TestMain(m *testing.M) { pgtest.Main(m, store.Migrate) }
//
//	func TestSomething(t *testing.T) {
//		url := pgtest.MustDatabase(t)
//		...
//	}
//
// The server is, in this order: the one at TERDUT_TEST_DATABASE_URL (an admin
// URL; pgtest creates and drops its own databases there), a container of the
// image TERDUT_TEST_POSTGRES_IMAGE names (default postgres:15-alpine) when a
// Docker engine answers and holds that image, or a throwaway cluster from the
// local PostgreSQL binaries (see package pglocal). Main prints one line saying
// which it used ("pgtest: using [container] ..."), and why it fell back. If
// none works, Main exits non-zero and says why; it never skips tests.
//
// Containers are labelled with the test process that started them and removed
// when it ends, even by a panic or a signal: a reaper process (the test binary
// again) waits for the end of a pipe only this process writes, then removes
// them. Each run also removes the containers of earlier runs whose process is
// gone.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// EnvDatabaseURL names the environment variable holding the admin URL of an
// existing server to use instead of starting one.
const EnvDatabaseURL = "TERDUT_TEST_DATABASE_URL"

// EnvReport names a file to which Main appends its one line, prefixed with the test
// binary's name, so that CI can tell which server every package used: go test shows a
// passing package's output only with -v.
const EnvReport = "TERDUT_PGTEST_REPORT"

// setupTimeout bounds finding a server, creating the template and migrating it.
const setupTimeout = 5 * time.Minute

// current is the harness set up by Main for this test binary, and currentKind
// the kind of its server.
var (
	current     *harness
	currentKind string
)

// Main sets up the harness, runs the tests and exits with their status. Call
// it from TestMain. migrate must apply the schema to the database at the URL
// it is given and close every connection it opened before returning; nil
// means no schema.
func Main(m *testing.M, migrate func(ctx context.Context, databaseURL string) error) {
	os.Exit(run(m, migrate))
}

func run(m *testing.M, migrate func(ctx context.Context, databaseURL string) error) int {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	srv, err := findServer(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	// One line, whatever the errors it quotes hold.
	line := strings.Join(strings.Fields(fmt.Sprintf("pgtest: using [%s] %s", srv.kind, srv.desc)), " ")
	fmt.Fprintln(os.Stderr, line)
	currentKind = srv.kind
	if err := report(line); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %s: %v\n", EnvReport, err)
		return 2
	}
	defer func() {
		if err := srv.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: stop server: %v\n", err)
		}
	}()

	h, err := newHarness(ctx, srv.adminURL, migrate)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		return 2
	}
	defer h.close()
	current = h
	return m.Run()
}

// AdminURL returns the URL of the maintenance database ("postgres") of the
// server in use, connected as a superuser. Tests may use it to inspect the
// server; they must not drop databases they did not create.
func AdminURL() string {
	return mustHarness(nil).adminURL
}

// MustDatabase creates a fresh database with the migrated schema, drops it
// when tb and its subtests finish, and returns its URL. It fails tb if the
// database cannot be created.
func MustDatabase(tb testing.TB) string {
	tb.Helper()
	return mustHarness(tb).mustCreate(tb, true)
}

// MustEmptyDatabase is like MustDatabase but the database has no migrations
// applied, for testing the migrations themselves.
func MustEmptyDatabase(tb testing.TB) string {
	tb.Helper()
	return mustHarness(tb).mustCreate(tb, false)
}

// mustHarness returns the harness or fails tb (panics if tb is nil) when Main
// was not called.
func mustHarness(tb testing.TB) *harness {
	if current != nil {
		return current
	}
	const msg = "pgtest: Main was not called; add func TestMain(m *testing.M) { pgtest.Main(m, migrate) } to the package"
	if tb == nil {
		panic(msg)
	}
	tb.Helper()
	tb.Fatal(msg)
	return nil
}

// report appends "<test binary>: <line>" to the file EnvReport names, if any.
func report(line string) error {
	path := os.Getenv(EnvReport)
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s: %s\n", filepath.Base(os.Args[0]), line)
	return errors.Join(err, f.Close())
}
