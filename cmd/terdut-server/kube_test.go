//go:build kube

package main

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// The accounts of the chart's service-account identity (deploy/kubernetes/service-account-identity)
// and of the operator's snippet in docs/install.md.
const (
	serverNS, serverSA     = "terdut", "terdut-server"
	operatorNS, operatorSA = "terdut-operator-system", "terdut-operator"
	operatorSubject        = "system:serviceaccount:" + operatorNS + ":" + operatorSA
	operatorPod            = "terdut-operator-0"
)

// kubeCluster is a real API server holding what a cluster that runs terdut-server holds: its
// namespaces, terdut-server's account bound as the example manifest binds it, the operator's
// account, and a Pod object of each for their tokens to be bound to, as the kubelet binds them.
type kubeCluster struct {
	*kubetest.APIServer
	serverToken string // the file of terdut-server's own token, as projected into its pod
}

func startKube(t *testing.T, opts kubetest.Options) *kubeCluster {
	t.Helper()
	a := kubetest.Start(t, opts)
	for _, ns := range []string{serverNS, operatorNS, "elsewhere"} {
		a.CreateNamespace(ns)
	}
	example := filepath.Join("..", "..", "deploy", "kubernetes", "service-account-identity")
	// terdut-server's account and its two permissions, as the chart renders them; the
	// operator's account is terdut-operator's own install's, never the chart's.
	a.MustApplyFiles(filepath.Join(example, "terdut-server.yaml"))
	a.CreateServiceAccount(operatorNS, operatorSA)
	a.CreatePod(serverNS, "terdut-server-0", serverSA)
	a.CreatePod(operatorNS, operatorPod, operatorSA)
	k := &kubeCluster{APIServer: a, serverToken: filepath.Join(t.TempDir(), "token")}
	k.refreshServerToken(t)
	return k
}

// refreshServerToken writes a fresh token of terdut-server's account for the API server's
// audience, bound to its pod, as the kubelet rotates the projected file.
func (k *kubeCluster) refreshServerToken(t *testing.T) {
	t.Helper()
	tok := k.Token(serverNS, serverSA, kubetest.TokenRequest{Pod: "terdut-server-0"})
	if err := os.WriteFile(k.serverToken, []byte(tok), 0o600); err != nil {
		t.Fatal(err)
	}
}

// operatorToken is the operator's token as its projected volume asks for it (docs/install.md):
// the audience terdut-server, an hour, bound to its pod.
func (k *kubeCluster) operatorToken() string {
	return k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Seconds: 3600, Pod: operatorPod})
}

// settings are the four settings docs/kubernetes.md names, for a server in this cluster
// whose issuer is issuer, plus extra.
func (k *kubeCluster) settings(t *testing.T, issuer string, extra env) env {
	t.Helper()
	e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
		"TERDUT_OPERATOR_OIDC_ISSUER":            issuer,
		"TERDUT_OPERATOR_OIDC_CA_FILE":           k.CA.File,
		"TERDUT_OPERATOR_OIDC_ISSUER_TOKEN_FILE": k.serverToken,
		"TERDUT_OPERATOR_OIDC_SUBJECTS":          operatorSubject}
	for name, v := range extra {
		e[name] = v
	}
	return e
}

// mustClaimAndReset: the operator's token claims the install, resets it and claims it again.
func mustClaimAndReset(t *testing.T, srv *server, token string) {
	t.Helper()
	status, body := srv.do(t, http.MethodPost, "/api/bootstrap", token)
	mustStatus(t, "claim", status, body, http.StatusCreated, nil)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", token)
	mustStatus(t, "reset", status, body, http.StatusOK, nil)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap", token)
	mustStatus(t, "claim after the reset", status, body, http.StatusCreated, nil)
}

// TestKube_Layouts: with the four settings docs/kubernetes.md names and nothing more, the
// operator's real token claims and resets on each layout clusters really have.
func TestKube_Layouts(t *testing.T) {
	t.Parallel() // each test has an API server and a database of its own
	// kubeadm, kind and k3s: the issuer is a service name of the API server
	// (https://kubernetes.default.svc.cluster.local; here https://localhost:PORT), discovery
	// names the advertise address as jwks_uri (another origin), and neither answers anonymous
	// callers. Before this change every claim answered 503.
	t.Run("KubeadmDefault", func(t *testing.T) {
		k := startKube(t, kubetest.Options{})
		srv := startServe(t, k.settings(t, k.Issuer(), nil))
		mustClaimAndReset(t, srv, k.operatorToken())
		mustContain(t, "log", srv.Stderr.String(), "reading them at the same path on the issuer's own", k.URL+"/openid/v1/jwks")
		mustNotContain(t, "log", srv.Stderr.String(), "cannot read the operator identity issuer's keys")
	})

	// --service-account-jwks-uri on the issuer's own origin.
	t.Run("JWKSURIOnTheIssuersOrigin", func(t *testing.T) {
		k := startKube(t, kubetest.Options{})
		k.Restart(kubetest.Options{JWKSURI: k.LocalhostURL + "/openid/v1/jwks"})
		srv := startServe(t, k.settings(t, k.Issuer(), nil))
		mustClaimAndReset(t, srv, k.operatorToken())
		mustNotContain(t, "log", srv.Stderr.String(), "on another origin", "cannot read the operator identity issuer's keys")
	})

	// EKS, GKE and AKS: the issuer is a public https endpoint on another host, serving the API
	// server's discovery document and keys to anyone; the server sends it no token. (Its CA
	// stands in for the system's roots: --operator-oidc-ca-file is the one setting more here,
	// and on those clusters it is left unset.)
	t.Run("ExternalIssuer", func(t *testing.T) {
		k := startKube(t, kubetest.Options{})
		ext := startExternalIssuer(t, k)
		k.Restart(kubetest.Options{Issuers: []string{ext.URL}, JWKSURI: ext.URL + "/openid/v1/jwks"})
		ext.copyFrom(t, k)
		srv := startServe(t, k.settings(t, ext.URL, env{"TERDUT_OPERATOR_OIDC_CA_FILE": ext.CA.File,
			"TERDUT_OPERATOR_OIDC_ISSUER_TOKEN_FILE": filepath.Join(t.TempDir(), "no-token-mounted")}))
		mustClaimAndReset(t, srv, k.operatorToken())
		if ext.requests() == 0 || ext.authorized() != 0 {
			t.Fatalf("the external issuer: %d requests, %d with Authorization, want some and none", ext.requests(), ext.authorized())
		}
	})
}

// TestKube_KeyRotation: the API server's signing key is rotated under a running server: a
// token of the new key is accepted (the keys are read again for its unknown kid), a token of
// the old one too while the API server still publishes it, and once the old key is dropped
// its tokens are refused from the first read of the keys after that (503, retry, within 10 s
// of the read that dropped it).
func TestKube_KeyRotation(t *testing.T) {
	t.Parallel() // each test has an API server and a database of its own
	k := startKube(t, kubetest.Options{})
	srv := startServe(t, k.settings(t, k.Issuer(), nil))
	started := time.Now()
	old := k.operatorToken()
	status, body := srv.do(t, http.MethodPost, "/api/bootstrap", old)
	mustStatus(t, "claim with a token of the first key", status, body, http.StatusCreated, nil)

	next, err := kubetest.NewSigningKey(k.Dir, "sa-1")
	if err != nil {
		t.Fatal(err)
	}
	k.Restart(kubetest.Options{SigningKey: &next, Accepted: []kubetest.SigningKey{k.Key}})
	waitPastMinRefresh(started)
	fresh := k.operatorToken()
	if kid(t, fresh) == kid(t, old) {
		t.Fatal("the new token names the old key")
	}
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", fresh)
	mustStatus(t, "reset with a token of the new key", status, body, http.StatusOK, nil)
	reread := time.Now()
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap", old)
	mustStatus(t, "claim with a token of the old key, still published", status, body, http.StatusCreated, nil)

	k.Restart(kubetest.Options{SigningKey: &next})
	// The server's own token, signed with the dropped key, no longer opens discovery: in a
	// cluster the kubelet has long replaced it (a key is dropped only once every token it
	// signed has expired).
	k.refreshServerToken(t)
	// The server reads the keys again at most every 10 s for a token of a key it lacks, and
	// every hour whatever happens: a token of an unknown key after that makes it read them.
	waitPastMinRefresh(reread)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", forge(t, k, old, "no-such-key", 0))
	mustStatus(t, "a token of a key never published", status, body, http.StatusUnauthorized, nil)
	dropped := time.Now()
	// Within 10 s of that read, a key it did not hold may be one the issuer added since: the
	// operator is told to retry (503), not refused.
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", old)
	mustStatus(t, "reset with a token of the dropped key, right after the read", status, body, http.StatusServiceUnavailable, nil)
	waitPastMinRefresh(dropped)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", old)
	mustStatus(t, "reset with a token of the dropped key", status, body, http.StatusUnauthorized, nil)
	mustContain(t, "log", srv.Stderr.String(), `"reason":"unknown_key"`)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap/reset", fresh)
	mustStatus(t, "reset with a token of the new key", status, body, http.StatusOK, nil)
}

// waitPastMinRefresh waits until the server may read the issuer's keys again for a token of
// a key it does not hold (opjwt's MinRefresh, 10 s) since t.
func waitPastMinRefresh(t time.Time) {
	time.Sleep(time.Until(t.Add(10*time.Second + 500*time.Millisecond)))
}

// TestKube_MoveOfIssuers: a cluster moves to a new issuer as Kubernetes documents it: the API
// server is given the new issuer first and the old one second, so that it signs with the new
// one (and discovery names it) and still accepts tokens of the old. A server given both, old
// first, keeps accepting the operator's tokens of either throughout; given only the old one, it
// refuses the tokens of the new one.
func TestKube_MoveOfIssuers(t *testing.T) {
	t.Parallel() // each test has an API server and a database of its own
	k := startKube(t, kubetest.Options{})
	oldIssuer, newIssuer := k.Issuer(), "https://kubernetes.default.svc.cluster.local"
	both := startServe(t, k.settings(t, oldIssuer+","+newIssuer, nil))
	only := startServe(t, k.settings(t, oldIssuer, nil))
	oldToken := k.operatorToken()
	status, body := both.do(t, http.MethodPost, "/api/bootstrap", oldToken)
	mustStatus(t, "claim before the move", status, body, http.StatusCreated, nil)

	k.Restart(kubetest.Options{Issuers: []string{newIssuer, oldIssuer}})
	newToken := k.operatorToken()
	if iss := claimsOf(t, newToken)["iss"]; iss != newIssuer {
		t.Fatalf("a token after the move: iss %v, want %s", iss, newIssuer)
	}
	status, body = both.do(t, http.MethodPost, "/api/bootstrap/reset", newToken)
	mustStatus(t, "reset with a token of the new issuer", status, body, http.StatusOK, nil)
	status, body = both.do(t, http.MethodPost, "/api/bootstrap", oldToken)
	mustStatus(t, "claim with a token of the old issuer", status, body, http.StatusCreated, nil)

	status, body = only.do(t, http.MethodPost, "/api/bootstrap/reset", newToken)
	mustStatus(t, "a server given only the old issuer, a token of the new", status, body, http.StatusUnauthorized, nil)
	mustContain(t, "log", only.Stderr.String(), `"reason":"issuer"`)
}

// TestKube_Refused: real tokens that are not the operator's claim and reset nothing, each
// refused with 401 and its reason in the log and the metric.
func TestKube_Refused(t *testing.T) {
	t.Parallel() // each test has an API server and a database of its own
	k := startKube(t, kubetest.Options{})
	k.CreateServiceAccount(operatorNS, "intruder")
	k.CreatePod(operatorNS, "intruder-0", "intruder")
	k.CreateServiceAccount("elsewhere", operatorSA) // the operator's name in another namespace
	k.CreatePod("elsewhere", "lookalike-0", operatorSA)
	srv := startServe(t, k.settings(t, k.Issuer(), nil), "--metrics-listen", "127.0.0.1:0")
	metricsURL := listenURL(srv.Stderr.String(), "terdut-server listening for metrics")
	serverOwn, err := os.ReadFile(k.serverToken)
	if err != nil {
		t.Fatal(err)
	}
	operator := k.operatorToken()
	tests := []struct{ name, token, reason string }{
		{"AnotherAccount", k.Token(operatorNS, "intruder", kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "intruder-0"}), "subject"},
		{"AnotherAudience", k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Audiences: []string{"vault"}, Pod: operatorPod}), "audience"},
		{"TheAPIServersAudience", k.Token(operatorNS, operatorSA, kubetest.TokenRequest{Pod: operatorPod}), "audience"},
		{"TheServersOwnToken", string(serverOwn), "audience"},
		{"SameNameAnotherNamespace", k.Token("elsewhere", operatorSA, kubetest.TokenRequest{Audiences: []string{"terdut-server"}, Pod: "lookalike-0"}), "subject"},
		// The TokenRequest API mints nothing shorter than 10 minutes: the operator's real token
		// with its times moved an hour back, signed again with the API server's key and kid.
		{"Expired", forge(t, k, operator, "", -time.Hour-2*time.Minute), "expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, path := range []string{"/api/bootstrap", "/api/bootstrap/reset"} {
				status, body := srv.do(t, http.MethodPost, path, tt.token)
				mustStatus(t, "POST "+path, status, body, http.StatusUnauthorized, nil)
			}
			mustContain(t, "log", srv.Stderr.String(), `"reason":"`+tt.reason+`"`)
			status, metrics := srv.doAt(t, metricsURL, http.MethodGet, "/metrics", "")
			mustStatus(t, "GET /metrics", status, metrics, http.StatusOK, nil)
			mustContain(t, "metrics", metrics, `terdut_operator_identity_refusals_total{reason="`+tt.reason+`"}`)
			mustNotContain(t, "log", srv.Stderr.String(), tt.token)
		})
	}
	status, body := srv.get(t, "/api/bootstrap/status", "")
	mustStatus(t, "status", status, body, http.StatusOK, nil)
	mustContain(t, "status", body, `"state":"pending"`)
	status, body = srv.do(t, http.MethodPost, "/api/bootstrap", operator)
	mustStatus(t, "the operator's own token, after all that", status, body, http.StatusCreated, nil)
}

// kid is the key id a token's header names.
func kid(t *testing.T, token string) string {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Headers[0].KeyID
}

// claimsOf returns a token's claims, unverified.
func claimsOf(t *testing.T, token string) map[string]any {
	t.Helper()
	tok, err := jwt.ParseSigned(token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := tok.UnsafeClaimsWithoutVerification(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

// forge re-signs a real token's claims with the API server's signing key: its times moved
// by shift, and under kid when kid is set (else the real token's).
func forge(t *testing.T, k *kubeCluster, token, keyID string, shift time.Duration) string {
	t.Helper()
	c := claimsOf(t, token)
	for _, name := range []string{"iat", "nbf", "exp"} {
		if v, ok := c[name].(float64); ok {
			c[name] = int64(v) + int64(shift/time.Second)
		}
	}
	if keyID == "" {
		keyID = kid(t, token)
	}
	b, err := os.ReadFile(k.Options().SigningKey.PrivateFile)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	key, err := x509.ParsePKCS1PrivateKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithHeader("kid", keyID).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := jwt.Signed(signer).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return out
}
