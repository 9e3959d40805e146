package patronitest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// Fail fails the test; the cleanup then dumps the log of every program of the cluster, and
// says the failure again after them, where an excerpt of the output's end shows it.
func (c *Cluster) Fail(format string, args ...any) {
	c.t.Helper()
	c.failure.Store(fmt.Sprintf(format, args...))
	c.t.Fatalf("patronitest: "+format, args...)
}

// DumpLogs writes the tail of every program's log into the test's log.
func (c *Cluster) DumpLogs() {
	logs, _ := filepath.Glob(filepath.Join(c.dir, "*.log"))
	more, _ := filepath.Glob(filepath.Join(c.dir, "*", "*.log"))
	pglogs, _ := filepath.Glob(filepath.Join(c.dir, "*", "data", "log", "*"))
	for _, path := range append(append(logs, more...), pglogs...) {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 80 {
			lines = lines[len(lines)-80:]
		}
		c.t.Logf("==> %s (last %d lines)\n%s", path, len(lines), strings.Join(lines, "\n"))
	}
}

// stop ends every program of the cluster and removes its directory: Patroni first (SIGTERM,
// which stops its Postgres), then whatever Postgres is left (SIGKILL from postmaster.pid),
// HAProxy and etcd.
func (c *Cluster) stop() {
	for _, m := range c.Members {
		if m.patroni != nil {
			m.patroni.SignalGroup(syscall.SIGTERM)
		}
	}
	for _, m := range c.Members {
		if m.patroni != nil && !m.patroni.Stop(syscall.SIGTERM, 15*time.Second) {
			c.Logf("%s did not stop within 15s of SIGTERM; killed", m.Name)
		}
		m.killPostgres()
		if m.etcd != nil {
			m.etcd.close()
		}
	}
	c.haproxy.Stop(syscall.SIGTERM, 5*time.Second)
	if c.etcd != nil {
		c.etcd.SignalGroup(syscall.SIGCONT) // in case a test left it stopped
		c.etcd.Stop(syscall.SIGTERM, 5*time.Second)
	}
	if c.t.Failed() {
		c.DumpLogs()
		if failure, _ := c.failure.Load().(string); failure != "" {
			c.t.Logf("patronitest: the failure, above the logs: %s", failure)
		} else {
			c.t.Logf("patronitest: the test failed (see above the logs)")
		}
	}
	c.reaper.Stop(syscall.SIGKILL, time.Second)
	_ = os.RemoveAll(c.dir)
}

// killPostgres kills the member's postmaster and its children, if one runs.
func (m *Member) killPostgres() {
	if pid := postmasterPID(m.DataDir); pid != 0 {
		if err := pglocal.KillPostmaster(pid); err != nil {
			m.c.Logf("%s: %v", m.Name, err)
		}
	}
}

// startReaper runs a shell that outlives this process, in a session of its own, and kills
// what the cluster left running if this process dies without its cleanup (SIGKILL, a panic
// in another goroutine): the programs die with this process by Pdeathsig, but Postgres is
// no child of ours. The cleanup ends the reaper.
func (c *Cluster) startReaper() {
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done
for f in %s/*/data/postmaster.pid; do
  [ -f "$f" ] || continue
  pid=$(head -n1 "$f")
  grep -qs %s /proc/"$pid"/cmdline && kill -9 "$pid" $(cat /proc/"$pid"/task/*/children 2>/dev/null)
done
rm -rf %s`, os.Getpid(), c.dir, c.dir, c.dir)
	p, err := startProc("reaper", "/bin/sh", []string{"-c", script}, nil, nil, filepath.Join(c.dir, "reaper.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.reaper = p
}
