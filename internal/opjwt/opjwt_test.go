package opjwt_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/test/harness/satest"
)

const (
	audience  = "terdut-server"
	namespace = "terdut-operator-system"
	account   = "terdut-operator"
	pod       = "terdut-operator-7d9f8-abcde"
)

var subject = satest.SubjectOf(namespace, account)

func mustVerifier(t *testing.T, is *satest.Issuer, mutate func(*opjwt.Config)) *opjwt.Verifier {
	t.Helper()
	cfg := opjwt.Config{Issuer: is.URL(), Audience: audience, Subjects: []string{"system:serviceaccount:other:x", subject}}
	if mutate != nil {
		mutate(&cfg)
	}
	v, err := opjwt.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func operatorClaims() satest.Claims { return satest.ServiceAccount(namespace, account, pod, audience) }

func TestVerify_Accepted(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v := mustVerifier(t, is, nil)
	for name, token := range map[string]string{
		"RS256": is.Sign(t, operatorClaims()),
		"ES256": is.SignES256(t, operatorClaims()),
	} {
		t.Run(name, func(t *testing.T) {
			id, err := v.Verify(t.Context(), token)
			want := opjwt.Identity{Subject: subject, Namespace: namespace, ServiceAccount: account, Pod: pod}
			if err != nil || id != want {
				t.Fatalf("got %+v, %v, want %+v", id, err, want)
			}
		})
	}
	t.Run("SkewWithinLeeway", func(t *testing.T) {
		c := operatorClaims()
		now := time.Now()
		c.IssuedAt, c.NotBefore, c.Expiry = now.Add(30*time.Second), now.Add(30*time.Second), now.Add(-30*time.Second+time.Hour)
		if _, err := v.Verify(t.Context(), is.Sign(t, c)); err != nil {
			t.Fatalf("nbf 30s ahead: got %v, want accepted", err)
		}
		c.IssuedAt, c.NotBefore, c.Expiry = now.Add(-2*time.Hour), now.Add(-2*time.Hour), now.Add(-30*time.Second)
		if _, err := v.Verify(t.Context(), is.Sign(t, c)); err != nil {
			t.Fatalf("exp 30s ago: got %v, want accepted", err)
		}
	})
	t.Run("NoPod", func(t *testing.T) {
		c := operatorClaims()
		c.Pod = ""
		if id, err := v.Verify(t.Context(), is.Sign(t, c)); err != nil || id.Pod != "" || id.Subject != subject {
			t.Fatalf("got %+v, %v, want the subject and no pod", id, err)
		}
	})
}

func TestVerify_Refused(t *testing.T) {
	is := satest.New(t, satest.Options{})
	other := satest.New(t, satest.Options{})
	// Each unknown key is refused after a read made for it: within MinRefresh of the last
	// read it would be ErrKeyNotYetRead (TestVerify_RotationAmidUnknownKeyFlood).
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = time.Nanosecond })
	now := time.Now().Truncate(time.Second)
	with := func(f func(*satest.Claims)) satest.Claims {
		c := operatorClaims()
		f(&c)
		return c
	}
	stranger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, kid := is.PublicKeyPEM(t)
	tests := []struct {
		name, reason string
		token        string
	}{
		{"WrongAudience", opjwt.ReasonAudience, is.Sign(t, with(func(c *satest.Claims) { c.Audience = []string{"https://kubernetes.default.svc"} }))},
		{"WrongSubject", opjwt.ReasonSubject, is.Sign(t, with(func(c *satest.Claims) { c.ServiceAccount = "default" }))},
		{"WrongIssuer", opjwt.ReasonIssuer, is.Sign(t, with(func(c *satest.Claims) { c.Issuer = "https://kubernetes.default.svc.cluster.local" }))},
		{"Expired", opjwt.ReasonExpired, is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now.Add(-2*time.Hour), now.Add(-2*time.Hour), now.Add(-61*time.Second)
		}))},
		{"NotYetValid", opjwt.ReasonNotYetValid, is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now, now.Add(2*time.Minute), now.Add(time.Hour)
		}))},
		{"IssuedInTheFuture", opjwt.ReasonNotYetValid, is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now.Add(2*time.Minute), time.Time{}, now.Add(time.Hour)
		}))},
		{"LifetimeOver24h", opjwt.ReasonLifetime, is.Sign(t, with(func(c *satest.Claims) {
			c.IssuedAt, c.NotBefore, c.Expiry = now.Add(-time.Hour), now.Add(-time.Hour), now.Add(23*time.Hour+time.Second)
		}))},
		{"NoIssuedAt", opjwt.ReasonLifetime, is.Sign(t, with(func(c *satest.Claims) { c.IssuedAt = time.Time{} }))},
		{"NoExpiry", opjwt.ReasonLifetime, is.Sign(t, with(func(c *satest.Claims) { c.Expiry = time.Time{} }))},
		{"UnknownKey", opjwt.ReasonUnknownKey, satest.SignWith(t, jose.RS256, stranger, "not-published", is.Payload(operatorClaims()))},
		{"KnownKidOtherKey", opjwt.ReasonSignature, satest.SignWith(t, jose.RS256, stranger, kid, is.Payload(operatorClaims()))},
		{"AlgNone", opjwt.ReasonAlgorithm, satest.Unsigned(t, kid, is.Payload(operatorClaims()))},
		{"HS256WithThePublicKey", opjwt.ReasonAlgorithm, satest.SignWith(t, jose.HS256, pub, kid, is.Payload(operatorClaims()))},
		{"SecondIssuer", opjwt.ReasonUnknownKey, other.Sign(t, operatorClaims())},
		{"SecondIssuerClaimingOurs", opjwt.ReasonUnknownKey, other.Sign(t, with(func(c *satest.Claims) { c.Issuer = is.URL() }))},
		{"Garbage", opjwt.ReasonMalformed, "a.b.c"},
		{"TooLong", opjwt.ReasonMalformed, strings.Repeat("a", 20<<10) + ".b.c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(t.Context(), tt.token)
			var refused *opjwt.RefusedError
			if !errors.As(err, &refused) || refused.Reason != tt.reason {
				t.Fatalf("got %+v, %v, want refused for %s", id, err, tt.reason)
			}
			if strings.Contains(err.Error(), tt.token) {
				t.Fatalf("the error %q holds the token", err)
			}
		})
	}
}

// TestVerify_Rotation: after the issuer replaces its signing key, a token with the new key
// is accepted (the JWKS is fetched again for the unknown kid) and one with the old is not.
func TestVerify_Rotation(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = time.Nanosecond })
	old := is.Sign(t, operatorClaims())
	if _, err := v.Verify(t.Context(), old); err != nil {
		t.Fatalf("before the rotation: %v", err)
	}
	is.RotateRSA(t)
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("a token of the new key: got %v, want accepted", err)
	}
	var refused *opjwt.RefusedError
	if _, err := v.Verify(t.Context(), old); !errors.As(err, &refused) || refused.Reason != opjwt.ReasonUnknownKey {
		t.Fatalf("a token of the retired key: got %v, want refused for unknown_key", err)
	}
}

// TestVerify_RefreshRateLimited: tokens naming unknown keys, many at once, cause at most one
// JWKS fetch per MinRefresh.
func TestVerify_RefreshRateLimited(t *testing.T) {
	is := satest.New(t, satest.Options{})
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = time.Hour })
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			token := satest.SignWith(t, jose.ES256, key, "unknown-"+string(rune('a'+i%26)), is.Payload(operatorClaims()))
			if _, err := v.Verify(t.Context(), token); !errors.Is(err, opjwt.ErrKeyNotYetRead) {
				t.Errorf("a token of an unknown key within MinRefresh: got %v, want ErrKeyNotYetRead", err)
			}
		})
	}
	wg.Wait()
	if got := is.JWKSFetches(); got != 1 {
		t.Fatalf("JWKS fetches: got %d, want 1 (the first token's; the unknown keys within MinRefresh fetch nothing)", got)
	}
	// A rotation within MinRefresh is seen only after it: the known key still works meanwhile.
	if _, err := v.Verify(t.Context(), is.SignES256(t, operatorClaims())); err != nil {
		t.Fatalf("a known key after the flood: got %v, want accepted", err)
	}
}

// TestVerify_AuthenticatedTLSIssuer: an issuer that serves its keys only over TLS with a CA
// of its own and only to a Bearer token (the API server's default) is read with the CA file
// and the server's own token, re-read from its file on every fetch.
func TestVerify_AuthenticatedTLSIssuer(t *testing.T) {
	is := satest.New(t, satest.Options{TLS: true, Bearer: "server-sa-token-1"})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(tokenFile, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("server-sa-token-1\n")
	caFile := is.CAFile(t, dir)
	hc, err := opjwt.NewHTTPClient(caFile)
	if err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, is, func(c *opjwt.Config) {
		c.CAFile, c.AuthTokenFile, c.MinRefresh = caFile, tokenFile, time.Nanosecond
	})
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("with the CA and the token: got %v, want accepted", err)
	}
	// The server's token rotates on disk; the issuer wants the new one.
	is.SetBearer("server-sa-token-2")
	write("server-sa-token-2")
	is.RotateRSA(t)
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("after the server's token rotated: got %v, want accepted", err)
	}

	t.Run("WithoutTheToken", func(t *testing.T) {
		v := mustVerifier(t, is, func(c *opjwt.Config) { c.CAFile, c.AuthTokenFile = caFile, filepath.Join(dir, "absent") })
		before := is.Unauthorized()
		if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); !errors.Is(err, opjwt.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable", err)
		}
		if is.Unauthorized() == before {
			t.Fatal("the issuer refused nothing: was a token sent from a file that does not exist?")
		}
	})
	t.Run("TokenNotSentWithoutCAFile", func(t *testing.T) {
		// A client that trusts the issuer, but not through CAFile: the token could reach
		// a server trusted through the system's roots, so it is not sent at all.
		v := mustVerifier(t, is, func(c *opjwt.Config) { c.HTTPClient, c.AuthTokenFile = hc, tokenFile })
		before := is.Unauthorized()
		if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); !errors.Is(err, opjwt.ErrUnavailable) || is.Unauthorized() == before {
			t.Fatalf("without a CA file: got %v (%d refused), want ErrUnavailable: no token is sent", err, is.Unauthorized()-before)
		}
	})
	t.Run("WithoutTheCA", func(t *testing.T) {
		v := mustVerifier(t, is, func(c *opjwt.Config) { c.AuthTokenFile = tokenFile })
		if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); !errors.Is(err, opjwt.ErrUnavailable) {
			t.Fatalf("got %v, want ErrUnavailable (the issuer's certificate is not trusted)", err)
		}
	})
	t.Run("TokenNotSentInClear", func(t *testing.T) {
		plain := satest.New(t, satest.Options{Bearer: "server-sa-token-2"})
		v := mustVerifier(t, plain, func(c *opjwt.Config) { c.AuthTokenFile = tokenFile })
		if _, err := v.Verify(t.Context(), plain.Sign(t, operatorClaims())); !errors.Is(err, opjwt.ErrUnavailable) || plain.Unauthorized() == 0 {
			t.Fatalf("an http:// issuer that wants a token: got %v (%d refused), want ErrUnavailable: the token goes only over https", err, plain.Unauthorized())
		}
	})
}

// TestVerify_KeysFromTheIssuersOrigin: the API server of a cluster names its advertise
// address as jwks_uri, another origin than an issuer such as
// https://kubernetes.default.svc.cluster.local, and serves the same keys at that path on
// every address. The keys are read at that path on the issuer's origin, with the server's own
// token; nothing goes to the origin discovery named, so a discovery document cannot move the
// key source or draw the token elsewhere. A JWKS URL set by hand is read as it is, without the
// token when it is on another origin.
func TestVerify_KeysFromTheIssuersOrigin(t *testing.T) {
	var is *satest.Issuer
	var mu sync.Mutex
	var sentThere []string
	elsewhere := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentThere = append(sentThere, r.Header.Get("Authorization"))
		mu.Unlock()
		is.JWKSHandler()(w, r)
	}))
	t.Cleanup(elsewhere.Close)
	is = satest.New(t, satest.Options{TLS: true, Bearer: "server-sa-token", JWKSURI: elsewhere.URL + "/openid/v1/jwks"})
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("server-sa-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.CAFile, c.AuthTokenFile = is.CAFile(t, dir), tokenFile })
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("got %v, want accepted with the keys of the issuer's origin", err)
	}
	if n := is.JWKSFetches(); n != 1 {
		t.Fatalf("JWKS fetches on the issuer's origin: got %d, want 1", n)
	}
	mu.Lock()
	if len(sentThere) != 0 {
		t.Fatalf("the jwks_uri on another origin was asked %d times, want never", len(sentThere))
	}
	mu.Unlock()

	t.Run("JWKSURLSetByHand", func(t *testing.T) {
		// The keys are served only elsewhere: the elsewhere server lends the issuer's handler,
		// which wants the token, so it answers only when no token is withheld from it.
		is.SetBearer("")
		v := mustVerifier(t, is, func(c *opjwt.Config) {
			c.CAFile, c.AuthTokenFile, c.JWKSURL = is.CAFile(t, dir), tokenFile, elsewhere.URL+"/openid/v1/jwks"
		})
		if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
			t.Fatalf("got %v, want accepted with the keys of the JWKS URL", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(sentThere) != 1 || sentThere[0] != "" {
			t.Fatalf("the JWKS URL on another origin received %q, want one request without Authorization", sentThere)
		}
	})
}

// TestVerify_KeysAskedAsTheAPIServerServesThem: the API server answers 406 to a request for
// application/json alone; the key set is application/jwk-set+json.
func TestVerify_KeysAskedAsTheAPIServerServesThem(t *testing.T) {
	var is *satest.Issuer
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.Header.Get("Accept"), "application/jwk-set+json") {
			http.Error(w, "not acceptable", http.StatusNotAcceptable)
			return
		}
		is.JWKSHandler()(w, r)
	}))
	t.Cleanup(jwks.Close)
	is = satest.New(t, satest.Options{})
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.JWKSURL = jwks.URL + "/openid/v1/jwks" })
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("got %v, want accepted", err)
	}
}

func TestNew_Errors(t *testing.T) {
	for name, cfg := range map[string]opjwt.Config{
		"NoIssuer":           {Audience: audience, Subjects: []string{subject}},
		"RelativeURL":        {Issuer: "kubernetes.default.svc", Audience: audience, Subjects: []string{subject}},
		"NoSubjects":         {Issuer: "https://k8s.example", Audience: audience},
		"NoAudience":         {Issuer: "https://k8s.example", Subjects: []string{subject}},
		"IssuerQueried":      {Issuer: "https://k8s.example/?x=1", Audience: audience, Subjects: []string{subject}},
		"HTTPOverTheNetwork": {Issuer: "http://kubernetes.default.svc.cluster.local", Audience: audience, Subjects: []string{subject}},
		"HTTPLookalikeHost":  {Issuer: "http://127.0.0.1.example", Audience: audience, Subjects: []string{subject}},
		"CAFileMissing":      {Issuer: "https://k8s.example", Audience: audience, Subjects: []string{subject}, CAFile: "/nonexistent/ca.crt"},
		"CAFileAndClient": {Issuer: "https://k8s.example", Audience: audience, Subjects: []string{subject},
			CAFile: "/nonexistent/ca.crt", HTTPClient: http.DefaultClient},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := opjwt.New(cfg); err == nil {
				t.Fatal("got nil error, want one")
			}
		})
	}
}

// TestCheckIssuer: plain http only on a loopback address, whose keys cannot be changed on the
// way by anyone on the network.
func TestCheckIssuer(t *testing.T) {
	for issuer, ok := range map[string]bool{
		"https://kubernetes.default.svc.cluster.local": true,
		"https://k8s.example/path":                     true,
		"http://127.0.0.1:6443":                        true,
		"http://localhost:6443":                        false, // a name, resolved by /etc/hosts or DNS
		"http://user:pw@127.0.0.1:6443":                false,
		"http://[::1]:6443":                            true,
		"http://kubernetes.default.svc":                false,
		"http://10.0.0.1":                              false,
		"http://localhost.example":                     false,
		"ftp://k8s.example":                            false,
		"https://k8s.example#frag":                     false,
	} {
		if err := opjwt.CheckIssuer(issuer); (err == nil) != ok {
			t.Errorf("CheckIssuer(%q): got %v, want accepted %v", issuer, err, ok)
		}
	}
}

// TestVerify_UnknownKeyWhileIssuerDown: after the issuer failed to answer, a token of a key the
// server does not hold is the issuer's outage (ErrUnavailable: the operator retries), not the
// token's fault (a refusal), until the next try.
func TestVerify_UnknownKeyWhileIssuerDown(t *testing.T) {
	is := satest.New(t, satest.Options{})
	const minRefresh = 2 * time.Second
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = minRefresh })
	clock := newTestClock()
	opjwt.SetKeyClock(v, clock.Now)
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatal(err)
	}
	is.SetBearer("the verifier does not have this") // discovery and JWKS now answer 401
	is.RotateRSA(t)
	clock.Advance(minRefresh)
	token := is.Sign(t, operatorClaims())
	for i := range 2 { // the first tries the issuer; the second comes within MinRefresh of it
		if _, err := v.Verify(t.Context(), token); !errors.Is(err, opjwt.ErrUnavailable) {
			t.Fatalf("try %d, the issuer down: got %v, want ErrUnavailable", i+1, err)
		}
		clock.Advance(minRefresh - time.Nanosecond)
	}
	if got := is.JWKSFetches(); got != 1 {
		t.Errorf("JWKS fetches answered: got %d, want 1 (the one before the issuer went down)", got)
	}
	is.SetBearer("")
	clock.Advance(time.Nanosecond)
	if _, err := v.Verify(t.Context(), token); err != nil {
		t.Fatalf("the issuer back: got %v, want accepted", err)
	}
}

// TestVerify_KeysOnlyOverASafePath: the keys are not read over plain http from a host that is
// not a loopback address, even when a loopback issuer's discovery document names one (they are
// read on the issuer's origin), nor through a redirect, which the default client does not
// follow.
func TestVerify_KeysOnlyOverASafePath(t *testing.T) {
	t.Run("PlainHTTPJWKSElsewhere", func(t *testing.T) {
		is := satest.New(t, satest.Options{JWKSURI: "http://192.0.2.1/openid/v1/jwks"}) // TEST-NET-1: nobody's
		v := mustVerifier(t, is, nil)
		if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil || is.JWKSFetches() != 1 {
			t.Fatalf("got %v after %d reads of the issuer's keys, want accepted with the keys of the issuer's own origin", err, is.JWKSFetches())
		}
		cfg := opjwt.Config{Issuer: is.URL(), Audience: audience, Subjects: []string{subject}, JWKSURL: "http://192.0.2.1/openid/v1/jwks"}
		if _, err := opjwt.New(cfg); err == nil || !strings.Contains(err.Error(), "https") {
			t.Fatalf("a plain http JWKS URL off loopback: got %v, want refused", err)
		}
	})

	t.Run("Redirect", func(t *testing.T) {
		is := satest.New(t, satest.Options{})
		var redirector *httptest.Server
		redirector = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/.well-known/openid-configuration" {
				_ = json.NewEncoder(w).Encode(map[string]string{"issuer": redirector.URL, "jwks_uri": redirector.URL + "/keys"})
				return
			}
			http.Redirect(w, r, is.URL()+"/openid/v1/jwks", http.StatusFound)
		}))
		t.Cleanup(redirector.Close)
		claims := operatorClaims()
		claims.Issuer = redirector.URL
		v, err := opjwt.New(opjwt.Config{Issuer: redirector.URL, Audience: audience, Subjects: []string{subject}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v.Verify(t.Context(), is.Sign(t, claims))
		if !errors.Is(err, opjwt.ErrUnavailable) || !strings.Contains(err.Error(), "redirect") {
			t.Fatalf("got %v, want ErrUnavailable saying the redirect is not followed", err)
		}
		if n := is.JWKSFetches(); n != 0 {
			t.Fatalf("the keys were read %d times through the redirect, want 0", n)
		}
	})
}

// TestVerify_CallerLeavingDoesNotFailTheFetch: a fetch of the keys is every request's until
// the next try, so the client whose token caused it hanging up must not turn it into an
// issuer's failure that refuses everyone else for MinRefresh.
func TestVerify_CallerLeavingDoesNotFailTheFetch(t *testing.T) {
	arrived, release := make(chan struct{}), make(chan struct{})
	var is *satest.Issuer
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		<-release
		is.JWKSHandler()(w, r)
	}))
	t.Cleanup(slow.Close)
	is = satest.New(t, satest.Options{})
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh, c.JWKSURL = time.Hour, slow.URL+"/keys" })
	token := is.Sign(t, operatorClaims())

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { _, err := v.Verify(ctx, token); done <- err }()
	<-arrived
	cancel() // the client hangs up while the keys are being read
	close(release)
	<-done
	if _, err := v.Verify(t.Context(), token); err != nil {
		t.Fatalf("the next request: got %v, want accepted with the keys the first one read", err)
	}
	if n := is.JWKSFetches(); n != 1 {
		t.Fatalf("JWKS fetches: got %d, want 1", n)
	}
}

// TestVerify_RotationAmidUnknownKeyFlood: a flood of tokens naming keys the issuer does not
// have, which fetches the keys at most once per MinRefresh, must not make the operator's
// first token after a real rotation read as a wrong token (401, which the operator takes as
// a long back-off): within MinRefresh of the last read, a key not held cannot be told from a
// key the issuer added since, so the answer is "unavailable, try again shortly" (503), and
// once the keys may be read again the token is accepted. A key absent from a read made for
// it is still refused. The key set reads the test's clock, so that how long the flood and
// the rotation take on a busy machine decides nothing.
func TestVerify_RotationAmidUnknownKeyFlood(t *testing.T) {
	is := satest.New(t, satest.Options{})
	const minRefresh = 10 * time.Second
	v := mustVerifier(t, is, func(c *opjwt.Config) { c.MinRefresh = minRefresh })
	clock := newTestClock()
	opjwt.SetKeyClock(v, clock.Now)
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	unknown := satest.SignWith(t, jose.ES256, stranger, "flood", is.Payload(operatorClaims()))
	var refused *opjwt.RefusedError
	if _, err := v.Verify(t.Context(), unknown); !errors.As(err, &refused) || refused.Reason != opjwt.ReasonUnknownKey {
		t.Fatalf("an unknown key, the keys read for it: got %v, want refused for unknown_key", err)
	}
	notYetRead := func(what string, err error) {
		t.Helper()
		if errors.As(err, &refused) || !errors.Is(err, opjwt.ErrUnavailable) || !errors.Is(err, opjwt.ErrKeyNotYetRead) {
			t.Fatalf("%s within MinRefresh of the last read: got %v, want ErrKeyNotYetRead (503, retry shortly), not a refusal (401)", what, err)
		}
	}
	for range 20 {
		clock.Advance(minRefresh / 40)
		_, err := v.Verify(t.Context(), unknown)
		notYetRead("an unknown key", err)
	}
	is.RotateRSA(t)
	clock.Advance(minRefresh/2 - time.Nanosecond) // the last instant before the keys may be read again
	_, err = v.Verify(t.Context(), is.Sign(t, operatorClaims()))
	notYetRead("the operator's token of the new key", err)
	if got := is.JWKSFetches(); got != 1 {
		t.Errorf("JWKS fetches: got %d, want 1 (the flood within MinRefresh fetches nothing)", got)
	}
	clock.Advance(time.Nanosecond)
	if _, err := v.Verify(t.Context(), is.Sign(t, operatorClaims())); err != nil {
		t.Fatalf("the operator's token of the new key at MinRefresh: got %v, want accepted", err)
	}
	if got := is.JWKSFetches(); got != 2 {
		t.Errorf("JWKS fetches: got %d, want 2 (one read for the new key)", got)
	}
}

// testClock is a clock that moves only when the test moves it.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Now()} }

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
