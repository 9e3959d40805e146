package api

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// TestWriteError_RetryAfterRoundsUp: a client that waits what Retry-After says must not be
// refused again, so a fraction of a second left counts as a whole one.
func TestWriteError_RetryAfterRoundsUp(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	for _, tt := range []struct {
		left time.Duration
		want string
	}{{1400 * time.Millisecond, "2"}, {time.Second, "1"}, {59*time.Second + time.Millisecond, "60"}, {10 * time.Millisecond, "1"}} {
		rec := httptest.NewRecorder()
		s.writeError(rec, httptest.NewRequest(http.MethodPost, "/api/bootstrap/reset", nil), &store.RateLimitedError{RetryAfter: tt.left})
		if got := rec.Header().Get("Retry-After"); rec.Code != http.StatusTooManyRequests || got != tt.want {
			t.Errorf("%s left: got %d Retry-After %q, want 429 %q", tt.left, rec.Code, got, tt.want)
		}
	}
}
