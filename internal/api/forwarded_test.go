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
// it names in Forwarded or X-Real-IP, not only in X-Forwarded-For, is the one the per-address
// limit counts and the audit records; a request whose proxy names no client that can be read
// is counted in one bucket that all such requests share and recorded as "unknown", never as
// the proxy's address (which, on the server's machine, is loopback).
func TestClientAddr_TrustedProxyHeaders(t *testing.T) {
	db := pgtest.MustDatabase(t)
	srv := apitest.NewServer(t, db, func(o *api.Options) {
		o.LoginRatePerAddress, o.AddressRefusalPause = 3, 10*time.Millisecond
		o.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}
	})
	var names atomic.Int64 // a name each, so that the guessing limit per name never answers first
	signIn := func(h http.Header) apitest.Response {
		return login(t, srv, fmt.Sprintf("someone-%d", names.Add(1)), "a-wrong-password", h)
	}

	t.Run("AuditRecordsTheNamedClient", func(t *testing.T) {
		claim := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: apitest.OperatorToken,
			Header: http.Header{"Forwarded": {`for="[2001:db8::7]:4711";proto=https`}}})
		wantStatus(t, claim, http.StatusCreated)
		reset := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken,
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
		lines := logLines(t, srv, func(l logLine) bool { return l["event"] == "bootstrap.reset" })
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
			wantStatus(t, signIn(h), http.StatusUnauthorized)
		}
		wantAPIError(t, signIn(http.Header{"X-Forwarded-For": {"203.0.113.9:4711"}}), http.StatusTooManyRequests, "rate_limited")
		// The proxy's own requests (no forwarding header) have the proxy's bucket, still full.
		wantStatus(t, signIn(nil), http.StatusUnauthorized)
	})
}
