package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// newHangingServer starts a server that accepts requests and never answers them, until the
// client gives up or the test ends.
func newHangingServer(t *testing.T) *httptest.Server {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv
}

func TestClient_Timeouts(t *testing.T) {
	t.Parallel()
	const short = 200 * time.Millisecond
	t.Run("CallerDeadline", func(t *testing.T) {
		c := mustClient(t, newHangingServer(t).URL, client.WithTimeout(0))
		ctx, cancel := context.WithTimeout(t.Context(), short)
		defer cancel()
		start := time.Now()
		_, err := c.Status(ctx)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want context.DeadlineExceeded", err)
		}
		if errors.Is(err, client.ErrUnavailable) {
			t.Errorf("got %v, want the caller's deadline not to be reported as ErrUnavailable", err)
		}
		if took := time.Since(start); took > client.DefaultTimeout/2 {
			t.Errorf("took %s, want the call to end at the deadline (%s)", took, short)
		}
	})
	t.Run("PerCallTimeout", func(t *testing.T) {
		c := mustClient(t, newHangingServer(t).URL, client.WithTimeout(short),
			client.WithOperatorToken(apitest.OperatorToken))
		calls := map[string]func() error{
			"status":    func() error { _, err := c.Status(t.Context()); return err },
			"claim":     func() error { _, err := c.Claim(t.Context()); return err },
			"reset":     func() error { _, err := c.Reset(t.Context()); return err },
			"checkkey":  func() error { _, err := c.CheckKey(t.Context(), "k"); return err },
			"reconcile": func() error { _, err := c.Reconcile(t.Context(), ""); return err },
		}
		for name, call := range calls {
			err := call()
			if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("%s: got %v, want ErrUnavailable and context.DeadlineExceeded", name, err)
			}
		}
	})
	t.Run("ErrUnavailable", func(t *testing.T) {
		gone := httptest.NewServer(http.NotFoundHandler())
		gone.Close()
		_, err := mustClient(t, gone.URL).Status(t.Context())
		if !errors.Is(err, client.ErrUnavailable) {
			t.Fatalf("server not listening: got %v, want ErrUnavailable", err)
		}
	})
}
