package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/terdut-server/terdut-server/migrations"
)

// ErrSchemaOutdated means the database schema is older than this binary; run `terdut-server migrate`.
var ErrSchemaOutdated = errors.New("database schema is older than this terdut-server")

// ErrMigrationLockLost means the migration lock was lost while migrating (its lease ran out
// unrenewed, or another replica took it over), so the migration was stopped: see Migrate.
var ErrMigrationLockLost = errors.New("the migration lock was lost while migrating: stopped, so that two replicas do not migrate at once; start again")

// ErrSchemaTooNew means the database was migrated by a newer terdut-server that this binary does not know.
var ErrSchemaTooNew = errors.New("database schema is newer than this terdut-server")

// latestVersion is the newest migration this binary ships, from the numeric prefixes of
// the embedded files' names.
var latestVersion = sync.OnceValues(func() (int64, error) {
	files, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, f := range files {
		prefix, _, _ := strings.Cut(f, "_")
		v, err := strconv.ParseInt(prefix, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("migration %s: the name must start with its version number", f)
		}
		latest = max(latest, v)
	}
	return latest, nil
})

func openSQL(url string, o options) (*sql.DB, *hostOrder, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, nil, fmt.Errorf("parse database URL: %w", redactParseError(err))
	}
	if err := o.applyTo(url, cfg); err != nil {
		return nil, nil, err
	}
	order := hostOrderFor(url, &cfg.Config)
	if order == nil {
		return stdlib.OpenDB(*cfg), nil, nil
	}
	return stdlib.OpenDB(*cfg, stdlib.OptionBeforeConnect(order.beforeConnect)), order, nil
}

// Migrate applies every pending migration to the database at url and returns how many ran.
// Concurrent callers (several replicas starting at once, directly or through a transaction-mode
// pooler) are serialized by goose's table lock, a row with a lease (see lockLease). A holder
// that loses the lock while it migrates (its lease ran out while its heartbeats failed, or
// another replica took the lock over) stops its migration, which rolls back, and Migrate
// returns ErrMigrationLockLost: never goes on as if it held it (see leaseWatch).
// With a multi-host URL, a host that refuses the database while connecting (a standby that
// has not replayed its creation yet) is tried last the next time, once per host, so that the
// migration reaches the writable host behind it.
func Migrate(ctx context.Context, url string, opts ...Option) (int, error) {
	o := collect(opts)
	for attempt := 1; ; attempt++ {
		db, order, err := openSQL(url, o)
		if err != nil {
			return 0, err
		}
		before := order.refused()
		n, err := migrateDB(ctx, db)
		db.Close()
		if err == nil || order.refused() == before || attempt >= order.attempts() {
			return n, err
		}
	}
}

// Migration lock. goose's table lock is a row in goose_lock, taken and renewed by single
// statements: it needs no session, so it holds behind a transaction-mode pooler, where a
// session's advisory lock would be taken on one server connection and released on another
// (or left held on an idle one for ever). A holder renews its lease every lockHeartbeat; one
// that dies leaves a lease that others take over once it runs out.
var (
	lockLease     = 15 * time.Second
	lockHeartbeat = 3 * time.Second
	// lockPoll and lockPolls: replicas waiting for another's migration look every second for
	// 5 minutes in all, and start as soon as it is done.
	lockPoll  = time.Second
	lockPolls = uint64(300)
	// lockAcquired, when set (by tests), runs once the migration lock is held.
	lockAcquired func()
)

func migrateDB(ctx context.Context, db *sql.DB) (int, error) {
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)
	inner, err := lock.NewPostgresTableLocker(lock.WithTableLeaseDuration(lockLease),
		lock.WithTableHeartbeatInterval(lockHeartbeat), lock.WithTableLockTimeout(lockPoll, lockPolls),
		lock.WithTableUnlockTimeout(lockPoll, 5), lock.WithTableLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		return 0, fmt.Errorf("migration lock: %w", err)
	}
	var locker lock.Locker = &leaseWatch{Locker: inner, abort: abort}
	if lockAcquired != nil {
		locker = observedLocker{locker, lockAcquired}
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithLogger(goose.NopLogger()), goose.WithLocker(locker))
	if err != nil {
		return 0, fmt.Errorf("load migrations: %w", err)
	}
	results, err := p.Up(ctx)
	if cause := context.Cause(ctx); errors.Is(cause, ErrMigrationLockLost) {
		return len(results), fmt.Errorf("migrate: %w", cause)
	}
	if err != nil {
		return len(results), wrap(err, "migrate")
	}
	return len(results), nil
}

// leaseWatch is goose's table lock, watched while it is held. goose renews the lease with
// heartbeats, and a heartbeat that fails is only logged: its holder would go on migrating
// after its lease had run out, while another replica, finding it expired, migrates too. So
// every heartbeat interval leaseWatch reads the lock's row itself: when the row is no longer
// its holder's, or the lease last seen renewed has run out (the reads failing or hanging
// meanwhile, as the heartbeats would), it stops the migration with ErrMigrationLockLost.
type leaseWatch struct {
	lock.Locker
	abort context.CancelCauseFunc

	stop chan struct{}
	done chan struct{}
}

func (l *leaseWatch) Lock(ctx context.Context, db *sql.DB) error {
	if err := l.Locker.Lock(ctx, db); err != nil {
		return err
	}
	// The row is this holder's now: remember who it is, and when its lease ends.
	var holder string
	var left time.Duration
	err := db.QueryRowContext(ctx, `SELECT locked_by, extract(epoch FROM lease_expires_at - now())::float8
		FROM goose_lock WHERE lock_id = $1 AND locked`, lock.DefaultLockID).Scan(&holder, (*leaseLeft)(&left))
	if err != nil {
		return errors.Join(fmt.Errorf("migration lock: read its lease: %w", err), l.Locker.Unlock(ctx, db))
	}
	l.stop, l.done = make(chan struct{}), make(chan struct{})
	go l.watch(db, holder, time.Now().Add(left))
	return nil
}

func (l *leaseWatch) Unlock(ctx context.Context, db *sql.DB) error {
	if l.stop != nil {
		close(l.stop)
		<-l.done
	}
	return l.Locker.Unlock(ctx, db)
}

// watch checks the lease every heartbeat until stop, and aborts the migration once it is lost.
func (l *leaseWatch) watch(db *sql.DB, holder string, until time.Time) {
	defer close(l.done)
	tick := time.NewTicker(lockHeartbeat)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), lockHeartbeat)
		var by string
		var left time.Duration
		err := db.QueryRowContext(ctx, `SELECT coalesce(locked_by, ''), extract(epoch FROM lease_expires_at - now())::float8
			FROM goose_lock WHERE lock_id = $1 AND locked`, lock.DefaultLockID).Scan(&by, (*leaseLeft)(&left))
		cancel()
		switch {
		case err == nil && by != holder:
			l.abort(fmt.Errorf("%w (another replica took it over)", ErrMigrationLockLost))
			return
		case errors.Is(err, sql.ErrNoRows):
			l.abort(fmt.Errorf("%w (the lock was released by another)", ErrMigrationLockLost))
			return
		case err == nil:
			until = time.Now().Add(left)
		}
		if !time.Now().Before(until) {
			l.abort(fmt.Errorf("%w (its lease of %s ran out without being renewed)", ErrMigrationLockLost, lockLease))
			return
		}
	}
}

// leaseLeft scans a number of seconds (the lease left, negative once it has run out).
type leaseLeft time.Duration

func (d *leaseLeft) Scan(src any) error {
	var f sql.NullFloat64
	if err := f.Scan(src); err != nil {
		return err
	}
	*d = leaseLeft(time.Duration(f.Float64 * float64(time.Second)))
	return nil
}

// observedLocker calls acquired once it holds the lock.
type observedLocker struct {
	lock.Locker
	acquired func()
}

func (l observedLocker) Lock(ctx context.Context, db *sql.DB) error {
	if err := l.Locker.Lock(ctx, db); err != nil {
		return err
	}
	l.acquired()
	return nil
}

// CheckSchema returns nil when the database is at exactly the version this binary ships,
// ErrSchemaOutdated when migrations are pending, and ErrSchemaTooNew when it is ahead.
// It only reads (it backs /readyz): a database goose never touched is simply outdated.
func (s *Store) CheckSchema(ctx context.Context) error {
	latest, err := latestVersion()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	var current int64
	err = s.pool.QueryRow(ctx, `SELECT coalesce(max(version_id), 0) FROM goose_db_version WHERE is_applied`).Scan(&current)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P01" { // undefined_table: never migrated
		current, err = 0, nil
	}
	if err != nil {
		return wrap(err, "read schema version")
	}
	switch {
	case current < latest:
		return fmt.Errorf("%w (at %d, want %d)", ErrSchemaOutdated, current, latest)
	case current > latest:
		return fmt.Errorf("%w (at %d, knows up to %d)", ErrSchemaTooNew, current, latest)
	}
	return nil
}

func init() {
	// goose's package-level logger is only used by its legacy API; keep it quiet.
	goose.SetLogger(log.New(io.Discard, "", 0))
}

// MigrateUp is Migrate without the count: the form a test harness or a caller that only
// cares whether the schema is current takes.
func MigrateUp(ctx context.Context, url string) error {
	_, err := Migrate(ctx, url)
	return err
}
