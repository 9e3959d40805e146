package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
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
// still starts and the oldest are ended in its place (their callbacks answer invalid_state),
// so a flood of starts cannot refuse everyone; the table never holds more than the limit, and
// expired sign-ins are swept.
func TestOIDC_PendingLimit(t *testing.T) {
	const limit = 3
	p := oidctest.NewProvider(t)
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, p, func(o *api.Options) { o.OIDCPendingLimit = limit })
	a, b := replicas[0], replicas[1]
	a.MustClaim(t)

	oldest := a.MustStartOIDC(t, p, "alice")
	for i := 1; i < limit; i++ {
		wantStatus(t, startLogin(t, replicas[i%2], false), http.StatusFound)
	}
	for _, html := range []bool{false, true} {
		for i, srv := range replicas {
			resp := startLogin(t, srv, html)
			if resp.Status != http.StatusFound || resp.StateCookie() == nil {
				t.Fatalf("a start past the limit on replica %d (html %v): got %d %s, want 302 with a state cookie", i, html, resp.Status, resp.Body)
			}
			if n := count(t, a, `SELECT count(*) FROM oidc_logins`); n != limit {
				t.Fatalf("sign-ins in progress: got %d, want %d", n, limit)
			}
		}
	}
	// The oldest was ended; the newest finishes.
	resp, err := b.FinishOIDC(oldest)
	if err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, resp, http.StatusBadRequest, "invalid_state")
	newest := b.MustStartOIDC(t, p, "alice")
	if resp, err := a.FinishOIDC(newest); err != nil || resp.Status != http.StatusSeeOther {
		t.Fatalf("finish the newest sign-in: got %d %s, %v, want 303", resp.Status, resp.Body, err)
	}
	logs := a.Logs.String() + b.Logs.String()
	if !strings.Contains(logs, `"msg":"single sign-ons in progress reached --oidc-pending-limit: the oldest were ended"`) {
		t.Errorf("logs: got %s, want a warning that the oldest sign-ins were ended", logs)
	}

	// Expired sign-ins are swept by the next start.
	if _, err := a.Store.Pool().Exec(t.Context(), `UPDATE oidc_logins SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, startLogin(t, a, false), http.StatusFound)
	if n := count(t, a, `SELECT count(*) FROM oidc_logins`); n != 1 {
		t.Errorf("sign-ins after the expired were swept: got %d, want 1", n)
	}
	for i, srv := range replicas {
		if strings.Contains(srv.Logs.String(), `"level":"ERROR"`) {
			t.Errorf("replica %d logged an error: %s", i, srv.Logs)
		}
	}
}

// TestOIDC_StartWhileProviderDown: a start the provider cannot serve stores nothing, so an
// outage does not fill the sign-ins in progress; while the install is pending, the gate still
// answers first.
func TestOIDC_StartWhileProviderDown(t *testing.T) {
	p := oidctest.NewProvider(t)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.PublicURL = publicURL
		o.OIDC = apitest.OIDC(p)
		o.OIDC.Issuer = "http://127.0.0.1:1" // nothing listens there
	})
	wantAPIError(t, startLogin(t, srv, false), http.StatusServiceUnavailable, "bootstrap_pending")
	srv.MustClaim(t)
	for range 3 {
		wantAPIError(t, startLogin(t, srv, false), http.StatusServiceUnavailable, "sso_unavailable")
	}
	if n := count(t, srv, `SELECT count(*) FROM oidc_logins`); n != 0 {
		t.Errorf("sign-ins stored while the provider is down: got %d, want 0", n)
	}
}
