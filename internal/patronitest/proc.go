package patronitest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is one program the harness runs (etcd, a Patroni member, HAProxy), with its output in
// a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{} // closed once the program has exited and been reaped
}

// startProc runs bin with args as runAs (nil: this process's user) in a process group of its
// own, writing stdout and stderr to logPath (appended: a member restarted keeps one log).
// The program gets SIGKILL if this process dies: Pdeathsig fires when the thread that
// started the child exits, so that thread stays locked to the goroutine that waits for it.
// Go sets Pdeathsig after the change of user, which setpriv or runuser would clear.
func startProc(name, bin string, args, env []string, runAs *sysUser, logPath string) (*proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("patronitest: %s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if name == "reaper" {
		cmd.SysProcAttr.Pdeathsig = 0 // it must outlive this process
	}
	if runAs != nil {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: runAs.uid, Gid: runAs.gid, Groups: runAs.groups}
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(p.exited)
		defer logFile.Close()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("patronitest: start %s: %w", name, err)
	}
	return p, nil
}

// signalGroup sends sig to the program's process group (the program and whatever it started
// that did not leave the group).
func (p *proc) signalGroup(sig syscall.Signal) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// stop sends sig to the group and waits up to grace for the program to exit, then kills the
// group. It returns whether the program exited by itself within grace.
func (p *proc) stop(sig syscall.Signal, grace time.Duration) bool {
	if p == nil {
		return true
	}
	p.signalGroup(sig)
	select {
	case <-p.exited:
		p.signalGroup(syscall.SIGKILL) // anything it left behind in its group
		return true
	case <-time.After(grace):
	}
	p.signalGroup(syscall.SIGKILL)
	<-p.exited
	return false
}

// done reports whether the program has exited.
func (p *proc) done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
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

// freePorts returns n distinct free TCP ports on 127.0.0.1. Another process may take one
// before its program binds it; the harness then fails with that program's log.
func freePorts(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	var ports []int
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("patronitest: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
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
