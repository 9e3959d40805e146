package api_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

// refusalLines returns the log lines of refused service-account tokens for reason.
func refusalLines(t *testing.T, srv *apitest.Server, reason string) []logLine {
	t.Helper()
	return logLines(t, srv, func(l logLine) bool {
		return l["msg"] == "operator service-account token refused" && l["reason"] == reason
	})
}

// TestOperatorIdentity_RefusalLogsBounded: anonymous callers of the operator endpoints
// cannot inflate the log. A kid of 11 KiB (about the most a 16 KiB token holds) makes a line
// of bounded size; a flood of refusals writes at most a line a second for its reason, each
// saying how many it held back, while another reason's refusal is still logged and the
// metrics count every refusal.
func TestOperatorIdentity_RefusalLogsBounded(t *testing.T) {
	is := satest.New(t, satest.Options{})
	srv := identityServer(t, is, false)
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("LongKID", func(t *testing.T) {
		kid := strings.Repeat("k", 11<<10)
		token := satest.SignWith(t, jose.ES256, stranger, kid, is.Payload(opClaims("p")))
		if resp := claim(t, srv, token); resp.Status != http.StatusUnauthorized {
			t.Fatalf("got %d %s, want 401", resp.Status, resp.Body)
		}
		lines := refusalLines(t, srv, "unknown_key")
		if len(lines) != 1 {
			t.Fatalf("refusal lines: got %d, want 1", len(lines))
		}
		for _, line := range strings.Split(srv.Logs.String(), "\n") {
			if len(line) > 1024 {
				t.Errorf("a log line of %d bytes, want at most 1 KiB: %.200s…", len(line), line)
			}
		}
		if strings.Contains(srv.Logs.String(), kid[:256]) {
			t.Error("the log quotes 256 bytes of the caller's kid, want at most 128")
		}
	})

	t.Run("Flood", func(t *testing.T) {
		c := opClaims("p")
		c.Audience = []string{"https://kubernetes.default.svc"}
		flood := is.Sign(t, c)
		expired := opClaims("p")
		now := time.Now()
		expired.IssuedAt, expired.NotBefore, expired.Expiry = now.Add(-time.Hour), now.Add(-time.Hour), now.Add(-2*time.Minute)

		const n = 400
		// Another reason, amid the flood: not hidden by it.
		elapsed := floodClaims(t, srv, flood, n, 8, http.StatusUnauthorized, func() {
			if resp := claim(t, srv, is.Sign(t, expired)); resp.Status != http.StatusUnauthorized {
				t.Errorf("expired: got %d %s, want 401", resp.Status, resp.Body)
			}
		})
		lines := refusalLines(t, srv, "audience")
		if bound := 1 + int(math.Ceil(elapsed.Seconds())); len(lines) < 1 || len(lines) > bound {
			t.Errorf("lines for %d refusals in %s: got %d, want 1 to %d (one a second)", n, elapsed, len(lines), bound)
		}
		if got := len(refusalLines(t, srv, "expired")); got != 1 {
			t.Errorf("the expired token amid the flood: got %d lines, want 1", got)
		}
		if got := metric(t, srv, `terdut_operator_identity_refusals_total{reason="audience"}`); got != n {
			t.Errorf("metric: got %v refusals, want every one of the %d", got, n)
		}

		// Once a second has passed, the next refusal's line says how many were held back:
		// the lines and their counts account for every refusal.
		total := n
		deadline := time.Now().Add(30 * time.Second)
		for len(refusalLines(t, srv, "audience")) == len(lines) {
			if time.Now().After(deadline) {
				t.Fatal("no refusal logged again within 30s")
			}
			time.Sleep(100 * time.Millisecond)
			claim(t, srv, flood)
			total++
		}
		counted := 0
		for _, l := range refusalLines(t, srv, "audience") {
			s, ok := l["suppressed"].(float64)
			if !ok {
				t.Fatalf("line %v: no suppressed count", l)
			}
			counted += 1 + int(s)
		}
		if counted != total {
			t.Errorf("lines plus the refusals they say were held back: got %d, want the %d refusals", counted, total)
		}
	})
}

// TestOperatorIdentity_UnavailableLogsBounded: while the issuer's keys cannot be read, every
// service-account token answers 503, and the log gets at most a line a second of it, not an
// ERROR a request.
func TestOperatorIdentity_UnavailableLogsBounded(t *testing.T) {
	is := satest.New(t, satest.Options{Bearer: "only-for-the-right-caller"})
	srv := identityServer(t, is, false)
	token := is.Sign(t, opClaims("p"))
	const n = 100
	elapsed := floodClaims(t, srv, token, n, 4, http.StatusServiceUnavailable, nil)
	lines := strings.Count(srv.Logs.String(), `"level":"ERROR"`)
	if bound := 1 + int(math.Ceil(elapsed.Seconds())); lines < 1 || lines > bound {
		t.Errorf("ERROR lines for %d requests in %s: got %d, want 1 to %d (one a second)", n, elapsed, lines, bound)
	}
	if got := metric(t, srv, `terdut_operator_identity_refusals_total{reason="issuer_unavailable"}`); got != n {
		t.Errorf("metric: got %v, want every one of the %d", got, n)
	}
}

// TestOperatorRefusedEventsBounded: the security event of a wrong operator token, which
// anyone can send, is written at most once a second for each reason, like the refusal lines
// above, and the lines with their suppressed counts account for every refusal, which the
// metric counts one by one.
func TestOperatorRefusedEventsBounded(t *testing.T) {
	srv := newServer(t)
	wrong := strings.Repeat("x", 40)
	const n = 200
	// Another reason, amid the flood: not hidden by it.
	elapsed := floodClaims(t, srv, wrong, n, 4, http.StatusUnauthorized, func() {
		if resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap"}); resp.Status != http.StatusUnauthorized {
			t.Errorf("no token: got %d %s, want 401", resp.Status, resp.Body)
		}
	})
	refused := func(reason string) []logLine {
		var out []logLine
		for _, l := range securityEvents(t, srv, "operator.refused") {
			if l["reason"] == reason {
				out = append(out, l)
			}
		}
		return out
	}
	lines := refused("wrong_token")
	if bound := 1 + int(math.Ceil(elapsed.Seconds())); len(lines) < 1 || len(lines) > bound {
		t.Errorf("operator.refused events for %d wrong tokens in %s: got %d, want 1 to %d (one a second)", n, elapsed, len(lines), bound)
	}
	if got := len(refused("missing_token")); got != 1 {
		t.Errorf("the request without a token amid the flood: got %d events, want 1", got)
	}
	total := n
	deadline := time.Now().Add(30 * time.Second)
	for len(refused("wrong_token")) == len(lines) {
		if time.Now().After(deadline) {
			t.Fatal("no wrong token logged again within 30s")
		}
		time.Sleep(100 * time.Millisecond)
		srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: wrong})
		total++
	}
	counted := 0
	for _, l := range refused("wrong_token") {
		s, ok := l["suppressed"].(float64)
		if !ok {
			t.Fatalf("event %v: no suppressed count", l)
		}
		counted += 1 + int(s)
	}
	if counted != total {
		t.Errorf("events plus the refusals they say were held back: got %d, want the %d refusals", counted, total)
	}
	if got := metric(t, srv, `terdut_operator_token_failures_total`); got != float64(total+1) {
		t.Errorf("metric: got %v, want every one of the %d refusals", got, total+1)
	}
}

// floodClaims sends n claims with bearer from workers goroutines, each answered want, runs
// amid (when not nil) while they are under way, and returns how long the flood took.
func floodClaims(t *testing.T, srv *apitest.Server, bearer string, n, workers, want int, amid func()) time.Duration {
	t.Helper()
	var sent atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for sent.Add(1) <= int64(n) {
				if resp, err := srv.Do(apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: bearer}); err != nil || resp.Status != want {
					t.Errorf("got %d %v, want %d", resp.Status, err, want)
					return
				}
			}
		})
	}
	if amid != nil {
		amid()
	}
	wg.Wait()
	return time.Since(start)
}
