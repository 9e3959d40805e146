//go:build unix

package opjwt_test

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// TestVerify_TokenFileIsAFIFO: a FIFO at the server's own token file (opened for reading, it
// would wait for a writer) makes the keys unreadable at once, rather than hanging every
// verification.
func TestVerify_TokenFileIsAFIFO(t *testing.T) {
	is := satest.New(t, satest.Options{TLS: true, Bearer: "server-sa-token"})
	dir := t.TempDir()
	fifo := filepath.Join(dir, "token")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, is, func(c *opjwt.Config) {
		c.CAFile, c.AuthTokenFile, c.MinRefresh = is.CAFile(t, dir), fifo, time.Nanosecond
	})
	for i := range 3 {
		done := make(chan error, 1)
		go func() { _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); done <- err }()
		select {
		case err := <-done:
			if !errors.Is(err, opjwt.ErrUnavailable) {
				t.Fatalf("verification %d: got %v, want ErrUnavailable", i, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("verification %d: still waiting after 10s with a FIFO as the token file, want an answer at once", i)
		}
	}
}
