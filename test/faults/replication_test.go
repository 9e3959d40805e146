package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// replicated is a primary and a standby streaming from it, as Patroni or the Zalando
// operator run them, and the multi-host URL the servers use to follow the primary.
type replicated struct {
	t                *testing.T
	primary, standby *pglocal.Cluster
}

// startReplicated starts a migrated primary and a standby from its base backup. With sync,
// every commit on the primary waits until the standby has it (synchronous_commit on and the
// standby in synchronous_standby_names); without, the standby trails asynchronously.
func startReplicated(t *testing.T, sync bool) *replicated {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	opts := pglocal.Options{Logf: t.Logf}
	if sync {
		// A throwaway cluster commits asynchronously, which would not wait for the standby.
		opts.Settings = map[string]string{"synchronous_commit": "on"}
	}
	primary, err := pglocal.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start the primary: %v", err)
	}
	t.Cleanup(func() { _ = primary.Stop() })
	if _, err := store.Migrate(ctx, primary.URL("postgres")); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	standby, err := pglocal.Start(ctx, pglocal.Options{StandbyOf: primary, Logf: t.Logf})
	if err != nil {
		t.Fatalf("start the standby: %v", err)
	}
	t.Cleanup(func() { _ = standby.Stop() })
	r := &replicated{t: t, primary: primary, standby: standby}
	if sync {
		// Set after the base backup, so that the standby, once promoted, does not wait for
		// a synchronous standby of its own that does not exist.
		conn := connect(t, primary.URL("postgres"))
		for _, sql := range []string{`ALTER SYSTEM SET synchronous_standby_names = '*'`, `SELECT pg_reload_conf()`} {
			if _, err := conn.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
		waitFor(t, "the standby to become synchronous", func() bool {
			var n int
			err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'`).Scan(&n)
			return err == nil && n == 1
		})
	}
	r.waitReplayed()
	return r
}

// url lists both servers; pgx connects to the first that takes writes.
func (r *replicated) url() string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d,127.0.0.1:%d/postgres?sslmode=disable&target_session_attrs=read-write",
		pglocal.Superuser, r.primary.Port, r.standby.Port)
}

// waitReplayed waits until the standby has replayed everything the primary has written.
func (r *replicated) waitReplayed() {
	r.t.Helper()
	ctx := context.Background()
	var lsn string
	if err := connect(r.t, r.primary.URL("postgres")).QueryRow(ctx, `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn); err != nil {
		r.t.Fatal(err)
	}
	standby := connect(r.t, r.standby.URL("postgres"))
	waitFor(r.t, "the standby to replay the primary's writes", func() bool {
		var done bool
		err := standby.QueryRow(ctx, `SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn`, lsn).Scan(&done)
		return err == nil && done
	})
}

// freezeReplication stops the primary's WAL senders (SIGSTOP): from now on the primary
// acknowledges commits that the standby never receives, as when a network partition or a
// lagging standby meets a crash.
func (r *replicated) freezeReplication() {
	r.t.Helper()
	rows, err := connect(r.t, r.primary.URL("postgres")).Query(context.Background(), `SELECT pid FROM pg_stat_replication`)
	if err != nil {
		r.t.Fatal(err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil || len(pids) == 0 {
		r.t.Fatalf("WAL senders: got %v (%v), want one", pids, err)
	}
	for _, pid := range pids {
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			r.t.Fatalf("stop WAL sender %d: %v", pid, err)
		}
	}
}

// standbyMissesWrites reports whether the primary has written WAL the standby never received.
func (r *replicated) standbyMissesWrites() bool {
	r.t.Helper()
	ctx := context.Background()
	var received string
	if err := connect(r.t, r.standby.URL("postgres")).QueryRow(ctx, `SELECT pg_last_wal_receive_lsn()::text`).Scan(&received); err != nil {
		r.t.Fatal(err)
	}
	var behind bool
	if err := connect(r.t, r.primary.URL("postgres")).QueryRow(ctx, `SELECT pg_current_wal_insert_lsn() > $1::pg_lsn`, received).Scan(&behind); err != nil {
		r.t.Fatal(err)
	}
	return behind
}

// claimState reads the claim's state and generation straight from the database at url.
func claimState(t *testing.T, url string) (store.State, int64) {
	t.Helper()
	var state store.State
	var gen int64
	if err := connect(t, url).QueryRow(context.Background(), `SELECT state, generation FROM bootstrap_state`).Scan(&state, &gen); err != nil {
		t.Fatal(err)
	}
	return state, gen
}
