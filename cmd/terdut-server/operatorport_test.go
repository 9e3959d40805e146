package main

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	opclient "github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/certtest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// mustNotFound checks that an answer is the router's JSON 404 for a path it does not serve.
func mustNotFound(t *testing.T, what string, status int, body string) {
	t.Helper()
	var e struct{ Error, Code string }
	if status != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Code != "not_found" || e.Error == "" {
		t.Errorf("%s: got %d %s, want 404 {\"error\": ..., \"code\": \"not_found\"}", what, status, body)
	}
}

// TestServe_OperatorPort: with --operator-listen, the claim, its status and the reset are
// served on that port alone and answer 404 on --listen, people's endpoints (probes and
// metrics too) answer 404 on the operator's port, the claim command printed at start names
// the operator's port, and SIGTERM stops both ports.
func TestServe_OperatorPort(t *testing.T) {
	const token = "operator-token-of-the-port-test-0123456789"
	e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
		"TERDUT_OPERATOR_TOKEN_FILE": mustFile(t, "operator-token", token+"\n")}
	srv := startServe(t, e, "--operator-listen", "127.0.0.1:0", "--public-url", "http://terdut.test:8080")
	if srv.OperatorURL == "" {
		t.Fatalf("no \"listening for the operator\" line; stderr:\n%s", srv.Stderr)
	}
	mustContain(t, "stdout", srv.Stdout.String(), "curl -H @- -X POST "+srv.OperatorURL+"/api/bootstrap\n")

	operatorPaths := []struct{ method, path string }{
		{http.MethodGet, "/api/bootstrap/status"}, {http.MethodPost, "/api/bootstrap"}, {http.MethodPost, "/api/bootstrap/reset"}}
	for _, p := range operatorPaths {
		status, body := srv.doAt(t, srv.URL, p.method, p.path, token)
		mustNotFound(t, p.method+" "+p.path+" on people's port", status, body)
	}

	var st struct{ State string }
	status, body := srv.doAt(t, srv.OperatorURL, http.MethodGet, "/api/bootstrap/status", "")
	mustStatus(t, "status on the operator's port", status, body, http.StatusOK, &st)
	if st.State != "pending" {
		t.Errorf("status: got %q, want pending", st.State)
	}
	status, body = srv.doAt(t, srv.OperatorURL, http.MethodPost, "/api/bootstrap", "")
	mustStatus(t, "claim without the token on the operator's port", status, body, http.StatusUnauthorized, nil)
	var claim struct {
		APIKey struct{ Key string } `json:"api_key"`
	}
	status, body = srv.doAt(t, srv.OperatorURL, http.MethodPost, "/api/bootstrap", token)
	mustStatus(t, "claim on the operator's port", status, body, http.StatusCreated, &claim)
	status, body = srv.get(t, "/api/me", claim.APIKey.Key)
	mustStatus(t, "GET /api/me on people's port with the claimed key", status, body, http.StatusOK, nil)

	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/", "/login", "/api/me", "/api/users", "/auth/oidc/login"} {
		status, body := srv.doAt(t, srv.OperatorURL, http.MethodGet, path, claim.APIKey.Key)
		mustNotFound(t, "GET "+path+" on the operator's port", status, body)
	}
	status, body = srv.doAt(t, srv.OperatorURL, http.MethodPost, "/api/auth/login", "")
	mustNotFound(t, "POST /api/auth/login on the operator's port", status, body)

	var reset struct {
		State          string
		RevokedAPIKeys int `json:"revoked_api_keys"`
	}
	status, body = srv.doAt(t, srv.OperatorURL, http.MethodPost, "/api/bootstrap/reset", token)
	mustStatus(t, "reset on the operator's port", status, body, http.StatusOK, &reset)
	if reset.State != "pending" || reset.RevokedAPIKeys != 1 {
		t.Errorf("reset: got %+v, want pending with 1 key revoked", reset)
	}

	if err := srv.stop(); err != nil {
		t.Fatalf("stop: got %v, want nil", err)
	}
	mustContain(t, "stderr", srv.Stderr.String(), "draining requests in flight", `"msg":"stopped"`)
	for _, u := range []string{srv.URL, srv.OperatorURL} {
		if conn, err := net.DialTimeout("tcp", strings.TrimPrefix(u, "http://"), time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections after the stop", u)
		}
	}
}

// TestServe_TLS: with --tls-cert-file and --tls-key-file both ports speak https with a
// certificate of the test's CA, the operator's client (WithCAFile) reconciles over them,
// and a pair rotated in place is served by new connections of both ports with no restart.
func TestServe_TLS(t *testing.T) {
	ca := certtest.MustCA(t, "terdut-server test CA")
	hc := &http.Client{Timeout: startTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, DisableKeepAlives: true}}
	const warning = "the listeners serve https (--tls-cert-file) but --public-url is http"

	t.Run("OnePort", func(t *testing.T) {
		certFile, keyFile := ca.MustLeaf(t).MustWrite(t, t.TempDir())
		srv := startServeWith(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
			"TERDUT_TLS_CERT_FILE": certFile, "TERDUT_TLS_KEY_FILE": keyFile}, hc, "--metrics-listen", "127.0.0.1:0")
		if !strings.HasPrefix(srv.URL, "https://") || srv.OperatorURL != "" {
			t.Fatalf("got URLs %q and %q, want one https URL", srv.URL, srv.OperatorURL)
		}
		status, body := srv.do(t, http.MethodPost, "/api/bootstrap", "")
		mustStatus(t, "claim over https", status, body, http.StatusCreated, nil)
		// The metrics port serves https with the same pair.
		metricsURL := listenURL(srv.Stderr.String(), "terdut-server listening for metrics")
		if !strings.HasPrefix(metricsURL, "https://") {
			t.Fatalf("metrics URL: got %q, want https", metricsURL)
		}
		status, body = srv.doAt(t, metricsURL, http.MethodGet, "/metrics", "")
		mustStatus(t, "GET /metrics over https", status, body, http.StatusOK, nil)
		mustContain(t, "stderr (the public URL is the default, http)", srv.Stderr.String(), warning)
	})

	t.Run("OperatorPort", func(t *testing.T) {
		dir := t.TempDir()
		first := ca.MustLeaf(t)
		certFile, keyFile := first.MustWrite(t, dir)
		const token = "operator-token-of-the-tls-test-0123456789"
		srv := startServeWith(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
			"TERDUT_OPERATOR_TOKEN_FILE": mustFile(t, "operator-token", token+"\n"),
			"TERDUT_TLS_CERT_FILE":       certFile, "TERDUT_TLS_KEY_FILE": keyFile},
			hc, "--operator-listen", "127.0.0.1:0", "--public-url", "https://terdut.test")
		if !strings.HasPrefix(srv.OperatorURL, "https://") {
			t.Fatalf("operator's URL: got %q, want https", srv.OperatorURL)
		}
		mustNotContain(t, "stderr (the public URL is https)", srv.Stderr.String(), warning)

		c, err := opclient.New(srv.URL, opclient.WithOperatorURL(srv.OperatorURL),
			opclient.WithCAFile(ca.MustWriteCA(t, t.TempDir())), opclient.WithOperatorToken(token))
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Reconcile(t.Context(), "")
		if err != nil || res.Action != opclient.ActionClaimed {
			t.Fatalf("reconcile over https: got %v, %v, want claimed", res.Action, err)
		}
		if res, err = c.Reconcile(t.Context(), res.APIKey.Key); err != nil || res.Action != opclient.ActionNone {
			t.Errorf("reconcile with the key, over https: got %v, %v, want none", res.Action, err)
		}

		second := ca.MustLeaf(t)
		mustReplace(t, certFile, second.Cert)
		mustReplace(t, keyFile, second.Key)
		for _, u := range []string{srv.URL, srv.OperatorURL} {
			mustServeSerial(t, u, ca, second.Serial)
		}
		if _, err := c.Status(t.Context()); err != nil {
			t.Errorf("status after the rotation: got %v, want nil", err)
		}
		mustContain(t, "stderr", srv.Stderr.String(), "TLS certificate reloaded")
		mustNotContain(t, "stderr", srv.Stderr.String(), "PRIVATE KEY")
	})
}

// mustReplace replaces the file at path with content at once, as a rename does.
func mustReplace(t *testing.T, path string, content []byte) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(path), ".new-"+filepath.Base(path))
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// mustServeSerial waits until a new connection to the server at u is shown the certificate
// of serial number want: a handshake looks at the files at most once a second.
func mustServeSerial(t *testing.T, u string, ca *certtest.CA, want int64) {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", parsed.Host,
			&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})
		if err != nil {
			t.Fatalf("handshake with %s: %v", u, err)
		}
		got := conn.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
		conn.Close()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: got serial %d, want %d within %s of the rotation", u, got, want, startTimeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
