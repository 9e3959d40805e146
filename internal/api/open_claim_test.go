package api_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
)

// TestBootstrap_OpenClaimPeer: with no operator authentication configured, the open claim is
// taken only by a client on this machine, judged by its address (the peer's, through
// --trusted-proxies), not by the Host header, which any client on the network writes as it
// likes: a server listening on every interface gave its admin key to whoever sent
// "Host: localhost" first.
func TestBootstrap_OpenClaimPeer(t *testing.T) {
	open := func(t *testing.T, proxies ...netip.Prefix) *apitest.Server {
		return apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens, o.TrustedProxies = nil, proxies })
	}
	refused := func(t *testing.T, srv *apitest.Server, status int, body string) {
		t.Helper()
		if status != http.StatusForbidden || !strings.Contains(body, `"code":"client_not_local"`) {
			t.Errorf("got %d %s, want 403 client_not_local", status, body)
		}
		if st := mustStatus(t, srv); st.State != "pending" {
			t.Errorf("claim state: got %+v, want pending", st)
		}
	}

	t.Run("ErrPeerOffMachine", func(t *testing.T) {
		// The request reaches the handler as one from another host would: no packet leaves
		// this machine, the peer's address is what the listener would have set.
		srv := open(t)
		for _, host := range []string{"localhost", "127.0.0.1:8080", "[::1]"} {
			req := httptest.NewRequest(http.MethodPost, "/api/bootstrap", nil)
			req.RemoteAddr, req.Host = "203.0.113.9:40000", host
			rec := httptest.NewRecorder()
			srv.HTTP.Config.Handler.ServeHTTP(rec, req)
			refused(t, srv, rec.Code, rec.Body.String())
		}
	})
	t.Run("ErrClientBehindLocalProxy", func(t *testing.T) {
		// A reverse proxy on this machine, named by --trusted-proxies, for a client elsewhere.
		srv := open(t, netip.MustParsePrefix("127.0.0.0/8"))
		status, body := rawOperatorCall(t, srv, "/api/bootstrap", "localhost", http.Header{"X-Forwarded-For": {"203.0.113.9"}}, "")
		refused(t, srv, status, body)
	})
	t.Run("ErrForwardedByAnUntrustedLocalProxy", func(t *testing.T) {
		// A proxy on this machine that --trusted-proxies does not name (a mesh sidecar, kubectl
		// port-forward, a host's nginx) forwards for a client elsewhere: it says so in a header
		// a client that connects directly never sends.
		srv := open(t)
		for name, v := range map[string]string{"X-Forwarded-For": "203.0.113.9", "Forwarded": "for=203.0.113.9", "X-Real-Ip": "203.0.113.9"} {
			status, body := rawOperatorCall(t, srv, "/api/bootstrap", "localhost", http.Header{name: {v}}, "")
			refused(t, srv, status, body)
		}
	})
	t.Run("OKLoopbackPeer", func(t *testing.T) {
		srv := open(t)
		if status, body := rawOperatorCall(t, srv, "/api/bootstrap", "localhost", nil, ""); status != http.StatusCreated {
			t.Fatalf("got %d %s, want 201", status, body)
		}
	})
}
