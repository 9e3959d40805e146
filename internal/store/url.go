package store

import (
	"errors"
	"fmt"
	"net"
	"reflect"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// CheckURL parses a database URL as Open does, without connecting. It accepts several hosts
// (postgres://h1:5432,h2:5432/terdut?target_session_attrs=read-write: pgx connects to the
// first that takes writes, so the server follows a failover), but refuses a list without
// target_session_attrs=read-write or primary, with which the server could settle on a standby
// and fail every write, and a target that asks for a standby. Its errors never quote the URL.
//
// WithPooler(PoolerTransaction) also refuses a default_query_exec_mode that cannot work behind
// a transaction-mode pooler.
func CheckURL(url string, opts ...Option) error {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("parse database URL: %w", redactParseError(err))
	}
	if err := collect(opts).applyTo(url, cfg.ConnConfig); err != nil {
		return err
	}
	conn := cfg.ConnConfig
	hosts := map[string]bool{net.JoinHostPort(conn.Host, strconv.Itoa(int(conn.Port))): true}
	for _, fb := range conn.Fallbacks { // also one per TLS mode that sslmode allows
		hosts[net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))] = true
	}
	writable := sameFunc(conn.ValidateConnect, pgconn.ValidateConnectTargetSessionAttrsReadWrite) ||
		sameFunc(conn.ValidateConnect, pgconn.ValidateConnectTargetSessionAttrsPrimary)
	switch {
	case conn.ValidateConnect != nil && !writable:
		return errors.New("the database URL's target_session_attrs asks for a server that may not take writes; terdut-server writes: use read-write (or leave it out with a single host)")
	case len(hosts) > 1 && !writable:
		return fmt.Errorf("the database URL lists %d hosts but not target_session_attrs=read-write: the server could settle on a standby and fail every write; add ?target_session_attrs=read-write", len(hosts))
	}
	return nil
}

func sameFunc(a, b pgconn.ValidateConnectFunc) bool {
	return a != nil && reflect.ValueOf(a).Pointer() == reflect.ValueOf(b).Pointer()
}
