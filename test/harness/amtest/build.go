package amtest

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Version is the Alertmanager release test/harness/amtest/ambin/go.mod pins.
const Version = "v0.35.0"

const modulePath = "github.com/prometheus/alertmanager"

// buildFlags are go build's flags besides -o. -trimpath keeps the copy's temporary directory
// out of the build cache's keys, so that a rebuild (a new Go, a cleared binary cache) reuses
// the compiled packages; netgo and CGO_ENABLED=0 are how Alertmanager's release builds it.
var buildFlags = []string{
	"-trimpath", "-tags", "netgo",
	"-ldflags", "-X github.com/prometheus/common/version.Version=" + strings.TrimPrefix(Version, "v") +
		" -X github.com/prometheus/common/version.Branch=" + Version +
		" -X github.com/prometheus/common/version.BuildUser=terdut-server/amtest",
}

// placeholder is the page put where ui/web.go embeds ui/app/dist (the web UI, which
// Alertmanager's release builds with npm and its module zip lacks). ui.Register serves each
// app's index.html from index.html.gz; the API, the dispatcher and the notifiers never read it.
const placeholder = "<!doctype html><title>Alertmanager</title><p>Alertmanager built by terdut-server's " +
	"test/harness/amtest: the web UI is not part of this build; the API is under /api/v2/.\n"

// placeholderFiles are the files written under ui/app/dist: //go:embed app/dist needs at
// least one, and ui.Register takes app/dist/elm and app/dist/mantine as the two apps' roots.
func placeholderFiles() (map[string][]byte, error) {
	var gz bytes.Buffer
	w := gzip.NewWriter(&gz) // no name and no time in the header: the same bytes every build
	if _, err := w.Write([]byte(placeholder)); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return map[string][]byte{
		"ui/app/dist/elm/index.html.gz":     gz.Bytes(),
		"ui/app/dist/mantine/index.html.gz": gz.Bytes(),
	}, nil
}

// Build returns the path of an alertmanager program built from the release ambin pins,
// building it when the cache has none for that release, this Go and these inputs: under
// $TERDUT_AM_CACHE, else the user's cache directory, in terdut-server-am/. A cold build takes
// minutes (about 5 on two busy cores), a rebuild with a warm Go build cache seconds. The
// module's source comes from the Go module proxy (go mod download, checked against ambin's
// go.sum), its dependencies likewise against its own go.sum. It returns go's output in the
// error when the download or the build fails.
//
// Test processes building at once are safe: one builds while the others wait on a lock in the
// cache directory, and the program is built beside its final name and renamed, so that a
// build cut short leaves nothing a later run would take for a program.
func Build() (string, error) {
	ambin, err := ambinDir()
	if err != nil {
		return "", err
	}
	files, err := placeholderFiles()
	if err != nil {
		return "", err
	}
	h := sha256.New()
	for _, name := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(ambin, name))
		if err != nil {
			return "", fmt.Errorf("amtest: %w", err)
		}
		fmt.Fprintf(h, "%s %d\n%s", name, len(b), b)
	}
	fmt.Fprintf(h, "placeholder %q\nflags %q\n", placeholder, buildFlags)
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, fmt.Sprintf("alertmanager-%s-%s-%s-%s-%s",
		Version, runtime.Version(), runtime.GOOS, runtime.GOARCH, hex.EncodeToString(h.Sum(nil)[:6])))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("amtest: %w", err)
	}
	unlock, err := lock(filepath.Join(dir, "build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil // another process built it while this one waited
	}

	src, err := moduleSource(ambin)
	if err != nil {
		return "", err
	}
	work, err := os.MkdirTemp("", "amtest-src-")
	if err != nil {
		return "", fmt.Errorf("amtest: %w", err)
	}
	defer os.RemoveAll(work)
	// The module cache is read-only; os.CopyFS makes the copy writable.
	if err := os.CopyFS(work, os.DirFS(src)); err != nil {
		return "", fmt.Errorf("amtest: copy %s: %w", src, err)
	}
	for name, body := range files {
		path := filepath.Join(work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return "", fmt.Errorf("amtest: %w", err)
		}
		if err := os.WriteFile(path, body, 0o644); err != nil {
			return "", fmt.Errorf("amtest: %w", err)
		}
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	args := append([]string{"build", "-o", tmp}, buildFlags...)
	cmd := exec.Command("go", append(args, "./cmd/alertmanager")...)
	cmd.Dir = work
	// The copy is a main module of its own: no workspace, its own go.sum, no cgo.
	cmd.Env = append(os.Environ(), "GOWORK=off", "CGO_ENABLED=0")
	if out, err := runTied(cmd); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("amtest: go build ./cmd/alertmanager in a copy of %s@%s: %w\n%s", modulePath, Version, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		return "", fmt.Errorf("amtest: %w", err)
	}
	return bin, nil
}

// binary is Build, once per test process.
var binary = sync.OnceValues(Build)

// runTied runs cmd and returns its combined output, with the command killed if this process
// dies first (a test binary past its -timeout): Pdeathsig fires when the thread that started
// the child exits, so the thread stays locked to this goroutine until the command is done.
func runTied(cmd *exec.Cmd) ([]byte, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd.CombinedOutput()
}

// lock takes an exclusive lock on path (created if missing), waiting for it. The kernel
// releases it if this process dies.
func lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("amtest: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("amtest: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// CacheDir is where built programs are kept: $TERDUT_AM_CACHE, else terdut-server-am in the
// user's cache directory.
func CacheDir() (string, error) {
	if dir := os.Getenv("TERDUT_AM_CACHE"); dir != "" {
		return dir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("amtest: no cache directory (set TERDUT_AM_CACHE): %w", err)
	}
	return filepath.Join(dir, "terdut-server-am"), nil
}

// moduleSource is the directory of the pinned Alertmanager module in the module cache,
// downloaded through the module proxy when missing.
func moduleSource(ambin string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", modulePath+"@"+Version)
	cmd.Dir = ambin
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	var m struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &m); err != nil || jerr != nil || m.Dir == "" {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return "", fmt.Errorf("amtest: go mod download %s@%s in %s: %v %s\n%s", modulePath, Version, ambin, err, m.Error, stderr)
	}
	return m.Dir, nil
}

// ambinDir finds test/harness/amtest/ambin from this source file's place, so that Build works
// from any package's test directory.
func ambinDir() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", fmt.Errorf("amtest: cannot find its own source to locate ambin")
	}
	dir := filepath.Join(filepath.Dir(file), "ambin")
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		return "", fmt.Errorf("amtest: %w", err)
	}
	return dir, nil
}

// mustBinary is Build's program, built once per test process; it fails tb with the reason
// when the program cannot be built.
func mustBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := binary()
	if err != nil {
		tb.Fatalf("amtest: no alertmanager program: %v", err)
	}
	return bin
}
