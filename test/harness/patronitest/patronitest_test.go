//go:build patroni

package patronitest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestCluster starts a cluster, reaches its leader both ways a Spilo install is reached, kills
// the leader and sees a new one take writes and the old one rejoin, and leaves nothing behind.
func TestCluster(t *testing.T) {
	c := Start(t)
	ctx := t.Context()
	for name, url := range map[string]string{"multi-host": c.MultiHostURL(), "HAProxy": c.HAProxyURL()} {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			c.Fail("%s: %v", name, err)
		}
		var standby bool
		if err := conn.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&standby); err != nil || standby {
			c.Fail("%s: got in recovery %v (%v), want the leader", name, standby, err)
		}
		conn.Close(context.Background())
	}
	old, killed := c.KillLeader(ctx)
	w := c.WritableAfter(ctx, killed, old)
	if w.Member == old || w.Promoted.IsZero() || w.At.Before(w.Promoted) {
		c.Fail("after killing %s: got %+v, want another member promoted, then writable", old.Name, w)
	}
	rewound := c.Rejoin(ctx, old)
	t.Logf("%s rejoined (pg_rewind: %v)", old.Name, rewound)
}
