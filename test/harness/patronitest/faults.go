package patronitest

import (
	"context"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// Kill ends member m the way a crashed machine would: SIGKILL of Patroni (its whole process
// group) and of its postmaster and every child, which Patroni started in a session of its
// own. It returns once they are all gone.
func (c *Cluster) Kill(m *Member) {
	c.t.Helper()
	pid := postmasterPID(m.DataDir)
	m.patroni.SignalGroup(syscall.SIGKILL)
	if pid != 0 {
		if err := pglocal.KillPostmaster(pid); err != nil {
			c.Fail("kill %s's postmaster: %v", m.Name, err)
		}
	}
	<-m.patroni.Exited()
}

// KillLeader kills the current leader (see Kill) and returns it and when it was killed.
func (c *Cluster) KillLeader(ctx context.Context) (*Member, time.Time) {
	c.t.Helper()
	leader := c.Leader(ctx)
	if leader == nil {
		c.Fail("KillLeader: no leader")
	}
	c.Kill(leader)
	return leader, time.Now()
}

// Rejoin starts member m's Patroni again on its data directory, as a pod that comes back:
// Patroni finds that another member leads and rejoins it as a replica, rewinding its data
// with pg_rewind when its timeline diverged. It waits until the cluster is ready and
// returns whether the member's log shows that pg_rewind ran.
func (c *Cluster) Rejoin(ctx context.Context, m *Member) (rewound bool) {
	c.t.Helper()
	before := c.logSize(m)
	m.start()
	c.WaitReady(ctx)
	return strings.Contains(c.logSince(m, before), "pg_rewind")
}

// Switchover asks Patroni (POST /switchover on the leader) to hand the leadership to the
// sync standby, the only candidate strict synchronous mode allows, and returns the old
// leader, the new one and when the request was made. Patroni stops the old leader with
// connections in flight.
func (c *Cluster) Switchover(ctx context.Context) (from, to *Member, at time.Time) {
	c.t.Helper()
	leader, sync := c.WaitReady(ctx)
	at = time.Now()
	if _, err := leader.rest(ctx, http.MethodPost, "/switchover", map[string]string{"leader": leader.Name, "candidate": sync.Name}, nil); err != nil {
		c.Fail("switchover: %v", err)
	}
	return leader, sync, at
}

// CutFromEtcd cuts (or heals) member m's connection to etcd, and only its: every open
// connection through its proxy is closed and new ones are refused. Patroni on a leader that
// cannot renew its lock demotes itself once retry_timeout has passed, and the others elect a
// new leader when the lock expires.
func (c *Cluster) CutFromEtcd(m *Member, cut bool) {
	m.etcd.setCut(cut)
	c.Logf("%s's link to etcd cut: %v", m.Name, cut)
}

// PauseEtcd freezes etcd (SIGSTOP) or thaws it (SIGCONT): every member's requests to it
// hang until their timeouts, as when the DCS is down or unreachable for everyone.
func (c *Cluster) PauseEtcd(pause bool) {
	sig := syscall.SIGCONT
	if pause {
		sig = syscall.SIGSTOP
	}
	c.etcd.SignalGroup(sig)
	c.Logf("etcd paused: %v", pause)
}

// Restart stops member m as Kubernetes stops a pod (SIGTERM to Patroni, which stops its
// Postgres, handing the leadership over first if it leads) and starts it again on the same
// data. It waits until the cluster is ready again.
func (c *Cluster) Restart(ctx context.Context, m *Member) {
	c.t.Helper()
	if !m.patroni.Stop(syscall.SIGTERM, time.Minute) {
		c.Fail("%s did not stop within a minute of SIGTERM", m.Name)
	}
	m.killPostgres() // none should be left; a pod's would die with its container
	m.start()
	c.WaitReady(ctx)
}

// RollingRestart restarts every member, one at a time, the replicas first and the leader
// last, as the operator rolls a StatefulSet. It calls each(m, leader) before restarting m.
func (c *Cluster) RollingRestart(ctx context.Context, each func(m *Member, leader bool)) {
	c.t.Helper()
	leader, _ := c.WaitReady(ctx)
	var order []*Member
	for _, m := range c.Members {
		if m != leader {
			order = append(order, m)
		}
	}
	for _, m := range append(order, leader) {
		if each != nil {
			each(m, m == leader)
		}
		c.Restart(ctx, m)
	}
}

func (c *Cluster) logSize(m *Member) int64 {
	fi, err := os.Stat(m.logPath)
	if err != nil {
		return 0
	}
	return fi.Size()
}

func (c *Cluster) logSince(m *Member, offset int64) string {
	b, err := os.ReadFile(m.logPath)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	return string(b[offset:])
}

// SetFailsafe turns Patroni's failsafe_mode on or off in the cluster's dynamic configuration
// (PATCH /config on the leader), as a Spilo manifest's patroni.failsafe_mode does. With it on,
// a leader that cannot reach the DCS keeps leading while every member in the DCS's /failsafe
// key answers its POST /failsafe. Turning it on returns once every member holds the /failsafe
// key naming all of them (the leader writes it on its next loop), so that the DCS may go.
func (c *Cluster) SetFailsafe(ctx context.Context, on bool) {
	c.t.Helper()
	leader, _ := c.WaitReady(ctx)
	var cfg map[string]any
	if _, err := leader.rest(ctx, http.MethodPatch, "/config", map[string]any{"failsafe_mode": on}, &cfg); err != nil || cfg["failsafe_mode"] != on {
		c.Fail("set failsafe_mode to %v: got %v, %v", on, cfg["failsafe_mode"], err)
	}
	if !on {
		c.Logf("failsafe_mode off")
		return
	}
	start := time.Now()
	for _, m := range c.Members {
		c.waitFor(ctx, m.Name+" to hold the /failsafe key with every member", func() bool {
			var members map[string]string
			code, err := m.rest(ctx, http.MethodGet, "/failsafe", nil, &members)
			return err == nil && code == http.StatusOK && len(members) == len(c.Members)
		})
	}
	c.Logf("failsafe_mode on; every member holds the /failsafe key after %s", time.Since(start).Round(10*time.Millisecond))
}

// StopEtcd kills etcd (SIGKILL, the whole DCS at once) and StartEtcd starts it again on its
// data, as when every etcd member restarts.
func (c *Cluster) StopEtcd() {
	c.etcd.SignalGroup(syscall.SIGKILL)
	<-c.etcd.Exited()
	c.Logf("etcd killed")
}

// StartEtcd starts etcd again on its data directory after StopEtcd.
func (c *Cluster) StartEtcd() {
	c.restartEtcd()
	c.Logf("etcd started again")
}

// waitFor polls cond until it holds, failing the test after hangBound.
func (c *Cluster) waitFor(ctx context.Context, what string, cond func() bool) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			c.Fail("waited %s for %s", hangBound, what)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
