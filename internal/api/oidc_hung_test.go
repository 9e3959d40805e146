package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/stalltest"
	"github.com/terdut-server/terdut-server/internal/store"
)

// TestOIDC_ProviderHung: with --oidc-issuer at a provider that accepts and never answers, or
// answers a byte a second, the discovery the server starts at start-up stays stuck there.
// Meanwhile every probe, the login page, API keys, password sign-in and the operator's
// endpoints answer without waiting for it, single sign-on starts answer 503 with Retry-After
// within a bounded wait, and none of them starts a second discovery: the one request at the
// provider is still waiting when they have all been answered.
func TestOIDC_ProviderHung(t *testing.T) {
	for name, mode := range map[string]stalltest.Mode{"Silent": stalltest.Silent, "Trickle": stalltest.Trickle} {
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
			if open, n := hung.Open(), hung.Requests(); open != 1 || n != 1 {
				t.Errorf("at the hung provider: got %d requests, %d still waiting, want the discovery of the start still "+
					"waiting and no other: every answer above came without waiting for it", n, open)
			}
		})
	}
}
