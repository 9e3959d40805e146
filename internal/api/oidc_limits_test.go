package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/oidctest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
)

// startLogin is GET /auth/oidc/login, as a browser or an API client sends it.
func startLogin(t *testing.T, srv *apitest.Server, html bool) apitest.Response {
	t.Helper()
	req := apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"}
	if html {
		req.Header = http.Header{"Accept": {"text/html"}}
	}
	return srv.MustDo(t, req)
}

// TestOIDC_PendingLimit: past the limit of sign-ins in progress, across replicas, a new one
// is refused with 503 and Retry-After and stores nothing; a finished or expired one frees
// its place, and expired ones are swept.
func TestOIDC_PendingLimit(t *testing.T) {
	const limit = 3
	p := oidctest.NewProvider(t)
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, p, func(o *api.Options) { o.OIDCPendingLimit = limit })
	a, b := replicas[0], replicas[1]
	a.MustClaim(t)

	flow := a.MustStartOIDC(t, p, "alice")
	for i := 1; i < limit; i++ {
		wantStatus(t, startLogin(t, replicas[i%2], false), http.StatusFound)
	}
	for _, html := range []bool{false, true} {
		for i, srv := range replicas {
			resp := startLogin(t, srv, html)
			if resp.Status != http.StatusServiceUnavailable {
				t.Fatalf("start %d past the limit on replica %d (html %v): got %d %s, want 503", limit+1, i, html, resp.Status, resp.Body)
			}
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > 600 {
				t.Errorf("Retry-After: got %q, want 1 to 600 seconds (until the oldest sign-in expires)", resp.Header.Get("Retry-After"))
			}
			if resp.Cookie("terdut_oidc_state") != nil {
				t.Errorf("a refused start set a state cookie")
			}
			if !html && resp.Code() != "too_many_signins_in_progress" {
				t.Errorf("code: got %s, want too_many_signins_in_progress", resp.Body)
			}
			if html && !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
				t.Errorf("a browser got %s, want a page", resp.Header.Get("Content-Type"))
			}
		}
	}
	if n := count(t, a, `SELECT count(*) FROM oidc_logins`); n != limit {
		t.Fatalf("sign-ins in progress: got %d, want %d", n, limit)
	}

	// Finishing a sign-in frees its place.
	resp, err := b.FinishOIDC(flow)
	if err != nil || resp.Status != http.StatusSeeOther {
		t.Fatalf("finish the first sign-in: got %d %s, %v, want 303", resp.Status, resp.Body, err)
	}
	wantStatus(t, startLogin(t, b, false), http.StatusFound)
	wantStatus(t, startLogin(t, a, false), http.StatusServiceUnavailable)

	// Expired sign-ins free theirs, and the next start sweeps them out.
	if _, err := a.Store.Pool().Exec(t.Context(), `UPDATE oidc_logins SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, startLogin(t, a, false), http.StatusFound)
	if n := count(t, a, `SELECT count(*) FROM oidc_logins`); n != 1 {
		t.Errorf("sign-ins after the expired were swept: got %d, want 1", n)
	}
	for i, srv := range replicas {
		if strings.Contains(srv.Logs.String(), `"level":"ERROR"`) {
			t.Errorf("replica %d logged an error for a refusal it meant to give: %s", i, srv.Logs)
		}
	}
}
