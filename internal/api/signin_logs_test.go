package api_test

import (
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// TestSignInRefusalEventsBounded: anyone can send a single sign-on callback, or a sign-in
// while the install is pending, with nothing to show: like the operator's refusals, their
// security events are written at most once a second for each event and reason on a replica,
// each saying how many it held back (suppressed), so that 200 requests do not write 200
// WARN lines; another reason's refusal amid the flood is still written.
func TestSignInRefusalEventsBounded(t *testing.T) {
	srv, _ := newOIDCServer(t, nil)
	const n = 200
	flood := func(req apitest.Request, want int) time.Duration {
		t.Helper()
		var sent atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for sent.Add(1) <= n {
					if resp, err := srv.Do(req); err != nil || resp.Status != want {
						t.Errorf("%s: got %d %v, want %d", req.Path, resp.Status, err, want)
						return
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	bounded := func(event, reason string, elapsed time.Duration) {
		t.Helper()
		var lines []logLine
		for _, l := range securityEvents(t, srv, event) {
			if l["reason"] == reason {
				lines = append(lines, l)
			}
		}
		if bound := 1 + int(math.Ceil(elapsed.Seconds())); len(lines) < 1 || len(lines) > bound {
			t.Errorf("%s %s events for %d requests in %s: got %d, want 1 to %d (one a second)", event, reason, n, elapsed, len(lines), bound)
		}
		for _, l := range lines {
			if _, ok := l["suppressed"].(float64); !ok {
				t.Errorf("%s: no suppressed count in %v", event, l)
			}
		}
	}

	callback := apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/callback?code=c&state=s"}
	bounded("login.sso.refused", "bootstrap_pending", flood(callback, http.StatusServiceUnavailable))

	srv.MustClaim(t)
	elapsed := flood(callback, http.StatusBadRequest)
	bounded("login.sso.refused", "invalid_state", elapsed)
	if got := len(securityEvents(t, srv, "login.password.failed")); got != 0 {
		t.Fatalf("login.password.failed: got %d before any, want 0", got)
	}
	wantStatus(t, login(t, srv, "nobody", "a-wrong-password", nil), http.StatusUnauthorized)
	wantEvent(t, srv, "login.password.failed", map[string]any{"outcome": "failed"})
}
