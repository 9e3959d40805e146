package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestMigrate_LockLost: goose's table lock is a lease its holder renews by heartbeats; when
// they fail for longer than the lease while the holder still migrates (its connections cut,
// the database briefly out of reach), or another replica takes the lock over, another replica
// may migrate at the same time. The holder does not go on as if it still held the lock: it
// stops its migration and Migrate fails with ErrMigrationLockLost, naming why. A long
// migration whose heartbeats go through keeps its lock.
func TestMigrate_LockLost(t *testing.T) {
	const lease, heartbeat = 2 * time.Second, 400 * time.Millisecond
	ctx := context.Background()
	// hold runs, as the migration holding the lock, what the subtest does to it meanwhile.
	hold := func(t *testing.T, meanwhile func(url string)) (string, error) {
		t.Helper()
		url := pgtest.MustEmptyDatabase(t)
		store.SetLockLeaseForTest(lease, heartbeat, func() { meanwhile(url) })
		t.Cleanup(func() { store.SetLockLeaseForTest(15*time.Second, 3*time.Second, nil) })
		_, err := store.Migrate(ctx, url)
		return url, err
	}
	admin := func(t *testing.T, url string) *pgx.Conn {
		t.Helper()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Error(err)
			return nil
		}
		return c
	}

	t.Run("HeartbeatsFail", func(t *testing.T) {
		_, err := hold(t, func(url string) {
			c := admin(t, url)
			if c == nil {
				return
			}
			defer c.Close(ctx)
			// The database refuses every renewal of the lease for twice its length, while
			// every other statement goes through: the holder's heartbeats fail, its migration
			// could go on.
			if _, err := c.Exec(ctx, `CREATE FUNCTION refuse_renewal() RETURNS trigger LANGUAGE plpgsql AS
				$$BEGIN RAISE EXCEPTION 'the test refuses this renewal'; END$$;
				CREATE TRIGGER refuse_renewal BEFORE UPDATE ON goose_lock FOR EACH ROW EXECUTE FUNCTION refuse_renewal()`); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(2 * lease)
			if _, err := c.Exec(ctx, `DROP TRIGGER refuse_renewal ON goose_lock`); err != nil {
				t.Error(err)
			}
		})
		if !errors.Is(err, store.ErrMigrationLockLost) {
			t.Fatalf("Migrate with its lease run out: got %v, want ErrMigrationLockLost", err)
		}
	})
	t.Run("HeartbeatsHang", func(t *testing.T) {
		_, err := hold(t, func(url string) {
			c := admin(t, url)
			if c == nil {
				return
			}
			defer c.Close(ctx)
			// The lock's row is locked by another transaction for twice the lease: every
			// heartbeat waits, none fails, none renews.
			tx, err := c.Begin(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := tx.Exec(ctx, `SELECT 1 FROM goose_lock FOR UPDATE`); err != nil {
				t.Error(err)
			}
			time.Sleep(2 * lease)
			_ = tx.Rollback(ctx)
		})
		if !errors.Is(err, store.ErrMigrationLockLost) {
			t.Fatalf("Migrate with its heartbeats hung past the lease: got %v, want ErrMigrationLockLost", err)
		}
	})
	t.Run("TakenOver", func(t *testing.T) {
		_, err := hold(t, func(url string) {
			c := admin(t, url)
			if c == nil {
				return
			}
			defer c.Close(ctx)
			// Another replica took the lock, as it may once a lease has run out.
			if _, err := c.Exec(ctx, `UPDATE goose_lock SET locked_by = 'another replica',
				lease_expires_at = now() + interval '1 minute'`); err != nil {
				t.Error(err)
			}
			time.Sleep(lease)
		})
		if !errors.Is(err, store.ErrMigrationLockLost) {
			t.Fatalf("Migrate with its lock taken over: got %v, want ErrMigrationLockLost", err)
		}
	})
	t.Run("LongMigrationKeepsItsLock", func(t *testing.T) {
		url, err := hold(t, func(string) { time.Sleep(2 * lease) })
		if err != nil {
			t.Fatalf("Migrate holding the lock for twice its lease: got %v, want nil", err)
		}
		st := mustOpen(t, url)
		if err := st.CheckSchema(ctx); err != nil {
			t.Fatalf("schema after the migration: got %v, want current", err)
		}
	})
}
