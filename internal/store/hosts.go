package store

import (
	"context"
	"net"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// hostOrder decides in which order a connection tries the hosts of a multi-host URL.
//
// pgx tries the hosts in the order listed and skips one that is down or that does not take
// writes, but it gives up at the first host that refuses the database itself: "database does
// not exist" (3D000), a password it does not know (28P01) or no CONNECT right (42501). A
// standby that has not yet replayed the creation of the database or of its role answers just
// that, so a server whose URL lists such a standby first could not start, though the leader
// behind it would take it. hostOrder starts each connection at a host, and moves the start
// on by one host whenever a host refuses the database that way while connecting, so that
// the next attempt tries the others first. With n hosts, n attempts try every host first once.
type hostOrder struct {
	hosts    [][]*pgconn.FallbackConfig // per host:port, its entries (one per TLS mode sslmode allows)
	next     atomic.Int64               // which host the next connection tries first
	refusals atomic.Int64               // how many times a host refused the database while connecting
}

// hostOrders holds what this process learnt about the hosts of each multi-host URL, so that
// the migration at start-up and the pool that follows it start where the last refusal left.
var hostOrders sync.Map // database URL → *hostOrder

// hostOrderFor returns the order of the URL's hosts, or nil when it lists one host only.
func hostOrderFor(url string, cfg *pgconn.Config) *hostOrder {
	if o, ok := hostOrders.Load(url); ok {
		return o.(*hostOrder)
	}
	all := append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port, TLSConfig: cfg.TLSConfig}}, cfg.Fallbacks...)
	o := &hostOrder{}
	index := map[string]int{}
	for _, fb := range all {
		key := net.JoinHostPort(fb.Host, strconv.Itoa(int(fb.Port)))
		i, ok := index[key]
		if !ok {
			i = len(o.hosts)
			index[key] = i
			o.hosts = append(o.hosts, nil)
		}
		o.hosts[i] = append(o.hosts[i], fb)
	}
	if len(o.hosts) < 2 {
		return nil
	}
	actual, _ := hostOrders.LoadOrStore(url, o)
	return actual.(*hostOrder)
}

// beforeConnect is a BeforeConnect hook of the pool and of database/sql: it lists the hosts
// in cfg starting at the next one, and watches the connection's errors for a refusal.
func (o *hostOrder) beforeConnect(_ context.Context, cfg *pgx.ConnConfig) error {
	start := int(o.next.Load()) % len(o.hosts)
	var ordered []*pgconn.FallbackConfig
	for i := range o.hosts {
		ordered = append(ordered, o.hosts[(start+i)%len(o.hosts)]...)
	}
	cfg.Host, cfg.Port, cfg.TLSConfig = ordered[0].Host, ordered[0].Port, ordered[0].TLSConfig
	cfg.Fallbacks = ordered[1:]
	onPgError := cfg.OnPgError
	cfg.OnPgError = func(conn *pgconn.PgConn, pgErr *pgconn.PgError) bool {
		// Before its BackendKeyData the connection is still being set up.
		if conn.PID() == 0 && refusesDatabase(pgErr.Code) {
			o.refusals.Add(1)
			o.next.CompareAndSwap(int64(start), int64(start+1))
		}
		if onPgError != nil {
			return onPgError(conn, pgErr)
		}
		return pgErr.Severity != "FATAL" && pgErr.Severity != "PANIC"
	}
	return nil
}

// refusesDatabase reports whether code is one at which pgx stops trying further hosts.
func refusesDatabase(code string) bool {
	return code == "3D000" || code == "28P01" || code == "42501"
}

// attempts is how many times a caller should try to connect before it believes an error:
// once per host for a multi-host URL, so that each host is tried first once.
func (o *hostOrder) attempts() int {
	if o == nil {
		return 1
	}
	return len(o.hosts)
}

// refused returns how many refusals the order has seen; 0 for a nil order.
func (o *hostOrder) refused() int64 {
	if o == nil {
		return 0
	}
	return o.refusals.Load()
}
