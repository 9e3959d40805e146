package opjwt_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/test/harness/satest"
	"github.com/terdut-server/terdut-server/test/harness/stalltest"
)

// TestVerify_KnownKeyWhileRefreshHangs: a token naming a key nobody published makes the
// verifier read the JWKS again; while that read hangs at an issuer that accepts and never
// answers (or answers a byte a second), tokens of the keys already held verify at once, the
// unknown key's request gives up with ErrUnavailable long before the read's own deadline,
// and more unknown keys start no second read.
func TestVerify_KnownKeyWhileRefreshHangs(t *testing.T) {
	for name, mode := range stalltest.Modes {
		t.Run(name, func(t *testing.T) {
			stall := stalltest.New(t, mode)
			var served atomic.Int64
			var is *satest.Issuer
			jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if served.Add(1) == 1 {
					is.JWKSHandler()(w, r)
					return
				}
				stall.Handler().ServeHTTP(w, r)
			}))
			t.Cleanup(jwks.Close)
			is = satest.New(t, satest.Options{})
			v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh, c.JWKSURL = time.Nanosecond, jwks.URL+"/keys" })
			known := is.Sign(t, operatorClaims())
			if _, err := v.Verify(t.Context(), known); err != nil {
				t.Fatalf("before the issuer hangs: %v", err)
			}

			stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			unknown := func(kid string) string {
				return satest.SignWith(t, jose.ES256, stranger, kid, is.Payload(operatorClaims()))
			}
			first := make(chan error, 1)
			go func() { _, err := v.Verify(t.Context(), unknown("rotated-1")); first <- err }()
			stall.MustWaitRequest(t, 10*time.Second) // the read of the JWKS is now stuck

			var wg sync.WaitGroup
			errs := make(chan error, 40)
			for i := range 40 {
				wg.Go(func() {
					token := known
					if i%4 == 0 {
						token = unknown("rotated-2")
					}
					_, err := v.Verify(t.Context(), token)
					if token == known && err != nil {
						errs <- err
					}
				})
			}
			all := make(chan struct{})
			go func() { wg.Wait(); close(all) }()
			select {
			case <-all:
			case <-time.After(8 * time.Second): // the read's own deadline is 10s
				t.Fatal("verifications still waiting after 8s: they wait for the hung read of the JWKS")
			}
			close(errs)
			for err := range errs {
				t.Errorf("a token of a key held, during the hung read: got %v, want accepted", err)
			}
			select {
			case err := <-first:
				if !errors.Is(err, opjwt.ErrUnavailable) {
					t.Errorf("the unknown key's own request: got %v, want ErrUnavailable", err)
				}
			case <-time.After(8 * time.Second):
				t.Error("the unknown key's request still waiting after 8s, want ErrUnavailable within a few seconds")
			}
			if open, n := stall.Open(), stall.Requests(); open != 1 || n != 1 {
				t.Errorf("at the hung issuer: got %d requests, %d still waiting, want the one read of the JWKS still waiting: "+
					"the answers above came without waiting for it, and started no second read", n, open)
			}
		})
	}
}

// TestVerify_RefusalQuotesBounded: a refusal's detail, and the error of a key not yet read,
// which the server logs, quote a caller's long kid or subject only in part.
func TestVerify_RefusalQuotesBounded(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = time.Hour })
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	longKID := strings.Repeat("k", 11<<10) // about the most a 16 KiB token holds
	c := operatorClaims()
	c.ServiceAccount = strings.Repeat("s", 5<<10) // it is in the token twice
	for _, tt := range []struct{ name, token string }{
		{"UnknownKeyFetched", satest.SignWith(t, jose.ES256, stranger, longKID, is.Payload(operatorClaims()))},
		{"UnknownKeyCached", satest.SignWith(t, jose.ES256, stranger, longKID+"x", is.Payload(operatorClaims()))},
		{"Subject", is.Sign(t, c)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := v.Verify(t.Context(), tt.token)
			var refused *opjwt.RefusedError
			detail := ""
			switch {
			case errors.As(err, &refused):
				detail = refused.Detail
			case tt.name == "UnknownKeyCached" && errors.Is(err, opjwt.ErrKeyNotYetRead):
				detail = err.Error()
			default:
				t.Fatalf("got %v, want refused (or, for a key within MinRefresh, ErrKeyNotYetRead)", err)
			}
			if len(detail) > 512 || !strings.Contains(detail, "bytes)") {
				t.Errorf("detail: got %d bytes (%.80q…), want at most 512 with the cut marked", len(detail), detail)
			}
		})
	}
}
