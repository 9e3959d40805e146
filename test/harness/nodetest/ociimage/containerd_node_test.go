//go:build node

package ociimage

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// Containerd is a containerd of one test: its root, state, sockets and runc root under dir.
type Containerd struct {
	tb       testing.TB
	Address  string
	RuncRoot string
	proc     *proctest.Proc
}

// MustContainerd starts containerd with a config of only what importing and running images
// needs (no CRI, no snapshotters but overlayfs and native), waits until it answers, and
// registers its stop: containerd by its PID, any shim it left by PID, then every mount left
// under dir.
func MustContainerd(tb testing.TB, dir string) *Containerd {
	tb.Helper()
	c := &Containerd{tb: tb, Address: filepath.Join(dir, "containerd.sock"), RuncRoot: filepath.Join(dir, "runc")}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		tb.Fatal(err)
	}
	config := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = [
  "io.containerd.grpc.v1.cri",
  "io.containerd.internal.v1.opt",
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp",
]

[grpc]
  address = %q

[ttrpc]
  address = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.Address, c.Address+".ttrpc")
	configPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(configPath, []byte(config), 0o600); err != nil {
		tb.Fatal(err)
	}
	proc, err := proctest.Start("containerd", "containerd", []string{"--config", configPath},
		os.Environ(), filepath.Join(dir, "containerd.log"), proctest.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	c.proc = proc
	tb.Cleanup(func() { c.stop(dir) })
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := c.run("version"); err == nil {
			return c
		} else if proc.Done() || time.Now().After(deadline) {
			tb.Fatalf("containerd did not answer on %s: %v\n%s", c.Address, err, proc.Log())
		}
	}
}

// Must runs ctr against this containerd in namespace k8s.io and returns its output.
func (c *Containerd) Must(args ...string) string {
	c.tb.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.tb.Fatalf("ctr %s: %v\n%s\ncontainerd log:\n%s", strings.Join(args, " "), err, out, c.proc.Log())
	}
	return out
}

func (c *Containerd) run(args ...string) (string, error) {
	// A ctr that hangs (a container that never exits) fails the test rather than outlasting it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.Address, "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (c *Containerd) stop(dir string) {
	// A task still running when a test fails outlives containerd with its shim: kill and
	// delete every task, then every container, while containerd still answers.
	if tasks, err := c.run("tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(tasks) {
			if out, err := c.run("tasks", "delete", "--force", id); err != nil {
				c.tb.Errorf("ctr tasks delete --force %s: %v\n%s", id, err, out)
			}
		}
	}
	if containers, err := c.run("containers", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(containers) {
			if out, err := c.run("containers", "delete", id); err != nil {
				c.tb.Errorf("ctr containers delete %s: %v\n%s", id, err, out)
			}
		}
	}
	if !c.proc.Stop(syscall.SIGTERM, 30*time.Second) {
		c.tb.Errorf("containerd did not stop on SIGTERM within 30s; killed")
	}
	for _, pid := range shimsOf(c.Address) {
		c.tb.Errorf("containerd left shim %d; killing it", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	mounts, err := mountsUnder(dir)
	if err != nil {
		c.tb.Error(err)
	}
	for i := len(mounts) - 1; i >= 0; i-- {
		if err := syscall.Unmount(mounts[i], syscall.MNT_DETACH); err != nil {
			c.tb.Errorf("unmount %s: %v", mounts[i], err)
		}
	}
}

// shimsOf returns the PIDs of the shims started by the containerd at address.
func shimsOf(address string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.Contains(args[0], "containerd-shim") && contains(args, address) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// mountsUnder returns the mount points at or below dir, in the order they were mounted.
func mountsUnder(dir string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var mounts []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		// mountinfo escapes space, tab, newline and backslash as octal.
		point := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(fields[4])
		if point == dir || strings.HasPrefix(point, dir+"/") {
			mounts = append(mounts, point)
		}
	}
	return mounts, nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// lineHas reports whether one line of out holds every word.
func lineHas(out string, words ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		fields := strings.Fields(line)
		all := true
		for _, w := range words {
			all = all && contains(fields, w)
		}
		if all {
			return true
		}
	}
	return false
}
