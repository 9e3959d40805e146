package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
)

// Every container pgtest starts carries these labels. labelOwner names the test process
// that owns it, as "bootID/pid/starttime", so that a later run can tell that the owner is
// gone even when its PID was reused.
const (
	labelHarness = "terdut.pgtest"
	labelOwner   = "terdut.pgtest.owner"
)

// envReaper, in the environment of a re-executed test binary, makes it pgtest's reaper for
// the owner it names (see startReaper).
const envReaper = "TERDUT_PGTEST_REAPER"

// A test binary started as the reaper does nothing else: it runs before TestMain.
func init() {
	if owner := os.Getenv(envReaper); owner != "" {
		os.Exit(reap(owner, os.Stdin))
	}
}

// reaper is the process that removes this test binary's containers once it is gone.
type reaper struct {
	cmd  *exec.Cmd
	pipe io.WriteCloser
}

// startReaper starts the test binary again as a reaper: its stdin is a pipe whose only
// writer is this process, so it reads end-of-file when this process ends for any reason
// (a panicking test, an interrupt, SIGKILL, a go test timeout), and then removes every
// container labelled with owner. It ignores interrupts and runs in its own process group,
// so that a Ctrl-C meant for the tests does not stop it. testcontainers-go's own reaper
// (Ryuk) is an image that a machine with no registry cannot have; this one is not.
func startReaper(owner, daemonHost string) (*reaper, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the test binary for the reaper: %w", err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envReaper+"="+owner, "DOCKER_HOST="+daemonHost)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	pipe, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the reaper: %w", err)
	}
	return &reaper{cmd: cmd, pipe: pipe}, nil
}

// stop tells the reaper this process is done (it then removes whatever is left) and waits
// for it.
func (r *reaper) stop() error {
	_ = r.pipe.Close()
	done := make(chan error, 1)
	go func() { done <- r.cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		_ = r.cmd.Process.Kill()
		return fmt.Errorf("the reaper did not finish within a minute")
	}
}

// reap waits for end-of-file on in, then removes the containers of owner.
func reap(owner string, in io.Reader) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	_, _ = io.Copy(io.Discard, in)
	tclog.SetDefault(tclog.NewNoopLogger())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest reaper: %v\n", err)
		return 1
	}
	defer cli.Close()
	removed, err := removeContainers(ctx, cli, labelOwner+"="+owner, func(map[string]string) bool { return true })
	for _, id := range removed {
		fmt.Fprintf(os.Stderr, "pgtest reaper: removed container %.12s, left by test process %s\n", id, owner)
	}
	if err == nil {
		err = removeNetworks(ctx, cli.Client, labelOwner+"="+owner, func(map[string]string) bool { return true })
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest reaper: %v\n", err)
		return 1
	}
	return 0
}

// sweep removes the containers of earlier pgtest runs on this machine whose owner process
// has ended (their reaper could not run: the machine stopped, or it was killed too).
func sweep(ctx context.Context, cli client.APIClient) ([]string, error) {
	gone := func(labels map[string]string) bool { return ownerGone(labels[labelOwner]) }
	removed, err := removeContainers(ctx, cli, labelHarness, gone)
	if err == nil {
		err = removeNetworks(ctx, cli, labelHarness, gone)
	}
	return removed, err
}

// removeContainers force-removes, with their volumes, the containers matching the label
// filter for which pick returns true, and returns the IDs it removed. A container that is
// already gone, or that another process is removing, is not an error.
func removeContainers(ctx context.Context, cli client.APIClient, label string, pick func(map[string]string) bool) ([]string, error) {
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return nil, fmt.Errorf("list containers labelled %s: %w", label, err)
	}
	var removed []string
	for _, c := range list.Items {
		if !pick(c.Labels) {
			continue
		}
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		switch {
		case errdefs.IsNotFound(err) || errdefs.IsConflict(err):
			continue // gone already, or another reaper is removing it
		case err != nil:
			return removed, fmt.Errorf("remove container %.12s: %w", c.ID, err)
		}
		removed = append(removed, c.ID)
	}
	return removed, nil
}

// removeNetworks removes the networks matching the label filter (their containers are
// gone by then).
func removeNetworks(ctx context.Context, cli client.APIClient, label string, pick func(map[string]string) bool) error {
	list, err := cli.NetworkList(ctx, client.NetworkListOptions{Filters: make(client.Filters).Add("label", label)})
	if err != nil {
		return fmt.Errorf("list networks labelled %s: %w", label, err)
	}
	for _, n := range list.Items {
		if !pick(n.Labels) {
			continue
		}
		if _, err := cli.NetworkRemove(ctx, n.ID, client.NetworkRemoveOptions{}); err != nil && !errdefs.IsNotFound(err) {
			return fmt.Errorf("remove network %s: %w", n.Name, err)
		}
		fmt.Fprintf(os.Stderr, "pgtest reaper: removed network %s\n", n.Name)
	}
	return nil
}

// ownerID returns the owner label of process pid on this machine, or "" when it cannot
// be told (no /proc).
func ownerID(pid int) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	start, ok := startTime(pid)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s/%d/%s", strings.TrimSpace(string(boot)), pid, start)
}

// ownerGone reports whether the process an owner label names has certainly ended: it ran
// on this machine since its last boot and no process with its PID and start time exists.
// Labels of other machines, or unreadable ones, are never taken for gone.
func ownerGone(owner string) bool {
	parts := strings.Split(owner, "/")
	if len(parts) != 3 {
		return false
	}
	pid, err := strconv.Atoi(parts[1])
	if err != nil || pid <= 0 {
		return false
	}
	mine := ownerID(os.Getpid())
	if mine == "" || !strings.HasPrefix(mine, parts[0]+"/") {
		return false // another machine, or another boot: not ours to judge
	}
	start, alive := startTime(pid)
	return !alive || start != parts[2]
}

// startTime returns field 22 of /proc/PID/stat, the process's start time in clock ticks
// since boot.
func startTime(pid int) (string, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", false
	}
	// The command name (field 2) may hold spaces and parentheses: count after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", false
	}
	fields := strings.Fields(string(b[i+1:]))
	if len(fields) < 20 {
		return "", false
	}
	return fields[19], true
}
