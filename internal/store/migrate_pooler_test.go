package store_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// envHolder, in a child test process, names the database URL (through a pooler) on which the
// child takes the migration lock, says so on stdout, and waits to be killed.
const envHolder = "TERDUT_STORE_TEST_LOCK_HOLDER"

// holderLease is the lease of that child's lock: short, since the test waits it out.
const holderLease = 2 * time.Second

// runHolder is the child process of TestMigrate_Pooler/HolderKilled.
func runHolder(url string) {
	store.SetLockLeaseForTest(holderLease, holderLease/4, func() {
		fmt.Println("holding")
		select {} // killed here, holding the lock
	})
	_, err := store.Migrate(context.Background(), url, store.WithPooler(store.PoolerTransaction))
	fmt.Fprintln(os.Stderr, "holder: Migrate returned:", err)
	os.Exit(3)
}

// TestMigrate_Pooler: replicas starting at once behind a transaction-mode PgBouncer (as
// Zalando's pooler), with other traffic on the same server connections, migrate once and all
// start; a replica killed while it holds the migration lock blocks the next start only until
// its lease runs out.
func TestMigrate_Pooler(t *testing.T) {
	ctx := context.Background()
	pooled := store.WithPooler(store.PoolerTransaction)

	t.Run("ConcurrentReplicas", func(t *testing.T) {
		// Few server connections for many clients, so that the replicas' statements and the
		// other traffic's share them.
		p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{PoolSize: 3})
		const rounds, replicas = 4, 6
		for round := range rounds {
			url := p.URL(t, pgtest.MustEmptyDatabase(t))
			stop := make(chan struct{})
			var other sync.WaitGroup
			var otherQueries atomic.Int64
			otherErrs := make(chan error, 4)
			for range 4 {
				other.Go(func() { otherErrs <- otherTraffic(ctx, url, stop, &otherQueries) })
			}
			applied := make([]int, replicas)
			errs := make([]error, replicas)
			var wg sync.WaitGroup
			for i := range replicas {
				wg.Go(func() { applied[i], errs[i] = store.Migrate(ctx, url, pooled) })
			}
			wg.Wait()
			close(stop)
			other.Wait()
			close(otherErrs)
			for err := range otherErrs {
				if err != nil {
					t.Errorf("round %d: other traffic on the pool: %v", round, err)
				}
			}
			total := 0
			for i := range replicas {
				if errs[i] != nil {
					t.Errorf("round %d: replica %d: got %v, want nil", round, i, errs[i])
				}
				total += applied[i]
			}
			if total != latestVersion {
				t.Fatalf("round %d: migrations applied across replicas: got %d, want %d", round, total, latestVersion)
			}
			st := mustOpenPooled(t, url)
			if n := mustCount(t, st, `SELECT count(*) FROM goose_db_version WHERE version_id > 0 AND is_applied`); n != latestVersion {
				t.Fatalf("round %d: goose_db_version rows: got %d, want one per migration, %d", round, n, latestVersion)
			}
			if n := mustCount(t, st, `SELECT count(*) FROM goose_lock WHERE locked`); n != 0 {
				t.Fatalf("round %d: migration locks still held after every replica started: got %d, want 0", round, n)
			}
			if err := st.CheckSchema(ctx); err != nil {
				t.Fatalf("round %d: CheckSchema: got %v, want nil", round, err)
			}
			if otherQueries.Load() == 0 {
				t.Fatalf("round %d: the other traffic ran no query", round)
			}
		}
	})

	t.Run("HolderKilled", func(t *testing.T) {
		p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{PoolSize: 3})
		url := p.URL(t, pgtest.MustEmptyDatabase(t))
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), envHolder+"="+url)
		var stderr strings.Builder
		child.Stderr = &stderr
		out, err := child.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "holding\n" {
			_ = child.Process.Kill()
			_ = child.Wait()
			t.Fatalf("the holder did not take the lock: got %q, %v\n%s", line, err, stderr.String())
		}
		if err := child.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = child.Wait()

		admin := mustOpenPooled(t, url)
		var expires time.Time
		if err := admin.Pool().QueryRow(ctx, `SELECT lease_expires_at FROM goose_lock WHERE locked`).Scan(&expires); err != nil {
			t.Fatalf("the killed holder's lock: %v", err)
		}
		n, err := store.Migrate(ctx, url, pooled)
		if err != nil || n != latestVersion {
			t.Fatalf("Migrate after the holder was killed: got %d, %v, want %d, nil", n, err, latestVersion)
		}
		// The next start took the lock over only once the dead holder's lease had run out
		// (both times are the database's).
		var first time.Time
		if err := admin.Pool().QueryRow(ctx, `SELECT min(tstamp) FROM goose_db_version WHERE version_id > 0`).Scan(&first); err != nil {
			t.Fatal(err)
		}
		if first.Before(expires) {
			t.Fatalf("first migration applied at %v, before the killed holder's lease ran out at %v", first, expires)
		}
		if n := mustCount(t, admin, `SELECT count(*) FROM goose_lock WHERE locked`); n != 0 {
			t.Fatalf("migration locks held after the start: got %d, want 0", n)
		}
	})

	t.Run("RefusesNamedStatements", func(t *testing.T) {
		url := pgtest.MustDatabase(t) + "&default_query_exec_mode=cache_statement"
		if !strings.Contains(url, "?") {
			url = strings.Replace(url, "&", "?", 1)
		}
		for _, err := range []error{
			store.CheckURL(url, pooled),
			func() error { _, err := store.Migrate(ctx, url, pooled); return err }(),
			func() error { _, err := store.Open(ctx, url, pooled); return err }(),
		} {
			if err == nil || !strings.Contains(err.Error(), "transaction-mode pooler") {
				t.Errorf("default_query_exec_mode=cache_statement behind a transaction pooler: got %v, want an error that says why", err)
			}
		}
		if err := store.CheckURL(url); err != nil {
			t.Errorf("the same URL directly: got %v, want nil", err)
		}
	})
}

// otherTraffic runs statements through the pooler until stop is closed, as another
// application on the same pool would: short transactions and single statements.
func otherTraffic(ctx context.Context, url string, stop <-chan struct{}, n *atomic.Int64) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = pgx.QueryExecModeExec
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(42), now()`)
			return err
		})
		if err == nil {
			_, err = conn.Exec(ctx, `SELECT count(*) FROM pg_class`)
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
		n.Add(1)
	}
}

// mustOpenPooled opens a store through a transaction-mode pooler.
func mustOpenPooled(tb testing.TB, url string) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), url, store.WithPooler(store.PoolerTransaction))
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(st.Close)
	return st
}
