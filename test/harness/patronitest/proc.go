package patronitest

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// startProc runs bin as runAs (nil: this process's user); see proctest.Start.
func startProc(name, bin string, args, env []string, runAs *sysUser, logPath string) (*proctest.Proc, error) {
	opts := proctest.Options{Outlive: name == "reaper"} // the reaper must outlive this process
	if runAs != nil {
		opts.Credential = &syscall.Credential{Uid: runAs.uid, Gid: runAs.gid, Groups: runAs.groups}
	}
	p, err := proctest.Start(name, bin, args, env, logPath, opts)
	if err != nil {
		return nil, fmt.Errorf("patronitest: %w", err)
	}
	return p, nil
}

// sysUser is the system user Patroni (and so Postgres) runs as.
type sysUser struct {
	name     string
	uid, gid uint32
	groups   []uint32
}

// postgresUser returns the postgres system user when running as root (Postgres refuses to
// run as root), and nil otherwise.
func postgresUser() (*sysUser, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("patronitest: running as root, so Patroni must run as the system user postgres: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	su := &sysUser{name: u.Username, uid: uint32(uid), gid: uint32(gid)}
	gids, _ := u.GroupIds()
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			su.groups = append(su.groups, uint32(n))
		}
	}
	return su, nil
}

// chown hands path to u; a no-op for a nil u.
func (u *sysUser) chown(paths ...string) error {
	if u == nil {
		return nil
	}
	for _, p := range paths {
		if err := os.Chown(p, int(u.uid), int(u.gid)); err != nil {
			return fmt.Errorf("patronitest: chown %s to %s: %w", p, u.name, err)
		}
	}
	return nil
}

// findPrograms returns the paths of the programs the harness runs, or an error that says how
// to install the missing ones.
func findPrograms() (map[string]string, error) {
	found := map[string]string{}
	var missing []string
	for _, name := range []string{"patroni", "etcd", "haproxy"} {
		p, err := exec.LookPath(name)
		if err != nil {
			missing = append(missing, name)
			continue
		}
		found[name] = p
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_rewind")
	if len(dirs) == 0 {
		missing = append(missing, "PostgreSQL's server binaries (/usr/lib/postgresql/N/bin)")
	} else {
		found["pg_bin"] = filepath.Dir(dirs[len(dirs)-1])
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("patronitest: missing %s: run scripts/ensure-patroni.sh (as root on Debian it installs them: "+
			"apt-get install --no-install-recommends patroni etcd-server etcd-client haproxy postgresql)", strings.Join(missing, ", "))
	}
	return found, nil
}

// postmasterPID reads the PID of the postmaster running on dataDir, or 0 when none runs.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil || pid <= 0 {
		return 0
	}
	// A stale file of a killed server may name a PID that another program has since taken.
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil || !strings.Contains(string(cmdline), dataDir) {
		return 0
	}
	return pid
}
