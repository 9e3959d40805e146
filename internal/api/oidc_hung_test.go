package api_test

import (
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/harness/stalltest"
)

// TestOIDC_ProviderHung: with --oidc-issuer at a provider that accepts and never answers, or
// answers a byte a second, the discovery the server starts at start-up stays stuck there.
// Meanwhile every probe, the login page, API keys, password sign-in and the operator's
// endpoints answer without waiting for it, single sign-on starts answer 503 with Retry-After
// within a bounded wait, and none of them starts a second discovery: the one request at the
// provider is still waiting when they have all been answered.
func TestOIDC_ProviderHung(t *testing.T) {
	for name, mode := range stalltest.Modes {
		t.Run(name, func(t *testing.T) {
			hung := stalltest.New(t, mode)
			srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
				o.PublicURL = publicURL
				// A minute, so that the discovery is surely still stuck when the answers are
				// checked, however slow this machine is.
				o.OIDC = &api.OIDCOptions{Issuer: hung.URL(), ClientID: "terdut", ClientSecret: "secret",
					GroupsClaim: "groups", Timeout: time.Minute}
			})
			key := srv.MustClaim(t)
			alice := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
			hung.MustWaitRequest(t, 30*time.Second) // the discovery at start is stuck

			type call struct {
				name string
				req  apitest.Request
				want int
				code string
				max  time.Duration // generous: the stuck discovery lasts a minute
			}
			calls := []call{
				{"readyz", apitest.Request{Method: http.MethodGet, Path: "/readyz"}, http.StatusOK, "", 10 * time.Second},
				{"login page", apitest.Request{Method: http.MethodGet, Path: "/login", Header: http.Header{"Accept": {"text/html"}}}, http.StatusOK, "", 10 * time.Second},
				{"api key", apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key}, http.StatusOK, "", 10 * time.Second},
				{"password sign-in", apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": alice.User.Username, "password": alice.Password}}, http.StatusOK, "", 10 * time.Second},
				{"operator status", apitest.Request{Method: http.MethodGet, Path: "/api/bootstrap/status"}, http.StatusOK, "", 10 * time.Second},
				{"sso start", apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"}, http.StatusServiceUnavailable, "sso_unavailable", 15 * time.Second},
			}
			var wg sync.WaitGroup
			var mu sync.Mutex
			slowest := map[string]time.Duration{}
			for i := range 8 * len(calls) {
				c := calls[i%len(calls)]
				wg.Go(func() {
					start := time.Now()
					resp, err := srv.Do(c.req)
					took := time.Since(start)
					mu.Lock()
					slowest[c.name] = max(slowest[c.name], took)
					mu.Unlock()
					switch {
					case err != nil:
						t.Errorf("%s: %v", c.name, err)
					case resp.Status != c.want || (c.code != "" && resp.Code() != c.code):
						t.Errorf("%s: got %d %s, want %d %s", c.name, resp.Status, resp.Body, c.want, c.code)
					case c.want == http.StatusServiceUnavailable && resp.Header.Get("Retry-After") == "":
						t.Errorf("%s: got no Retry-After", c.name)
					case took > c.max:
						t.Errorf("%s: took %s, want under %s: it waited for the hung provider", c.name, took, c.max)
					}
				})
			}
			wg.Wait()
			t.Logf("slowest answers while the provider hangs: %v", slowest)
			if n := strings.Count(srv.Logs.String(), "request failed"); n != 0 {
				t.Errorf("request-failed lines: got %d, want none: the refused sign-ins are the provider's outage, logged by the discovery", n)
			}
			if open, n := hung.Open(), hung.Requests(); open != 1 || n != 1 {
				t.Errorf("at the hung provider: got %d requests, %d still waiting, want the discovery of the start still "+
					"waiting and no other: every answer above came without waiting for it", n, open)
			}
		})
	}
}

// TestOIDC_ProviderDownLogsOnce: while the provider refuses connections, a flood of sign-in
// starts, anyone's to send, answers 503 each, and the log says so once (the discovery that
// found the outage), not once a request.
func TestOIDC_ProviderDownLogsOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	issuer := "http://" + ln.Addr().String()
	ln.Close() // nobody answers there now
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.PublicURL = publicURL
		o.OIDC = &api.OIDCOptions{Issuer: issuer, ClientID: "terdut", ClientSecret: "secret", GroupsClaim: "groups"}
	})
	srv.MustClaim(t)
	const n = 50
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			resp, err := srv.Do(apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
			if err != nil || resp.Status != http.StatusServiceUnavailable || resp.Code() != "sso_unavailable" {
				t.Errorf("got %d %s %v, want 503 sso_unavailable", resp.Status, resp.Body, err)
			}
		})
	}
	wg.Wait()
	logs := srv.Logs.String()
	if got := strings.Count(logs, "single sign-on provider unreachable"); got != 1 {
		t.Errorf("lines saying the provider is unreachable: got %d, want 1\n%s", got, logs)
	}
	if got := strings.Count(logs, "request failed"); got != 0 {
		t.Errorf("request-failed lines for %d refused sign-ins: got %d, want none", n, got)
	}
	if got := metric(t, srv, `terdut_http_requests_total{method="GET",route="/auth/oidc/login",status="503"}`); got != n {
		t.Errorf("503s counted in the metrics: got %v, want %d", got, n)
	}
}
