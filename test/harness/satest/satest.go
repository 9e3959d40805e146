// Package satest runs an in-process service-account token issuer for tests: what the
// Kubernetes API server serves to verify its projected service-account tokens (the OpenID
// discovery document and the JWKS at /openid/v1/jwks, optionally behind Bearer
// authentication and TLS with a CA of its own), and tokens shaped like Kubernetes' signed
// with its keys, RS256 or ES256.
package satest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Options configures an Issuer.
type Options struct {
	TLS    bool   // serve https with a certificate of the issuer's own CA (see CAFile)
	Bearer string // when set, discovery and JWKS answer 401 unless sent this Bearer token
	// JWKSURI, when set, is the jwks_uri the discovery document names instead of the
	// issuer's own (serve the keys there with JWKSHandler).
	JWKSURI string
}

// Issuer is a running service-account token issuer. Its methods are safe for concurrent use.
type Issuer struct {
	srv  *httptest.Server
	opts Options

	mu     sync.Mutex
	rsa    *rsa.PrivateKey
	rsaKID string
	ec     *ecdsa.PrivateKey
	ecKID  string
	bearer string

	jwksFetches  atomic.Int64
	unauthorized atomic.Int64
}

// New starts an issuer with one RSA and one P-256 signing key; it stops when the test ends.
func New(tb testing.TB, opts Options) *Issuer {
	tb.Helper()
	is := &Issuer{opts: opts, bearer: opts.Bearer}
	is.rsa, is.rsaKID = mustRSA(tb), "rsa-"+rand.Text()[:8]
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	is.ec, is.ecKID = ec, "ec-"+rand.Text()[:8]
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", is.authorized(is.handleDiscovery))
	mux.HandleFunc("GET /openid/v1/jwks", is.authorized(is.handleJWKS))
	is.srv = httptest.NewUnstartedServer(mux)
	if opts.TLS {
		is.srv.StartTLS()
	} else {
		is.srv.Start()
	}
	tb.Cleanup(is.srv.Close)
	return is
}

func mustRSA(tb testing.TB) *rsa.PrivateKey {
	tb.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// URL is the issuer: the iss of its tokens and the base of its discovery document.
func (is *Issuer) URL() string { return is.srv.URL }

// CAFile writes the PEM certificate of the CA that the issuer's TLS certificate chains to
// into a file in dir and returns its path (the issuer must have been started with TLS).
func (is *Issuer) CAFile(tb testing.TB, dir string) string {
	tb.Helper()
	path := filepath.Join(dir, "issuer-ca.crt")
	b := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: is.srv.Certificate().Raw})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// SetBearer changes the Bearer token discovery and JWKS require ("" for none).
func (is *Issuer) SetBearer(token string) {
	is.mu.Lock()
	defer is.mu.Unlock()
	is.bearer = token
}

// JWKSFetches counts the JWKS requests answered with keys.
func (is *Issuer) JWKSFetches() int64 { return is.jwksFetches.Load() }

// Unauthorized counts the requests refused for a missing or wrong Bearer token.
func (is *Issuer) Unauthorized() int64 { return is.unauthorized.Load() }

// RotateRSA replaces the RSA signing key with a new one, under a new kid, and stops
// publishing the old one.
func (is *Issuer) RotateRSA(tb testing.TB) {
	tb.Helper()
	k := mustRSA(tb)
	is.mu.Lock()
	defer is.mu.Unlock()
	is.rsa, is.rsaKID = k, "rsa-"+rand.Text()[:8]
}

func (is *Issuer) authorized(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		is.mu.Lock()
		want := is.bearer
		is.mu.Unlock()
		if want != "" && r.Header.Get("Authorization") != "Bearer "+want {
			is.unauthorized.Add(1)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	}
}

func (is *Issuer) handleDiscovery(w http.ResponseWriter, _ *http.Request) {
	jwksURI := is.URL() + "/openid/v1/jwks"
	if is.opts.JWKSURI != "" {
		jwksURI = is.opts.JWKSURI
	}
	writeJSON(w, map[string]any{
		"issuer":                                is.URL(),
		"jwks_uri":                              jwksURI,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256", "ES256"},
	})
}

// JWKSHandler serves the issuer's keys, without asking for a Bearer token, for a server
// that Options.JWKSURI names.
func (is *Issuer) JWKSHandler() http.HandlerFunc { return is.handleJWKS }

func (is *Issuer) handleJWKS(w http.ResponseWriter, _ *http.Request) {
	is.jwksFetches.Add(1)
	is.mu.Lock()
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{
		{Key: &is.rsa.PublicKey, KeyID: is.rsaKID, Algorithm: string(jose.RS256), Use: "sig"},
		{Key: &is.ec.PublicKey, KeyID: is.ecKID, Algorithm: string(jose.ES256), Use: "sig"},
	}}
	is.mu.Unlock()
	writeJSON(w, set)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// Claims are the claims of a Kubernetes projected service-account token.
type Claims struct {
	Issuer         string // "": the issuer's URL
	Subject        string // "": system:serviceaccount:<Namespace>:<ServiceAccount>
	Audience       []string
	IssuedAt       time.Time
	NotBefore      time.Time
	Expiry         time.Time
	Namespace      string
	ServiceAccount string
	Pod            string // "": a token not bound to a pod
}

// ServiceAccount returns the claims of a token the API server would mint for the service
// account namespace/name in pod, for audience, valid for an hour from now.
func ServiceAccount(namespace, name, pod, audience string) Claims {
	now := time.Now().Truncate(time.Second)
	return Claims{Audience: []string{audience}, IssuedAt: now, NotBefore: now, Expiry: now.Add(time.Hour),
		Namespace: namespace, ServiceAccount: name, Pod: pod}
}

// SubjectOf returns the sub of a service account's tokens.
func SubjectOf(namespace, name string) string {
	return "system:serviceaccount:" + namespace + ":" + name
}

func (is *Issuer) payload(c Claims) map[string]any {
	if c.Issuer == "" {
		c.Issuer = is.URL()
	}
	if c.Subject == "" {
		c.Subject = SubjectOf(c.Namespace, c.ServiceAccount)
	}
	k8s := map[string]any{"namespace": c.Namespace,
		"serviceaccount": map[string]string{"name": c.ServiceAccount, "uid": "00000000-0000-4000-8000-000000000001"}}
	if c.Pod != "" {
		k8s["pod"] = map[string]string{"name": c.Pod, "uid": "00000000-0000-4000-8000-000000000002"}
	}
	p := map[string]any{"iss": c.Issuer, "sub": c.Subject, "aud": c.Audience, "kubernetes.io": k8s}
	for name, at := range map[string]time.Time{"iat": c.IssuedAt, "nbf": c.NotBefore, "exp": c.Expiry} {
		if !at.IsZero() {
			p[name] = at.Unix()
		}
	}
	return p
}

// Sign returns the token of c signed with the issuer's RSA key (RS256).
func (is *Issuer) Sign(tb testing.TB, c Claims) string {
	tb.Helper()
	is.mu.Lock()
	key, kid := is.rsa, is.rsaKID
	is.mu.Unlock()
	return SignWith(tb, jose.RS256, key, kid, is.payload(c))
}

// SignES256 returns the token of c signed with the issuer's P-256 key (ES256).
func (is *Issuer) SignES256(tb testing.TB, c Claims) string {
	tb.Helper()
	is.mu.Lock()
	key, kid := is.ec, is.ecKID
	is.mu.Unlock()
	return SignWith(tb, jose.ES256, key, kid, is.payload(c))
}

// Payload returns the claims of c as the issuer would put them in a token, for tests that
// sign them some other way (SignWith, Unsigned).
func (is *Issuer) Payload(c Claims) map[string]any { return is.payload(c) }

// PublicKeyPEM returns the PEM of the issuer's RSA public key, as an attacker can read it
// from the JWKS, for forging an HS256 token keyed with it.
func (is *Issuer) PublicKeyPEM(tb testing.TB) ([]byte, string) {
	tb.Helper()
	is.mu.Lock()
	defer is.mu.Unlock()
	der, err := x509.MarshalPKIXPublicKey(&is.rsa.PublicKey)
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), is.rsaKID
}
