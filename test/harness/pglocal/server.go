package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// readyTimeout bounds how long Start waits for the server to accept connections: a bound on
// a hang, generous for a busy machine (a server that exits is noticed at once).
const readyTimeout = 2 * time.Minute

// initdb creates the cluster unless a persistent Dir already holds one.
func (c *Cluster) initdb(ctx context.Context, bins map[string]string, owner *sysUser) error {
	if c.reuse() {
		return nil
	}
	args := []string{"-D", c.Dir, "--auth=trust", "--username=" + Superuser, "-E", "UTF8", "--no-locale"}
	if c.throwaway() {
		args = append(args, "--no-sync")
	}
	return c.runTool(ctx, bins["initdb"], args, owner)
}

// baseBackup fills Dir with a base backup of Options.StandbyOf, set up to stream from it
// as a standby, unless a persistent Dir already holds a cluster.
func (c *Cluster) baseBackup(ctx context.Context, bins map[string]string, owner *sysUser) error {
	if c.reuse() {
		return nil
	}
	primary := c.opts.StandbyOf
	args := []string{"-D", c.Dir, "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", Superuser,
		"--write-recovery-conf", "--wal-method=stream", "--checkpoint=fast"}
	if c.throwaway() {
		args = append(args, "--no-sync")
	}
	return c.runTool(ctx, bins["pg_basebackup"], args, owner)
}

// reuse reports whether a persistent Dir already holds a cluster to start as it is.
func (c *Cluster) reuse() bool {
	if _, err := os.Stat(filepath.Join(c.Dir, "PG_VERSION")); err == nil && c.opts.Persistent {
		c.opts.Logf("pglocal: reusing the cluster in %s", c.Dir)
		return true
	}
	return false
}

// runTool runs one of the server's command line tools as owner.
func (c *Cluster) runTool(ctx context.Context, bin string, args []string, owner *sysUser) error {
	c.opts.Logf("pglocal: %s %s", bin, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.runDir
	cmd.SysProcAttr = owner.sysProcAttr(true)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pglocal: %s -D %s: %w\n%s", filepath.Base(bin), c.Dir, err, tail(out, 20))
	}
	return nil
}

// start runs the postmaster and waits until it accepts connections.
func (c *Cluster) start(ctx context.Context, bin string, owner *sysUser) error {
	port := c.opts.Port
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return err
		}
	}
	c.Port = port
	args := []string{"-D", c.Dir, "-p", strconv.Itoa(port), "-k", c.runDir,
		"-c", "listen_addresses=127.0.0.1"}
	if c.throwaway() {
		args = append(args, "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300", "-c", "shared_buffers=128MB")
	}
	names := slices.Sorted(maps.Keys(c.opts.Settings))
	for _, name := range names {
		args = append(args, "-c", name+"="+c.opts.Settings[name])
	}
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("pglocal: server log: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir = c.runDir
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Pdeathsig fires when the thread that started the child exits, so the
	// goroutine below keeps its thread locked for as long as the server runs.
	cmd.SysProcAttr = owner.sysProcAttr(c.throwaway())
	c.cmd, c.exited = cmd, make(chan struct{})
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer close(c.exited)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		c.cmd = nil
		return fmt.Errorf("pglocal: start %s: %w", bin, err)
	}
	c.opts.Logf("pglocal: postgres pid %d on 127.0.0.1:%d, data %s", cmd.Process.Pid, port, c.Dir)
	if err := c.waitReady(ctx); err != nil {
		_ = c.stopServer()
		return err
	}
	return nil
}

// waitReady connects in a loop until the server answers or readyTimeout passes.
func (c *Cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var lastErr error
	for {
		conn, err := pgx.Connect(ctx, c.URL("postgres"))
		if err == nil {
			return conn.Close(ctx)
		}
		lastErr = err
		select {
		case <-c.exited:
			return fmt.Errorf("pglocal: postgres exited during startup (%v); server log %s:\n%s",
				c.cmd.ProcessState, c.logPath, c.logTail())
		case <-ctx.Done():
			return fmt.Errorf("pglocal: postgres not ready after %s: %w; server log %s:\n%s",
				readyTimeout, errors.Join(ctx.Err(), lastErr), c.logPath, c.logTail())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stopServer asks the postmaster for a fast shutdown and waits for it to
// exit, killing it if it does not within a minute.
func (c *Cluster) stopServer() error {
	if c.cmd == nil {
		return nil
	}
	defer func() { c.cmd = nil }()
	select {
	case <-c.exited:
		return nil
	default:
	}
	if err := c.cmd.Process.Signal(syscall.SIGINT); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pglocal: signal postgres: %w", err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(time.Minute):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return fmt.Errorf("pglocal: postgres (pid %d) ignored fast shutdown and was killed", c.cmd.Process.Pid)
	}
}

// logTail returns the last lines of the server log.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read server log: %v)", err)
	}
	return tail(b, 20)
}

// tail returns the last n lines of b.
func tail(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePort asks the kernel for a currently unused TCP port on 127.0.0.1.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pglocal: pick a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// throwaway reports whether durability may be traded for speed, and the server tied to
// this process's life: for clusters removed on Stop, and for test clusters kept only
// across a restart.
func (c *Cluster) throwaway() bool { return !c.opts.Persistent || c.opts.Disposable }
