package pglocal

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Kill ends the server the way a crashed machine would: the postmaster and every process
// it started (backends, WAL senders, background workers) get SIGKILL, with no shutdown
// checkpoint and no goodbye to clients or standbys. It returns once they are all gone;
// Stop afterwards only removes the directories.
func (c *Cluster) Kill() error {
	if c.cmd == nil {
		return nil
	}
	pid := c.cmd.Process.Pid
	children, err := stopAndKillChildren(pid)
	if err != nil {
		return err
	}
	_ = c.cmd.Process.Kill()
	<-c.exited
	c.cmd = nil
	return waitGone(pid, children)
}

// KillPostmaster is Kill for a postmaster that another program started (Patroni, which puts
// it in a session of its own): the process pid and every child of it get SIGKILL. It returns
// once they are all gone, whoever reaps them.
func KillPostmaster(pid int) error {
	children, err := stopAndKillChildren(pid)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pglocal: kill postmaster %d: %w", pid, err)
	}
	return waitGone(pid, append(children, pid))
}

// stopAndKillChildren freezes the postmaster pid, so that it starts no new child between the
// listing and the kill, and kills its children.
func stopAndKillChildren(pid int) ([]int, error) {
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil && !errors.Is(err, syscall.ESRCH) {
		return nil, fmt.Errorf("pglocal: stop postmaster %d: %w", pid, err)
	}
	children := childrenOf(pid)
	for _, child := range children {
		_ = syscall.Kill(child, syscall.SIGKILL)
	}
	return children, nil
}

// waitGone waits until none of pids runs (a zombie does not); init reaps orphans in its own time.
func waitGone(postmaster int, pids []int) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		alive := 0
		for _, p := range pids {
			if running(p) {
				alive++
			}
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pglocal: %d processes of postmaster %d survived SIGKILL for a minute", alive, postmaster)
		}
	}
}

// Promote turns a standby (see Options.StandbyOf) into a primary and returns once it
// accepts writes.
func (c *Cluster) Promote(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pglocal: promote: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var promoted bool
	if err := conn.QueryRow(ctx, "SELECT pg_promote(wait => true, wait_seconds => 60)").Scan(&promoted); err != nil {
		return fmt.Errorf("pglocal: promote: %w", err)
	}
	if !promoted {
		return fmt.Errorf("pglocal: the standby on port %d did not finish its promotion within a minute; server log %s:\n%s",
			c.Port, c.logPath, c.logTail())
	}
	return nil
}

// childrenOf lists the processes whose parent is pid, from /proc.
func childrenOf(pid int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var children []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // the process has gone
		}
		if fields := statFields(b); len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			if child, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
				children = append(children, child)
			}
		}
	}
	return children
}

// running reports whether pid is a process that has not exited (a zombie has).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := statFields(b)
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// statFields returns the fields of /proc/PID/stat after the command name: state, ppid, ...
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	var fields []string
	for _, f := range bytes.Fields(b[i+1:]) {
		fields = append(fields, string(f))
	}
	return fields
}
