package store

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Pooler names what stands between terdut-server and Postgres, which decides how statements
// are sent (--database-pooler).
type Pooler string

const (
	// PoolerNone is Postgres directly, or a pooler in session mode (one server connection per
	// client connection): statements are prepared once per connection and cached (pgx's
	// default, the fastest).
	PoolerNone Pooler = "none"
	// PoolerTransaction is a pooler in transaction mode, such as the PgBouncer that Zalando's
	// postgres-operator puts in front of a cluster: each transaction may run on another server
	// connection, so no statement may be prepared by name. Each statement goes as one
	// simple-protocol query, its arguments quoted by pgx.
	PoolerTransaction Pooler = "transaction"
)

// poolerExecMode is how statements go behind a transaction-mode pooler unless the URL's
// default_query_exec_mode names another mode that works there. Of those (cache_describe,
// exec, simple_protocol: one round trip each, no named statement) it was the fastest in two
// runs of BenchmarkPoolerModes (docs/pooler.md#figures), and the store's and the API's tests
// pass in it. pgx refuses it on a server without standard_conforming_strings=on, so its
// quoting is never wrong.
const poolerExecMode = pgx.QueryExecModeSimpleProtocol

// ParsePooler returns the Pooler named s ("none", "session" or "transaction").
func ParsePooler(s string) (Pooler, error) {
	switch s {
	case "", "none", "session":
		return PoolerNone, nil
	case "transaction":
		return PoolerTransaction, nil
	}
	return "", fmt.Errorf("%q: use none (Postgres directly, or a pooler in session mode) or transaction (PgBouncer in transaction mode, as Zalando's postgres-operator runs it)", s)
}

// MarshalText gives the Pooler's name, for flag.TextVar.
func (p Pooler) MarshalText() ([]byte, error) { return []byte(p), nil }

// UnmarshalText reads a Pooler's name as ParsePooler does, for flag.TextVar.
func (p *Pooler) UnmarshalText(b []byte) error {
	v, err := ParsePooler(string(b))
	if err != nil {
		return err
	}
	*p = v
	return nil
}

// Option is a setting of Open, Migrate and CheckURL.
type Option func(*options)

type options struct {
	pooler Pooler
}

// WithPooler says what stands between terdut-server and Postgres (PoolerNone by default).
func WithPooler(p Pooler) Option { return func(o *options) { o.pooler = p } }

func collect(opts []Option) options {
	o := options{pooler: PoolerNone}
	for _, f := range opts {
		f(&o)
	}
	return o
}

// execMode returns the statement mode for the URL's connection settings: pgx's default, or
// the URL's own default_query_exec_mode, directly; behind a transaction-mode pooler, the
// URL's mode when it works there, else poolerExecMode. An explicit mode that cannot work
// behind the pooler is an error that says which to use.
func (o options) execMode(url string, parsed pgx.QueryExecMode) (pgx.QueryExecMode, error) {
	if o.pooler != PoolerTransaction {
		return parsed, nil
	}
	cfg, err := pgconn.ParseConfig(url)
	if err != nil {
		return 0, fmt.Errorf("parse database URL: %w", redactParseError(err))
	}
	switch given := cfg.RuntimeParams["default_query_exec_mode"]; given {
	case "":
		return poolerExecMode, nil
	case "cache_describe", "exec", "simple_protocol":
		return parsed, nil
	default:
		return 0, errors.New("the database URL's default_query_exec_mode=" + given + " does not work behind a transaction-mode pooler (" +
			"a statement prepared on one server connection is used on another): leave it out, and --database-pooler=transaction picks simple_protocol")
	}
}

// applyTo sets the statement mode of cfg, parsed from url.
func (o options) applyTo(url string, cfg *pgx.ConnConfig) error {
	mode, err := o.execMode(url, cfg.DefaultQueryExecMode)
	if err != nil {
		return err
	}
	cfg.DefaultQueryExecMode = mode
	return nil
}
