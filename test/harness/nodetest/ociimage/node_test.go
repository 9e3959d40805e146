//go:build node

package ociimage

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// snapshotter is the one containerd unpacks and runs images with: overlayfs works here
// (ext4 under the test's directory); native is the fallback where overlay cannot mount.
var snapshotter = envOr("TERDUT_SNAPSHOTTER", "overlayfs")

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// helperSource is a probe program: it shows the user, directory, environment and arguments
// the image config gave it, and that /tmp is writable.
const helperSource = `package main

import (
	"fmt"
	"os"
)

func main() {
	wd, _ := os.Getwd()
	err := os.WriteFile("/tmp/probe", []byte("x"), 0o600)
	fmt.Printf("uid=%d gid=%d wd=%s env=%s args=%q tmp=%v\n",
		os.Getuid(), os.Getgid(), wd, os.Getenv("TERDUT_PROBE"), os.Args[1:], err)
}
`

// TestContainerdImport imports the pause image and a Binary image into a containerd of the
// test's own, in namespace k8s.io, and runs both.
func TestContainerdImport(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root: containerd mounts snapshots and runc makes namespaces")
	}
	dir := t.TempDir()
	start := time.Now()
	pauseArchive, pauseRef, err := Pause(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("Pause wrote %s in %v", pauseRef, time.Since(start).Round(time.Millisecond))
	helperArchive, helperRef := mustHelperImage(t, dir)

	ctr := MustContainerd(t, filepath.Join(dir, "containerd"))
	for _, archive := range []string{pauseArchive, helperArchive} {
		ctr.Must("images", "import", "--snapshotter", snapshotter, archive)
	}
	names := strings.Fields(ctr.Must("images", "ls", "-q"))
	for _, ref := range []string{pauseRef, helperRef} {
		if !contains(names, ref) {
			t.Errorf("ctr images ls -q: %q, want %s among them", names, ref)
		}
	}
	check := ctr.Must("images", "check", "--snapshotter", snapshotter)
	t.Logf("ctr images check:\n%s", check)
	for _, ref := range []string{pauseRef, helperRef} {
		if !lineHas(check, ref, "complete", "true") {
			t.Errorf("ctr images check: %s not complete and unpacked:\n%s", ref, check)
		}
	}

	t.Run("Pause", func(t *testing.T) {
		out := ctr.Must("run", "--rm", "--snapshotter", snapshotter, "--runc-root", ctr.RuncRoot,
			pauseRef, fmt.Sprintf("ociimage-pause-%d", os.Getpid()), "/pause", "-v")
		t.Logf("/pause -v: %s", out)
		if !strings.HasPrefix(out, "pause.c v3.") {
			t.Errorf("/pause -v: got %q, want pause.c v3.*", out)
		}
	})
	t.Run("Binary", func(t *testing.T) {
		out := ctr.Must("run", "--rm", "--snapshotter", snapshotter, "--runc-root", ctr.RuncRoot,
			helperRef, fmt.Sprintf("ociimage-helper-%d", os.Getpid()))
		want := fmt.Sprintf("uid=%d gid=%d wd=/tmp env=1 args=[\"hello\"] tmp=<nil>\n", NonrootUID, NonrootUID)
		if out != want {
			t.Errorf("helper: got %q, want %q", out, want)
		}
	})
}

// mustHelperImage builds helperSource static and writes it as an image run as nonroot.
func mustHelperImage(t *testing.T, dir string) (archive, ref string) {
	t.Helper()
	src := filepath.Join(dir, "probe.go")
	if err := os.WriteFile(src, []byte(helperSource), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "probe")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build probe: %v\n%s", err, out)
	}
	ref = "terdut.test/ociimage-probe:1"
	archive, err := Binary(dir, ref, bin, Config{
		Cmd: []string{"hello"}, Env: []string{"TERDUT_PROBE=1"}, User: "nonroot", WorkingDir: "/tmp",
	})
	if err != nil {
		t.Fatal(err)
	}
	return archive, ref
}
