package stalltest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/stalltest"
)

// TestPeer: a client's request waits at the peer, counted as open, until the client gives
// up; then it no longer counts. Trickle's first bytes arrive, its answer never does.
func TestPeer(t *testing.T) {
	for name, mode := range stalltest.Modes {
		t.Run(name, func(t *testing.T) {
			p := stalltest.New(t, mode)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL()+"/.well-known/openid-configuration", nil)
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					_, err = io.ReadAll(resp.Body)
					resp.Body.Close()
				}
				done <- err
			}()
			p.MustWaitRequest(t, 10*time.Second)
			select {
			case err := <-done:
				t.Fatalf("got an answer (%v), want the request held", err)
			case <-time.After(100 * time.Millisecond):
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want the client's own cancellation", err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for p.Open() != 0 {
				if time.Now().After(deadline) {
					t.Fatalf("open after the client left: got %d, want 0", p.Open())
				}
				time.Sleep(5 * time.Millisecond)
			}
			if p.Taken() != 1 || p.Requests() != 1 {
				t.Errorf("got %d taken, %d requests, want 1 and 1", p.Taken(), p.Requests())
			}
		})
	}
	t.Run("Handler", func(t *testing.T) {
		p := stalltest.New(t, stalltest.Silent)
		srv := httptest.NewServer(p.Handler())
		t.Cleanup(srv.Close)
		c := &http.Client{Timeout: 200 * time.Millisecond}
		if _, err := c.Get(srv.URL); err == nil {
			t.Fatal("got an answer, want the request held until the client's timeout")
		}
		if p.Requests() != 1 {
			t.Errorf("requests: got %d, want 1", p.Requests())
		}
	})
}
