package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestClientAddr_TrustedProxyHeaders: behind a proxy that --trusted-proxies names, the client
// it names in the header --trusted-proxy-header says it writes (Forwarded or X-Real-IP, not
// only X-Forwarded-For) is the one the per-address limit counts and the audit records; a
// request whose proxy names no client that can be read is counted in one bucket that all such
// requests share and recorded as "unknown", never as the proxy's address (which, on the
// server's machine, is loopback).
func TestClientAddr_TrustedProxyHeaders(t *testing.T) {
	db := pgtest.MustDatabase(t)
	servers := map[string]*apitest.Server{}
	for _, header := range []string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"} {
		servers[header] = apitest.NewServer(t, db, func(o *api.Options) {
			o.LoginRatePerAddress, o.AddressRefusalPause = 3, 10*time.Millisecond
			o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			o.ForwardedHeader = header
		})
	}
	srv := servers["Forwarded"]
	var names atomic.Int64 // a name each, so that the guessing limit per name never answers first
	signIn := func(h http.Header) apitest.Response {
		// Each header through the server whose proxies write it.
		for name := range h {
			return login(t, servers[name], fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", h)
		}
		return login(t, srv, fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", h)
	}

	t.Run("AuditRecordsTheNamedClient", func(t *testing.T) {
		claim := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken,
			Header: http.Header{"Forwarded": {`for="[2001:db8::7]:4711";proto=https`}}})
		wantStatus(t, claim, http.StatusCreated)
		reset := servers["X-Forwarded-For"].MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken,
			Header: http.Header{"X-Forwarded-For": {"unknown"}}})
		wantStatus(t, reset, http.StatusOK)
		audit, err := srv.Store.BootstrapAudit(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range audit {
			if e.Actor == store.ActorOperator {
				got = append(got, e.Action+" "+e.RemoteAddr)
			}
		}
		if fmt.Sprint(got) != "[claim 2001:db8::7 reset unknown]" {
			t.Errorf("operator audit rows: got %q, want [claim 2001:db8::7 reset unknown]", got)
		}
		lines := logLines(t, servers["X-Forwarded-For"], func(l logLine) bool { return l["event"] == "bootstrap.reset" })
		if len(lines) != 1 || lines[0]["remote_addr"] != "unknown" {
			t.Errorf("bootstrap.reset log lines: got %v, want one with remote_addr unknown", lines)
		}
		srv.MustClaim(t) // so that people may sign in
	})
	t.Run("LimitCountsTheNamedClient", func(t *testing.T) {
		for range 3 {
			wantStatus(t, signIn(http.Header{"Forwarded": {`for="[2001:db8:7::1]:4711"`}}), http.StatusUnauthorized)
		}
		wantAPIError(t, signIn(http.Header{"Forwarded": {"for=198.51.100.1, for=\"[2001:db8:7::2]\""}}), http.StatusTooManyRequests, "rate_limited")
		for range 3 {
			wantStatus(t, signIn(http.Header{"X-Real-Ip": {"198.51.100.8"}}), http.StatusUnauthorized)
		}
		wantAPIError(t, signIn(http.Header{"X-Real-Ip": {"198.51.100.8"}}), http.StatusTooManyRequests, "rate_limited")
		wantStatus(t, signIn(http.Header{"X-Real-Ip": {"198.51.100.9"}}), http.StatusUnauthorized)
	})
	t.Run("NamelessShareABucketNotTheProxys", func(t *testing.T) {
		for _, h := range []http.Header{{"X-Forwarded-For": {"unknown"}}, {"Forwarded": {"for=_hidden"}}, {"X-Real-Ip": {"203.0.113.9:4711"}}} {
			for range 3 {
				wantStatus(t, signIn(h), http.StatusUnauthorized)
			}
			again := http.Header{"X-Forwarded-For": {"203.0.113.9:4711"}, "Forwarded": {"for=unknown"}, "X-Real-Ip": {"unknown"}}
			for name := range h {
				wantAPIError(t, signIn(http.Header{name: again[name]}), http.StatusTooManyRequests, "rate_limited")
				// The proxy's own requests (no forwarding header) have the proxy's bucket, still full.
				wantStatus(t, login(t, servers[name], fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", nil), http.StatusUnauthorized)
			}
		}
	})
}

// TestClientAddr_OnlyTheProxysHeader: a proxy passes on, untouched, the forwarding headers it
// does not write itself, so a client behind it could name any address in one of those. Only
// the header Options.ForwardedHeader names (--trusted-proxy-header) is read: a client that
// sends another, with an address of its choice each time, is still counted as the client the
// proxy names, or, when the proxy writes none, as the proxy.
func TestClientAddr_OnlyTheProxysHeader(t *testing.T) {
	db := pgtest.MustDatabase(t)
	newServer := func(header string) *apitest.Server {
		srv := apitest.NewServer(t, db, func(o *api.Options) {
			o.LoginRatePerAddress, o.AddressRefusalPause = 3, 10*time.Millisecond
			o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
			o.ForwardedHeader = header
		})
		return srv
	}
	first := newServer("X-Real-Ip")
	first.MustClaim(t)
	var names, addrs atomic.Int64
	chosen := func() string { return fmt.Sprintf("198.51.100.%d", 10+addrs.Add(1)) } // a new address each time
	for _, tc := range []struct {
		name, header string
		proxy        func(h http.Header) // what the proxy writes, besides the client's own headers
		client       func() http.Header  // what the client sends through it
	}{
		{"XRealIPProxyClientSendsXForwardedFor", "X-Real-Ip",
			func(h http.Header) { h.Set("X-Real-Ip", "203.0.113.20") },
			func() http.Header { return http.Header{"X-Forwarded-For": {chosen()}} }},
		{"ForwardedProxyClientSendsXForwardedFor", "Forwarded",
			func(h http.Header) { h.Set("Forwarded", "for=203.0.113.21;proto=https") },
			func() http.Header { return http.Header{"X-Forwarded-For": {chosen()}, "X-Real-Ip": {chosen()}} }},
		{"XForwardedForProxyClientSendsTheOthers", "",
			func(h http.Header) { h.Set("X-Forwarded-For", "203.0.113.22") },
			func() http.Header { return http.Header{"Forwarded": {"for=" + chosen()}, "X-Real-Ip": {chosen()}} }},
		{"DefaultNoProxyHeaderClientSendsTheOthers", "", // the proxy's own bucket
			func(http.Header) {},
			func() http.Header { return http.Header{"Forwarded": {"for=" + chosen()}, "X-Real-Ip": {chosen()}} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := first
			if tc.header != "X-Real-Ip" {
				srv = newServer(tc.header)
			}
			signIn := func() apitest.Response {
				h := tc.client()
				tc.proxy(h)
				return login(t, srv, fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", h)
			}
			for range 3 {
				wantStatus(t, signIn(), http.StatusUnauthorized)
			}
			wantAPIError(t, signIn(), http.StatusTooManyRequests, "rate_limited")
		})
	}
}
