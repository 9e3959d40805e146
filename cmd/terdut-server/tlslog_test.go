package main

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/certtest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_FailedHandshakeLines: anyone can open a connection and fail its TLS handshake,
// or send an HTTP/2 connection something other than its preface, once a connection; like
// the other refusals anyone can cause, the lines they cost are bounded: at most one a
// second for each kind on a server, saying how many it stands for (suppressed), so that
// every failure is accounted for and a flood does not flood the log.
func TestServe_FailedHandshakeLines(t *testing.T) {
	srv, u, ca := startTLSServe(t)
	// Each failure waits for the server to close the connection, which it does after it has
	// written (or held back) its line: so every failure made is in the log when counted.
	untilClosed := func(c net.Conn) {
		t.Helper()
		_ = c.SetDeadline(time.Now().Add(startTimeout))
		if _, err := io.Copy(io.Discard, c); err != nil {
			t.Fatalf("waiting for the server to close the connection: %v", err)
		}
		c.Close()
	}
	notTLS := func() {
		c, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(c, "hello, this is no TLS client hello\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		untilClosed(c)
	}
	badPreface := func() {
		c, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: ca.Pool(), ServerName: "localhost", NextProtos: []string{"h2"}})
		if err != nil {
			t.Fatal(err)
		}
		if p := c.ConnectionState().NegotiatedProtocol; p != "h2" {
			t.Fatalf("ALPN: got %q, want h2", p)
		}
		if _, err := io.WriteString(c, "THIS IS NOT THE HTTP/2 CONNECTION PREFACE\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		untilClosed(c)
	}
	type line struct {
		Msg        string
		Reason     string
		Suppressed int
	}
	lines := func(reason string) []line {
		var out []line
		sc := bufio.NewScanner(strings.NewReader(srv.Stderr.String()))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var l line
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Reason == reason {
				out = append(out, l)
			}
		}
		return out
	}
	for _, tc := range []struct {
		reason string
		fail   func()
		n      int
	}{{"tls_handshake", notTLS, 150}, {"http2_preface", badPreface, 60}} {
		t.Run(tc.reason, func(t *testing.T) {
			start := time.Now()
			for range tc.n {
				tc.fail()
			}
			// At most a line a second, and one at once: how long the flood took on this
			// machine sets the bound, whatever its speed.
			got := lines(tc.reason)
			if most := int(time.Since(start)/time.Second) + 1; len(got) == 0 || len(got) > most {
				t.Fatalf("%d failures in %s: got %d lines of reason %s, want 1 to %d\nstderr:\n%s",
					tc.n, time.Since(start).Round(time.Millisecond), len(got), tc.reason, most, srv.Stderr)
			}
			// Fail again until a line comes: it counts those held back since the last one,
			// so the lines account for every failure.
			made := tc.n
			for deadline := time.Now().Add(startTimeout); len(lines(tc.reason)) == len(got); {
				if time.Now().After(deadline) {
					t.Fatalf("no new line of reason %s within %s", tc.reason, startTimeout)
				}
				time.Sleep(100 * time.Millisecond)
				tc.fail()
				made++
			}
			counted := 0
			for _, l := range lines(tc.reason) {
				counted += 1 + l.Suppressed
			}
			if counted != made {
				t.Fatalf("lines of reason %s stand for %d failures, want %d (every one made)\nstderr:\n%s", tc.reason, counted, made, srv.Stderr)
			}
		})
	}
	if status, body := srv.get(t, "/healthz", ""); status != http.StatusOK {
		t.Fatalf("GET /healthz after the failures: got %d %s, want 200", status, body)
	}
}

// startTLSServe starts a server that speaks TLS with a certificate of a test CA on an empty
// database, and returns it, its URL parsed and the CA its clients trust.
func startTLSServe(t *testing.T) (*server, *url.URL, *certtest.CA) {
	t.Helper()
	ca := certtest.MustCA(t, "terdut-server test CA")
	hc := &http.Client{Timeout: startTimeout, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, DisableKeepAlives: true}}
	certFile, keyFile := ca.MustLeaf(t).MustWrite(t, t.TempDir())
	srv := startServeWith(t, env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t),
		"TERDUT_TLS_CERT_FILE": certFile, "TERDUT_TLS_KEY_FILE": keyFile}, hc)
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return srv, u, ca
}
