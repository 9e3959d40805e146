// Package store keeps terdut-server's state in Postgres: users, API keys, sessions,
// sign-in flows in progress, and the bootstrap claim. Every guarantee that must hold
// across replicas lives here, in row locks and single transactions.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Sentinel errors returned by the store. Callers compare them with errors.Is.
var (
	// ErrNotFound means the requested row does not exist (or is revoked or expired).
	ErrNotFound = errors.New("not found")
	// ErrConflict means a unique value, such as a username, is already taken.
	ErrConflict = errors.New("already exists")
	// ErrProtectedUser means the user is the bootstrap principal, which the API may not delete.
	ErrProtectedUser = errors.New("the bootstrap principal cannot be deleted")
	// ErrBootstrapPending means the install is not claimed yet and the gate refuses sign-in.
	ErrBootstrapPending = errors.New("bootstrap pending")
	// ErrAlreadyClaimed means a claim was attempted while the install is already claimed.
	ErrAlreadyClaimed = errors.New("bootstrap already completed")
	// ErrUnavailable means the database could not be reached.
	ErrUnavailable = errors.New("database unavailable")
)

// Store is a handle on terdut-server's Postgres database. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// apiKeyCalls says AuthenticateAPIKey calls api_key_owner (apiKeyStatement), in the
	// statement apiKeyCall once apiKeyLookup has made it.
	apiKeyCalls bool
	apiKeyCall  atomic.Pointer[string]
	// onCallOff says Ingest leaves a new incident unassigned (SetAssignOnCall).
	onCallOff atomic.Bool
}

// SetAssignOnCall says whether Ingest gives a new incident to today's on-call person (the
// default) or leaves it unassigned.
func (s *Store) SetAssignOnCall(on bool) { s.onCallOff.Store(!on) }

// Open connects to the database at url. It does not migrate; see Migrate and CheckSchema.
// WithPooler says what stands between it and Postgres.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse database URL: %w", redactParseError(err))
	}
	if err := collect(opts).applyTo(url, cfg.ConnConfig); err != nil {
		return nil, err
	}
	if cfg.ConnConfig.ConnectTimeout == 0 || cfg.ConnConfig.ConnectTimeout > 5*time.Second {
		cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	}
	cfg.MaxConnIdleTime = time.Minute
	cfg.ShouldPing = shouldPing
	if order := hostOrderFor(url, &cfg.ConnConfig.Config); order != nil {
		cfg.BeforeConnect = order.beforeConnect
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	return &Store{pool: pool, now: time.Now, apiKeyCalls: apiKeyStatement(cfg.ConnConfig.DefaultQueryExecMode)}, nil
}

// pingAfterIdle is how long a pooled connection may sit idle before it is pinged when taken.
// pgx pings after 1 s, which at a few requests a second is a second round trip on almost
// every request. A connection quiet for longer than this, though, may have been closed by a
// restart, a failover or an idle timeout on the way, and the ping finds it out before a
// query fails on it. A connection that breaks while busy fails its query either way
// (ErrUnavailable: 503); the pool then replaces it.
const pingAfterIdle = 15 * time.Second

func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration > pingAfterIdle
}

// Close releases every connection.
func (s *Store) Close() { s.pool.Close() }

// Ping reports whether the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return wrap(s.pool.Ping(ctx), "ping database")
}

// Pool exposes the underlying pool for tests and benchmarks in this module.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// inTx runs fn in one transaction, committing when fn returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return wrap(err, "begin transaction")
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
	if err := fn(tx); err != nil {
		if isConnError(err) && !errors.Is(err, ErrUnavailable) {
			return fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return err
	}
	return wrap(tx.Commit(ctx), "commit")
}

// wrap adds context to err, turning connection failures into ErrUnavailable.
func wrap(err error, what string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrConflict) {
		return err
	}
	if isConnError(err) {
		return fmt.Errorf("%s: %w: %w", what, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// isConnError reports whether err means the database is out of reach or cannot take writes
// right now: the server is down, restarting or failing over. Callers answer "try again
// shortly", never "internal error".
func isConnError(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08: connection exception; 57P01-03: admin shutdown, crash shutdown, cannot
		// connect now; 25006: read-only transaction, from a standby (a failover in progress,
		// or a multi-host URL without target_session_attrs=read-write).
		return pgErr.Code[:2] == "08" || pgErr.Code == "57P01" || pgErr.Code == "57P02" || pgErr.Code == "57P03" ||
			pgErr.Code == "25006"
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connErr),
		// A connection that died mid-query (the server was killed, or the network cut):
		// pgx returns the read's own error.
		errors.As(err, &netErr), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return true
	}
	return pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled)
}

// isUniqueViolation reports whether err is Postgres error 23505 on the named constraint
// (any unique constraint when constraint is empty).
func isUniqueViolation(err error, constraint string) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "23505" {
		return false
	}
	return constraint == "" || pgErr.ConstraintName == constraint
}

// redactParseError drops the parser's message, which can quote the URL and its password.
func redactParseError(err error) error {
	var pe *pgconn.ParseConfigError
	if errors.As(err, &pe) {
		return errors.New("the URL is malformed (expected postgres://user:password@host:port/dbname)")
	}
	return errors.New("the URL is malformed")
}
