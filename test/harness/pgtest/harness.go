package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// statementTimeout bounds one CREATE or DROP DATABASE: a bound on a hang, generous for a
// busy machine.
const statementTimeout = 2 * time.Minute

// harness owns the admin connections and the migrated template database.
type harness struct {
	adminURL string
	admin    *pgxpool.Pool
	template string     // name of the migrated template database
	cloneMu  sync.Mutex // serializes CREATE DATABASE ... TEMPLATE
}

// newHarness connects to adminURL and creates and migrates the template.
func newHarness(ctx context.Context, adminURL string, migrate func(context.Context, string) error) (*harness, error) {
	if _, err := databaseURL(adminURL, "x"); err != nil {
		return nil, err
	}
	admin, err := pgxpool.New(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("connect to admin database: %w", err)
	}
	h := &harness{adminURL: adminURL, admin: admin, template: uniqueName("tmpl")}
	if err := h.createTemplate(ctx, migrate); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

// createTemplate creates and migrates the template, then closes it to
// connections so that cloning it never fails for lack of exclusive access.
func (h *harness) createTemplate(ctx context.Context, migrate func(context.Context, string) error) error {
	if _, err := h.admin.Exec(ctx, "CREATE DATABASE "+ident(h.template)); err != nil {
		return fmt.Errorf("create template database: %w", err)
	}
	if migrate != nil {
		tmplURL, _ := databaseURL(h.adminURL, h.template)
		if err := migrate(ctx, tmplURL); err != nil {
			return fmt.Errorf("migrate template database %s: %w", h.template, err)
		}
	}
	alter := "ALTER DATABASE " + ident(h.template) + " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"
	if _, err := h.admin.Exec(ctx, alter); err != nil {
		return fmt.Errorf("mark %s as template: %w", h.template, err)
	}
	// Sessions the migration left open would make every clone fail.
	const kick = "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1"
	if _, err := h.admin.Exec(ctx, kick, h.template); err != nil {
		return fmt.Errorf("disconnect sessions from %s: %w", h.template, err)
	}
	return nil
}

// mustCreate creates a database (a clone of the template if migrated, else
// empty), registers its removal with tb and returns its URL.
func (h *harness) mustCreate(tb testing.TB, migrated bool) string {
	tb.Helper()
	name := uniqueName("test")
	sql := "CREATE DATABASE " + ident(name)
	if migrated {
		sql += " TEMPLATE " + ident(h.template)
	}
	if err := h.exclusive(sql); err != nil {
		tb.Fatalf("pgtest: create database for %s: %v", tb.Name(), err)
	}
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
		defer cancel()
		if _, err := h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	u, _ := databaseURL(h.adminURL, name)
	return u
}

// exclusive runs a CREATE DATABASE statement, one at a time, retrying while
// another session still holds the source database.
func (h *harness) exclusive(sql string) error {
	h.cloneMu.Lock()
	defer h.cloneMu.Unlock()
	// The budget starts at this statement's turn: on a busy machine, parallel tests queue
	// here for longer than any one statement takes.
	ctx, cancel := context.WithTimeout(context.Background(), statementTimeout)
	defer cancel()
	for {
		_, err := h.admin.Exec(ctx, sql)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// close drops the template database and closes the admin connections.
func (h *harness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, _ = h.admin.Exec(ctx, "ALTER DATABASE "+ident(h.template)+" WITH IS_TEMPLATE false")
	_, _ = h.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(h.template)+" WITH (FORCE)")
	h.admin.Close()
}

// databaseURL returns adminURL with its database replaced by name.
func databaseURL(adminURL, name string) (string, error) {
	u, err := url.Parse(adminURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("admin URL must look like postgres://user@host:port/postgres, got %q", redact(adminURL))
	}
	u.Path = "/" + name
	u.RawPath = ""
	return u.String(), nil
}

// redact hides the password of a URL for messages.
func redact(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Redacted()
	}
	return "(unparsable URL)"
}

// uniqueName returns a database name that no other test process will pick.
func uniqueName(kind string) string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return "pgtest_" + kind + "_" + hex.EncodeToString(b)
}

// ident quotes a database name for SQL.
func ident(name string) string {
	return pgx.Identifier{name}.Sanitize()
}
