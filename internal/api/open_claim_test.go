package api_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
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
	t.Run("ErrLocalProxyNamesNoLoopbackClient", func(t *testing.T) {
		// A proxy on this machine, named by --trusted-proxies, that names its client in a way
		// other than a bare address in X-Forwarded-For: the client it names is read where it
		// is sent, and an entry that does not parse names no client, never the proxy. Each
		// of these took the claim (and the admin key) when the proxy's own address stood in.
		for name, h := range map[string]http.Header{
			"Forwarded":                  {"Forwarded": {"for=203.0.113.9"}},
			"ForwardedIPv6":              {"Forwarded": {`for="[2001:db8::1]:4711"`}},
			"ForwardedObfuscated":        {"Forwarded": {"for=_hidden"}},
			"ForwardedUnknown":           {"Forwarded": {"for=unknown"}},
			"ForwardedNoFor":             {"Forwarded": {"proto=https;by=127.0.0.1"}},
			"ForwardedMalformed":         {"Forwarded": {`for="127.0.0.1`}},
			"ForwardedClientsOwnEntry":   {"Forwarded": {"for=127.0.0.1, for=203.0.113.9"}},
			"XRealIP":                    {"X-Real-Ip": {"203.0.113.9"}},
			"XRealIPTwice":               {"X-Real-Ip": {"127.0.0.1", "203.0.113.9"}},
			"XForwardedForUnknown":       {"X-Forwarded-For": {"unknown"}},
			"XForwardedForWithPort":      {"X-Forwarded-For": {"203.0.113.9:4711"}},
			"XForwardedForEmpty":         {"X-Forwarded-For": {""}},
			"BothClientSaysLoopback":     {"X-Forwarded-For": {"127.0.0.1"}, "Forwarded": {"for=203.0.113.9"}},
			"BothClientSaysLoopbackToo":  {"Forwarded": {"for=127.0.0.1"}, "X-Forwarded-For": {"203.0.113.9"}},
			"RealIPLoopbackForwardedNot": {"X-Real-Ip": {"127.0.0.1"}, "X-Forwarded-For": {"127.0.0.1, 203.0.113.9"}},
		} {
			t.Run(name, func(t *testing.T) {
				srv := open(t, netip.MustParsePrefix("127.0.0.0/8"))
				status, body := rawOperatorCall(t, srv, "/api/bootstrap", "localhost", h, "")
				refused(t, srv, status, body)
			})
		}
	})
	t.Run("OKLocalClientBehindLocalProxy", func(t *testing.T) {
		// A client on this machine, through a proxy here that --trusted-proxies names, however
		// the proxy names it.
		for name, h := range map[string]http.Header{
			"XForwardedFor": {"X-Forwarded-For": {"127.0.0.1"}},
			"Forwarded":     {"Forwarded": {`for="[::1]:4711";proto=http`}},
			"XRealIP":       {"X-Real-Ip": {"127.0.0.1"}},
			"All":           {"X-Real-Ip": {"127.0.0.1"}, "X-Forwarded-For": {"127.0.0.1"}, "Forwarded": {"for=127.0.0.1"}},
		} {
			t.Run(name, func(t *testing.T) {
				srv := open(t, netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128"))
				if status, body := rawOperatorCall(t, srv, "/api/bootstrap", "localhost", h, ""); status != http.StatusCreated {
					t.Fatalf("got %d %s, want 201", status, body)
				}
			})
		}
	})
	t.Run("ErrForwardedByAnUntrustedLocalProxy", func(t *testing.T) {
		// A proxy on this machine that --trusted-proxies does not name (a mesh sidecar, a host's
		// nginx) forwards for a client elsewhere: it says so in a header a client that connects
		// directly never sends. (A proxy that sends none, such as kubectl port-forward, cannot
		// be told from a local client: docs/security.md says to configure an operator token.)
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
