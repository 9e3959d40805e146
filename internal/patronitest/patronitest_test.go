//go:build patroni

package patronitest

import (
	"context"
	"testing"
	"time"

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
	m, at := c.WritableAfter(ctx, killed, old)
	t.Logf("killed %s; %s took writes %s later", old.Name, m.Name, at.Sub(killed).Round(time.Millisecond))
	rewound := c.Rejoin(ctx, old)
	t.Logf("%s rejoined (pg_rewind: %v)", old.Name, rewound)
}
