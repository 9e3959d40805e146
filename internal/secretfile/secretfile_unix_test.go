//go:build unix

package secretfile_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/secretfile"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	regular := filepath.Join(dir, "token")
	if err := os.WriteFile(regular, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(regular, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{regular, link} {
		if b, err := secretfile.Read(path, 10); err != nil || string(b) != "0123456789" {
			t.Errorf("Read(%s, 10): got %q, %v; want the content", path, b, err)
		}
	}
	if _, err := secretfile.Read(regular, 9); err == nil || !strings.Contains(err.Error(), "larger than 9 bytes") {
		t.Errorf("Read of 10 bytes with a limit of 9: got %v, want an error saying it is larger", err)
	}
	if _, err := secretfile.Read(filepath.Join(dir, "absent"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read of a missing file: got %v, want fs.ErrNotExist", err)
	}
	for _, path := range []string{fifo, dir} {
		done := make(chan error, 1)
		go func() { _, err := secretfile.Read(path, 10); done <- err }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") {
				t.Errorf("Read(%s): got %v, want an error saying it is not a regular file", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Read(%s): still waiting after 10s, want an answer at once", path)
		}
	}
}
