// Package proctest runs the programs of a test harness (etcd, Patroni, HAProxy, a
// kube-apiserver) as child processes that cannot outlive the test process: each in a process
// group of its own, killed with its group when stopped, and by the kernel (Pdeathsig) when
// the test process dies without its cleanup.
package proctest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"time"
)

// Proc is one running program, with its output in a log file.
type Proc struct {
	Name    string
	LogPath string
	cmd     *exec.Cmd
	exited  chan struct{} // closed once the program has exited and been reaped
}

// Options are the rarer ways to start a program.
type Options struct {
	// Credential runs the program as another user (nil: this process's).
	Credential *syscall.Credential
	// Outlive lets the program outlive this process (a reaper that cleans up after it); every
	// other program gets SIGKILL when this process dies.
	Outlive bool
}

// Start runs bin with args and env in a process group of its own, writing stdout and stderr
// to logPath (appended: a program restarted keeps one log), in logPath's directory. The
// program gets SIGKILL if this process dies: Pdeathsig fires when the thread that started the
// child exits, so that thread stays locked to the goroutine that waits for it. Go sets
// Pdeathsig after the change of user, which setpriv or runuser would clear.
func Start(name, bin string, args, env []string, logPath string, opts Options) (*Proc, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Dir = filepath.Dir(logPath)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: opts.Credential}
	if opts.Outlive {
		cmd.SysProcAttr.Pdeathsig = 0
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, exited: make(chan struct{})}
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
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	return p, nil
}

// SignalGroup sends sig to the program's process group (the program and whatever it started
// that did not leave the group).
func (p *Proc) SignalGroup(sig syscall.Signal) {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
}

// Stop sends sig to the group and waits up to grace for the program to exit, then kills the
// group. It returns whether the program exited by itself within grace. A nil Proc is
// stopped already.
func (p *Proc) Stop(sig syscall.Signal, grace time.Duration) bool {
	if p == nil {
		return true
	}
	p.SignalGroup(sig)
	select {
	case <-p.exited:
		p.SignalGroup(syscall.SIGKILL) // anything it left behind in its group
		return true
	case <-time.After(grace):
	}
	p.SignalGroup(syscall.SIGKILL)
	<-p.exited
	return false
}

// Exited is closed once the program has exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Done reports whether the program has exited.
func (p *Proc) Done() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

// Log returns what the program has written so far, for a failure message.
func (p *Proc) Log() string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(%s's log: %v)", p.Name, err)
	}
	return string(b)
}

// FreePorts returns n distinct free TCP ports on 127.0.0.1. Another process may take one
// before its program binds it; the harness then fails with that program's log.
func FreePorts(n int) ([]int, error) {
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
			return nil, fmt.Errorf("free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// Pid is the program's process ID, which is also its process group's.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }
