package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terdut-server/terdut-server/internal/store"
)

// database is where the server's data lives: the URL and what stands between.
type database struct {
	url    string
	pooler store.Pooler
}

func (d database) opts() []store.Option { return []store.Option{store.WithPooler(d.pooler)} }

// poolerUsage is --database-pooler's help.
const poolerUsage = "what stands between terdut-server and Postgres: none (Postgres directly, or a pooler in session mode) or transaction (a pooler in transaction mode, such as the PgBouncer of Zalando's postgres-operator: see docs/pooler.md)"

// Start-up retries: a database that refuses the login, or a pooler that cannot log in to
// Postgres yet (its role or password not there yet, Postgres restarting or failing over
// behind it), is retried with a growing pause, for startRetryBudget in all; then the start
// fails, and Kubernetes restarts the pod with its own back-off. The startup probe of
// deploy/kubernetes waits 120 s.
var (
	startRetryBudget = 90 * time.Second
	startRetryFirst  = time.Second
	startRetryMax    = 10 * time.Second
)

// openMigrated opens the database and brings its schema up to this binary's version,
// retrying a refused login as above.
func openMigrated(ctx context.Context, db database, log *slog.Logger) (*store.Store, error) {
	deadline := time.Now().Add(startRetryBudget)
	pause := startRetryFirst
	for attempt := 1; ; attempt++ {
		st, err := migrateAndOpen(ctx, db, log)
		if err == nil {
			return st, nil
		}
		if !loginRefused(err) || time.Now().Add(pause).After(deadline) {
			return nil, err
		}
		log.Warn("the database refused the login; retrying (behind a pooler: the role or its password may not be there yet, or the pooler cannot reach Postgres)",
			"attempt", attempt, "retry_in", pause.String(), "err", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, startRetryMax)
	}
}

func migrateAndOpen(ctx context.Context, db database, log *slog.Logger) (*store.Store, error) {
	n, err := store.Migrate(ctx, db.url, db.opts()...)
	if err != nil {
		return nil, fmt.Errorf("migrate the database: %w", err)
	}
	if n > 0 {
		log.Info("database migrated", "applied", n)
	}
	st, err := store.Open(ctx, db.url, db.opts()...)
	if err != nil {
		return nil, err
	}
	if err := st.CheckSchema(ctx); err != nil {
		st.Close()
		return nil, err
	}
	warnSchemaWriters(ctx, st, log)
	return st, nil
}

// warnSchemaWriters says loudly, at each start, when roles other than the server's may create
// objects in the schema where it keeps its own (docs/security.md#the-database): the store's
// statements hold up against what such a role can plant, but its rights in that schema are
// more than anyone outside the server should have. It warns rather than refuses: PostgreSQL
// 14 and older grant every role CREATE on the schema public, and an upgrade must not stop an
// install that ran yesterday.
func warnSchemaWriters(ctx context.Context, st *store.Store, log *slog.Logger) {
	e, err := st.SchemaWriters(ctx)
	if err != nil {
		log.Warn("could not read which roles may create in the server's schema", "err", err)
		return
	}
	if !e.Exposed() {
		return
	}
	fix := "REVOKE CREATE ON SCHEMA " + pgx.Identifier{e.Schema}.Sanitize() + " FROM PUBLIC, and from each role named"
	if len(e.SchemaMakers) > 0 {
		fix += "; REVOKE CREATE ON DATABASE from the roles that may create schemas, or give the server a schema of its own first on its search_path"
	}
	log.Warn("SECURITY: other database roles may create objects where terdut-server keeps its own; a role that can is one step from the server's data and rights (docs/security.md#the-database)",
		"schema", e.Schema, "exposure", e.String(), "fix", fix)
}

// loginRefused reports whether err is a refused login (SQLSTATE class 28), or PgBouncer's
// own refusal (08P01: it cannot log in to Postgres, or keeps its pool closed for
// server_login_retry after a failure).
func loginRefused(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code[:2] == "28" || pgErr.Code == "08P01")
}
