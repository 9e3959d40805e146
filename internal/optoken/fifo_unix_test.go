//go:build unix

package optoken_test

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/optoken"
)

// TestSource_NotARegularFile: a FIFO at the token file's path (opened for reading, it would
// wait for a writer) neither hangs the start nor a check, and a directory is refused too.
func TestSource_NotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	within := func(t *testing.T, what string, f func()) {
		t.Helper()
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still waiting after 10s, want an answer at once", what)
		}
	}
	t.Run("Load", func(t *testing.T) {
		for _, path := range []string{fifo, dir} {
			within(t, "Load "+path, func() {
				_, err := optoken.Load(path, nil)
				if err == nil || !strings.Contains(err.Error(), "not a regular file") {
					t.Errorf("Load(%s): got %v, want an error saying it is not a regular file", path, err)
				}
			})
		}
	})
	t.Run("CheckKeepsLastGoodTokens", func(t *testing.T) {
		path := filepath.Join(dir, "token")
		writeFile(t, path, tokenA+"\n")
		src, err := optoken.Load(path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Unlink(path); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		within(t, "Check", func() {
			if !src.Check(tokenA) {
				t.Error("Check(tokenA) with a FIFO in the file's place: got false, want the last good tokens in force")
			}
		})
	})
}
