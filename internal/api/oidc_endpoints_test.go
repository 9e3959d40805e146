package api_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestOIDC_EndpointsRefused: a discovery document that names an endpoint in clear off
// loopback, or the token, JWKS or UserInfo endpoint on an origin other than the issuer's,
// is a misconfiguration: sign-in answers 500 sso_misconfigured naming the field, the log says
// so (readiness still 200, naming nothing: the provider's document does not take the replica
// out), and nothing is sent to the provider: no authorization, no code, no client secret.
func TestOIDC_EndpointsRefused(t *testing.T) {
	for _, tc := range []struct{ name, field, url string }{
		{"TokenInClear", "token_endpoint", "http://idp.example.test/token"},
		{"JWKSInClear", "jwks_uri", "http://idp.example.test/jwks"},
		{"UserInfoInClear", "userinfo_endpoint", "http://idp.example.test/userinfo"},
		{"AuthorizationInClear", "authorization_endpoint", "http://idp.example.test/authorize"},
		// On loopback, so only the origin rule refuses them.
		{"TokenOtherOrigin", "token_endpoint", "http://127.0.0.1:9/token"},
		{"JWKSOtherOrigin", "jwks_uri", "http://[::1]:9/jwks"},
		{"UserInfoOtherOrigin", "userinfo_endpoint", "http://127.0.0.1:9/userinfo"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := oidctest.NewProvider(t)
			p.SetEndpoint(tc.field, tc.url)
			srv := newReplicas(t, pgtest.MustDatabase(t), 1, p, nil)[0]
			srv.MustClaim(t)
			waitLog(t, srv, "misconfigured")
			if logs := srv.Logs.String(); !strings.Contains(logs, `"level":"ERROR"`) || !strings.Contains(logs, tc.field) {
				t.Errorf("the log does not name %s in an error:\n%s", tc.field, logs)
			}
			for _, accept := range []string{"application/json", "text/html"} {
				resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login",
					Header: http.Header{"Accept": {accept}}})
				if text := html.UnescapeString(string(resp.Body)); resp.Status != http.StatusInternalServerError ||
					!strings.Contains(text, tc.field) || resp.Header.Get("Location") != "" {
					t.Errorf("%s: got %d %s, want 500 naming %s", accept, resp.Status, resp.Body, tc.field)
				}
				if accept == "application/json" && resp.Code() != "sso_misconfigured" {
					t.Errorf("got code %q, want sso_misconfigured", resp.Code())
				}
			}
			ready := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
			if ready.Status != http.StatusOK || strings.Contains(string(ready.Body), tc.field) {
				t.Errorf("readyz: got %d %s, want 200 without the detail (the log has it)", ready.Status, ready.Body)
			}
			if a, tok := p.AuthorizeRequests(), p.TokenRequests(); a != 0 || tok != 0 {
				t.Errorf("authorize requests %d, token requests %d: want none", a, tok)
			}
		})
	}
}

// TestOIDC_NoRedirects: the client follows no redirect of the provider's: a token endpoint
// that answers 307 elsewhere does not get the code and the PKCE verifier (and a
// client_secret_post secret) sent on. (oauth2 then tries the token endpoint once more with the
// secret in the body, which the provider answers itself: that sign-in completes.)
func TestOIDC_NoRedirects(t *testing.T) {
	var elsewhere atomic.Int64
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		elsewhere.Add(1)
		http.Error(w, "not here", http.StatusTeapot)
	}))
	defer sink.Close()
	srv, p := newOIDCServer(t, nil)
	srv.MustClaim(t)
	f := srv.MustStartOIDC(t, p, "alice")
	p.NextTokenRedirect(sink.URL + "/token")
	if _, err := srv.FinishOIDC(f); err != nil {
		t.Fatal(err)
	}
	if n := elsewhere.Load(); n != 0 {
		t.Errorf("requests sent on to the redirect's target: got %d, want 0", n)
	}
}

// waitLog waits up to 10 seconds for the server's log to hold substr.
func waitLog(t *testing.T, srv *apitest.Server, substr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(srv.Logs.String(), substr) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
}
