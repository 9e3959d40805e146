package pgtest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
)

// envHelper makes the test binary a helper of TestReaper_RemovesContainers: it starts a
// container as Main does, prints its ID, and then ends without stopping it, as the mode says.
const envHelper = "TERDUT_PGTEST_HELPER"

// helperMain is the helper's whole life. Its container must outlive it only until its
// reaper has removed it.
func helperMain(mode string) {
	srv, err := findServer(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("container %s\n", srv.container)
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // the parent has seen the container
	switch mode {
	case "panic":
		panic("a test panics, so no deferred cleanup runs")
	case "wait": // for a signal
		time.Sleep(time.Hour)
	}
	os.Exit(4)
}

// mustContainerHarness returns an engine client when this binary's server is a container.
func mustContainerHarness(t *testing.T) *client.Client {
	t.Helper()
	if currentKind != kindContainer {
		t.Skipf("pgtest uses a %s server in this run; this test needs a container (set %s=1 to require one)", currentKind, EnvRequireContainer)
	}
	cli, err := testcontainers.NewDockerClientWithOpts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli.Client
}

func TestReaper_RemovesContainers(t *testing.T) {
	cli := mustContainerHarness(t)
	for _, tc := range []struct {
		name, mode string
		signal     syscall.Signal // sent to the helper once its container runs; 0 for none
	}{
		{"Panic", "panic", 0},
		{"Interrupt", "wait", syscall.SIGINT},
		{"Kill", "wait", syscall.SIGKILL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envHelper+"="+tc.mode, EnvRequireContainer+"=1")
			var stderr bytes.Buffer // the helper's panic, shown only when the test fails
			cmd.Stderr = &stderr
			stdin, _ := cmd.StdinPipe()
			stdout, _ := cmd.StdoutPipe()
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, err := bufio.NewReader(stdout).ReadString('\n')
			id, ok := strings.CutPrefix(strings.TrimSpace(line), "container ")
			if err != nil || !ok || id == "" {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("helper printed %q (%v), want its container's ID; its stderr:\n%s", line, err, &stderr)
			}
			if _, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); err != nil {
				t.Fatalf("inspect the helper's container %.12s while it runs: %v", id, err)
			}
			if tc.signal != 0 {
				_ = cmd.Process.Signal(tc.signal)
			} else {
				_, _ = stdin.Write([]byte("go\n"))
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if !errors.As(err, &exit) {
				t.Fatalf("helper ended with %v, want a failure; its stderr:\n%s", err, &stderr)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
				if errdefs.IsNotFound(err) {
					return
				}
				if time.Now().After(deadline) {
					_, _ = cli.ContainerRemove(context.Background(), id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
					t.Fatalf("container %.12s of a helper that ended (%v) still exists 30s later (inspect: %v); its stderr:\n%s", id, exit, err, &stderr)
				}
				time.Sleep(200 * time.Millisecond)
			}
		})
	}
}

func TestSweep_RemovesOnlyContainersOfGoneOwners(t *testing.T) {
	cli := mustContainerHarness(t)
	ctx := context.Background()
	mine := ownerID(os.Getpid())
	boot, _, _ := strings.Cut(mine, "/")
	owners := map[string]bool{ // owner label: whether sweep must remove it
		mine:                  false,
		deadOwner(t, boot):    true,
		"another-boot-id/1/1": false,
		boot + "/" + strconv.Itoa(os.Getpid()) + "/1": true, // this PID, but not this process
		"not an owner label":                          false,
	}
	ids := map[string]string{}
	image := os.Getenv(EnvPostgresImage)
	if image == "" {
		image = DefaultPostgresImage
	}
	for owner := range owners {
		c, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
			Config: &container.Config{Image: image, Labels: map[string]string{labelHarness: "1", labelOwner: owner}},
		})
		if err != nil {
			t.Fatal(err)
		}
		ids[owner] = c.ID
		t.Cleanup(func() {
			_, _ = cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		})
	}
	if _, err := sweep(ctx, cli); err != nil {
		t.Fatal(err)
	}
	for owner, gone := range owners {
		_, err := cli.ContainerInspect(ctx, ids[owner], client.ContainerInspectOptions{})
		if got := errdefs.IsNotFound(err); got != gone {
			t.Errorf("owner %q: removed %v, want %v (inspect: %v)", owner, got, gone, err)
		}
	}
}

// deadOwner returns the owner label of a process that has ended.
func deadOwner(t *testing.T, boot string) string {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s/%d/1", boot, cmd.Process.Pid)
}

func TestOwnerGone(t *testing.T) {
	mine := ownerID(os.Getpid())
	if mine == "" {
		t.Fatal("ownerID of this process is empty: no /proc?")
	}
	boot, _, _ := strings.Cut(mine, "/")
	for _, tc := range []struct {
		owner string
		want  bool
	}{
		{mine, false},
		{deadOwner(t, boot), true},
		{boot + "/" + strconv.Itoa(os.Getpid()) + "/1", true},
		{"another-boot-id/1/1", false},
		{boot + "/notapid/1", false},
		{"", false},
	} {
		if got := ownerGone(tc.owner); got != tc.want {
			t.Errorf("ownerGone(%q) = %v, want %v", tc.owner, got, tc.want)
		}
	}
}
