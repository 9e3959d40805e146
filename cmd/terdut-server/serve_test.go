package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// startTimeout bounds how long a server may take to migrate and listen, and to stop: a bound
// on a hang, not the speed, since the suite runs on busy machines too.
const startTimeout = 2 * time.Minute

// client gives up on a request that a broken server never answers.
var client = &http.Client{Timeout: startTimeout}

// server is a terdut-server that run serves in the background.
type server struct {
	URL         string // http://127.0.0.1:port (https with TLS), where it listens
	OperatorURL string // where it listens for the operator with --operator-listen, else ""
	http        *http.Client
	Stdout      *syncBuffer
	Stderr      *syncBuffer
	cancel      context.CancelFunc
	done        chan error // receives run's result
}

// startServe runs `terdut-server serve args...` in env until the test ends or stop is called,
// and returns once it listens. It listens on a port of 127.0.0.1 that the kernel picks,
// found in the server's log, unless args say otherwise.
func startServe(t *testing.T, e env, args ...string) *server {
	t.Helper()
	return startServeWith(t, e, client, args...)
}

// startServeWith is startServe whose requests go through hc (for a server that speaks TLS).
func startServeWith(t *testing.T, e env, hc *http.Client, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{http: hc, Stdout: &syncBuffer{}, Stderr: &syncBuffer{}, cancel: cancel, done: make(chan error, 1)}
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--password-hash-cost", "4"}, args...)
	go func() { s.done <- run(ctx, args, e.get, s.Stdout, s.Stderr) }()
	t.Cleanup(func() { _ = s.stop() })

	deadline := time.After(startTimeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		if url := listenURL(s.Stderr.String(), "terdut-server listening"); url != "" {
			s.URL = url
			// The listener queues connections until serving starts, after the server has
			// logged its ports and printed what to do next: the first answer means it is all out.
			status, body := s.get(t, "/healthz", "")
			mustStatus(t, "GET /healthz", status, body, http.StatusOK, nil)
			s.OperatorURL = listenURL(s.Stderr.String(), "terdut-server listening for the operator")
			return s
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("serve returned before listening: %v\nstderr:\n%s", err, s.Stderr)
		case <-deadline:
			t.Fatalf("serve did not listen within %s; stderr:\n%s", startTimeout, s.Stderr)
		case <-tick.C:
		}
	}
}

// listenURL returns the URL of the address of the first line of a JSON log whose message is
// msg ("terdut-server listening", or "... for the operator"): https when the line says tls,
// else http; or "".
func listenURL(log, msg string) string {
	sc := bufio.NewScanner(strings.NewReader(log))
	for sc.Scan() {
		var line struct {
			Msg, Addr string
			TLS       bool
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			if line.TLS {
				return "https://" + line.Addr
			}
			return "http://" + line.Addr
		}
	}
	return ""
}

// stop cancels run's context, as SIGTERM does, and returns what run returned.
func (s *server) stop() error {
	s.cancel()
	select {
	case err := <-s.done:
		s.done <- err // stop may be called again, by the cleanup
		return err
	case <-time.After(startTimeout):
		return fmt.Errorf("run did not return within %s of its context being cancelled", startTimeout)
	}
}

// get sends a GET to the server and returns the status and body.
func (s *server) get(t *testing.T, path, bearer string) (int, string) {
	t.Helper()
	return s.do(t, http.MethodGet, path, bearer)
}

// do sends a request without a body to the server and returns the status and body.
func (s *server) do(t *testing.T, method, path, bearer string) (int, string) {
	t.Helper()
	return s.doAt(t, s.URL, method, path, bearer)
}

// doAt is do at one of the server's URLs (URL or OperatorURL).
func (s *server) doAt(t *testing.T, base, method, path, bearer string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, base+path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return resp.StatusCode, string(body)
}

// mustStatus checks a response's status and decodes its JSON body into v (if not nil).
func mustStatus(t *testing.T, what string, status int, body string, want int, v any) {
	t.Helper()
	if status != want {
		t.Fatalf("%s: got %d %s, want %d", what, status, body, want)
	}
	if v != nil {
		if err := json.Unmarshal([]byte(body), v); err != nil {
			t.Fatalf("%s: decode %q: %v", what, body, err)
		}
	}
}

func mustContain(t *testing.T, what, got string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(got, w) {
			t.Errorf("%s: got %q, want it to contain %q", what, got, w)
		}
	}
}

func mustNotContain(t *testing.T, what, got string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(got, u) {
			t.Errorf("%s: got %q, want it not to contain %q", what, got, u)
		}
	}
}

// TestServe runs the server as main does and talks to it over HTTP. Its subtests run one
// after the other: migrations on one Postgres server take turns (an advisory lock), and a
// migration that waits for another polls only every five seconds.
func TestServe(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t)}
		srv := startServe(t, e, "--public-url", "http://terdut.test:8080", "--shutdown-timeout", "30s")

		var ready struct{ Status string }
		status, body := srv.get(t, "/readyz", "")
		mustStatus(t, "GET /readyz", status, body, http.StatusOK, &ready)
		if ready.Status != "ok" {
			t.Errorf("readyz: got status %q, want ok", ready.Status)
		}
		mustContain(t, "stdout", srv.Stdout.String(),
			"terdut-server is running at http://terdut.test:8080",
			"not claimed yet",
			"curl -X POST http://terdut.test:8080/api/bootstrap\n",
			"terdut-server bootstrap claim")
		mustContain(t, "stderr", srv.Stderr.String(), "no operator token configured")
		if srv.OperatorURL != "" || !strings.HasPrefix(srv.URL, "http://") {
			t.Errorf("without --operator-listen or TLS: got URLs %q and %q, want one http URL", srv.URL, srv.OperatorURL)
		}

		// serve migrated the empty database itself: the install starts pending.
		var st struct {
			State      string
			Generation int
		}
		status, body = srv.get(t, "/api/bootstrap/status", "")
		mustStatus(t, "GET /api/bootstrap/status", status, body, http.StatusOK, &st)
		if st.State != "pending" || st.Generation != 0 {
			t.Errorf("status: got %s generation %d, want pending generation 0", st.State, st.Generation)
		}

		// With no operator token the claim is open, as printed, and the key it returns works.
		var claim struct {
			APIKey struct{ Key string } `json:"api_key"`
		}
		status, body = srv.do(t, http.MethodPost, "/api/bootstrap", "")
		mustStatus(t, "POST /api/bootstrap", status, body, http.StatusCreated, &claim)
		var me struct{ User struct{ Username string } }
		status, body = srv.get(t, "/api/me", claim.APIKey.Key)
		mustStatus(t, "GET /api/me with the claimed key", status, body, http.StatusOK, &me)
		if me.User.Username != "terdut-operator-bootstrap" {
			t.Errorf("me: got %q, want terdut-operator-bootstrap", me.User.Username)
		}

		mustDrain(t, srv)
		mustContain(t, "stderr", srv.Stderr.String(), "draining requests in flight", `"msg":"stopped"`)

		// A second start on the claimed database applies no migration and says where to sign in.
		again := startServe(t, e, "--public-url", "http://terdut.test:8080")
		mustContain(t, "stdout of the second start", again.Stdout.String(), "Sign in at http://terdut.test:8080/login")
		mustNotContain(t, "stdout of the second start", again.Stdout.String(), "not claimed")
		mustNotContain(t, "stderr of the second start", again.Stderr.String(), "database migrated")
		if err := again.stop(); err != nil {
			t.Errorf("second stop: got %v, want nil", err)
		}
	})

	t.Run("OperatorToken", func(t *testing.T) {
		const token = "operator-token-of-the-serve-test-0123456789"
		tokenFile := mustFile(t, "operator-token", "# rotated by the operator\n\n"+token+"\n")
		e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t), "TERDUT_OPERATOR_TOKEN_FILE": tokenFile}
		srv := startServe(t, e, "--public-url", "http://terdut.test:8080")

		status, body := srv.do(t, http.MethodPost, "/api/bootstrap", "")
		mustStatus(t, "claim without the token", status, body, http.StatusUnauthorized, nil)

		// Run the claim command the server printed, as a person would paste it.
		var cmd string
		for line := range strings.Lines(srv.Stdout.String()) {
			if strings.Contains(line, "curl ") {
				cmd = strings.ReplaceAll(strings.TrimSpace(line), "http://terdut.test:8080", srv.URL)
			}
		}
		if cmd == "" {
			t.Fatalf("stdout: got %q, want a curl line to claim the install", srv.Stdout)
		}
		mustContain(t, "printed claim command", cmd, "Authorization: Bearer ", tokenFile, "curl -H @-")
		out, err := exec.Command("sh", "-c", cmd+` -s -o /dev/null -w "%{http_code}"`).CombinedOutput()
		if err != nil || string(out) != "201" {
			t.Errorf("printed claim command %q: got %q (%v), want 201", cmd, out, err)
		}

		mustNotContain(t, "stdout", srv.Stdout.String(), token)
		mustNotContain(t, "stderr", srv.Stderr.String(), token, "no operator token configured")
		if err := srv.stop(); err != nil {
			t.Errorf("stop: got %v, want nil", err)
		}
	})
}

// mustDrain starts a request, waits until its handler reads the body that the test holds
// back, stops the server, and checks that the server stops accepting connections but
// finishes that request before run returns nil. The request signs in, so it needs the
// database: a server that closed its store before the request finished would answer 500.
func mustDrain(t *testing.T, srv *server) {
	t.Helper()
	// With "Expect: 100-continue" the client sends the body only once the handler starts to
	// read it, and the trace says when that is.
	slow := &http.Client{Timeout: 2 * startTimeout, Transport: &http.Transport{ExpectContinueTimeout: startTimeout}}
	defer slow.CloseIdleConnections()
	reading := make(chan struct{})
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { close(reading) }})
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/auth/login", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Expect", "100-continue")
	type answer struct {
		status int
		body   string
		err    error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := slow.Do(req)
		if err != nil {
			answers <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		answers <- answer{resp.StatusCode, string(b), err}
	}()
	select {
	case <-reading:
	case a := <-answers:
		t.Fatalf("sign-in answered before reading its body: %d %s %v", a.status, a.body, a.err)
	case <-time.After(startTimeout):
		t.Fatalf("the sign-in handler did not read its body within %s", startTimeout)
	}

	srv.cancel()
	addr := strings.TrimPrefix(srv.URL, "http://")
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(startTimeout)
	for closed := false; !closed; {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if closed = err != nil; !closed { // shutdown closes the listener first
			conn.Close()
			select {
			case <-deadline:
				t.Fatalf("the server still accepts connections %s after its context was cancelled", startTimeout)
			case <-tick.C:
			}
		}
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		t.Fatalf("run returned (%v) while a request was still in flight", err)
	default:
	}

	if _, err := io.WriteString(pw, `{"username": "nobody", "password": "wrong"}`); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	a := <-answers
	if a.err != nil {
		t.Fatalf("request in flight during shutdown: got error %v, want an answer", a.err)
	}
	if a.status != http.StatusUnauthorized || !strings.Contains(a.body, "invalid_credentials") {
		t.Errorf("request in flight during shutdown: got %d %s, want 401 invalid_credentials", a.status, a.body)
	}
	select {
	case err := <-srv.done:
		srv.done <- err
		if err != nil {
			t.Errorf("run: got %v, want nil after a graceful shutdown", err)
		}
	case <-time.After(startTimeout):
		t.Fatalf("run did not return within %s of the last request finishing", startTimeout)
	}
}

func TestServe_Refuses(t *testing.T) {
	unreachable := "postgres://terdut:" + secretPassword + "@127.0.0.1:1/terdut?sslmode=disable&connect_timeout=5"
	const shortToken = "too-short-7f3a"
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	tests := []struct {
		name  string
		env   env
		args  []string
		want  []string
		never []string // in neither the error nor the output
	}{
		{name: "ErrShortOperatorToken",
			env:  env{"TERDUT_DATABASE_URL": unreachable, "TERDUT_OPERATOR_TOKEN_FILE": mustFile(t, "short", "# ok\n"+shortToken+"\n")},
			want: []string{"operator token file", "line 2", "at least 32 characters"}, never: []string{shortToken, secretPassword}},
		{name: "ErrOperatorTokenFileWithoutToken",
			env:  env{"TERDUT_DATABASE_URL": unreachable, "TERDUT_OPERATOR_TOKEN_FILE": mustFile(t, "comments", "# none yet\n\n")},
			want: []string{"operator token file", "holds no token"}},
		{name: "ErrOperatorTokenFileMissing",
			env:  env{"TERDUT_DATABASE_URL": unreachable},
			args: []string{"--operator-token-file", "/nonexistent/operator-token"},
			want: []string{"operator token file /nonexistent/operator-token", "no such file"}},
		{name: "ErrDatabaseURLMalformed",
			env:  env{"TERDUT_DATABASE_URL": "postgres://terdut:" + secretPassword + "@[::1/terdut"},
			want: []string{"database URL", "malformed"}, never: []string{secretPassword}},
		{name: "ErrDatabaseUnreachable",
			env:  env{"TERDUT_DATABASE_URL": unreachable},
			want: []string{"migrate the database", "database unavailable"}, never: []string{secretPassword}},
		{name: "ErrListen",
			env:  env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t)},
			args: []string{"--listen", held.Addr().String(), "--password-hash-cost", "4"},
			want: []string{"--listen " + held.Addr().String()}},
		{name: "ErrOperatorListen",
			env:  env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t), "TERDUT_OPERATOR_LISTEN": held.Addr().String()},
			args: []string{"--listen", "127.0.0.1:0", "--password-hash-cost", "4"},
			want: []string{"--operator-listen " + held.Addr().String()}},
		{name: "ErrOperatorListenIsListen",
			env:  env{"TERDUT_DATABASE_URL": unreachable},
			args: []string{"--listen", ":8080", "--operator-listen", ":8080"},
			want: []string{"--operator-listen :8080 is --listen's address", "a port of their own"}},
		{name: "ErrTLSCertWithoutKey",
			env:  env{"TERDUT_DATABASE_URL": unreachable, "TERDUT_TLS_CERT_FILE": "/etc/tls/tls.crt"},
			want: []string{"--tls-cert-file and --tls-key-file go together"}},
		{name: "ErrTLSNotAPair",
			env: env{"TERDUT_DATABASE_URL": unreachable, "TERDUT_TLS_CERT_FILE": mustFile(t, "tls.crt", "not a certificate"),
				"TERDUT_TLS_KEY_FILE": mustFile(t, "tls.key", "not a key")},
			want: []string{"--tls-cert-file and --tls-key-file", "are not a pair", "PEM certificate chain"}},
		{name: "ErrTLSKeyMissing",
			env: env{"TERDUT_DATABASE_URL": unreachable, "TERDUT_TLS_CERT_FILE": mustFile(t, "tls.crt", "not a certificate"),
				"TERDUT_TLS_KEY_FILE": "/nonexistent/tls.key"},
			want: []string{"the TLS key file /nonexistent/tls.key", "no such file"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runCmd(t, tt.env, append([]string{"serve"}, tt.args...)...)
			if r.Err == nil {
				t.Fatalf("got no error, want one mentioning %q", tt.want)
			}
			mustContain(t, "error", r.Err.Error(), tt.want...)
			for _, out := range []string{r.Err.Error(), r.Stdout, r.Stderr} {
				mustNotContain(t, "error and output", out, tt.never...)
			}
			if strings.Contains(r.Stderr, "terdut-server listening") {
				t.Errorf("stderr: got %q, want no listening server", r.Stderr)
			}
		})
	}
}

// TestRun_Commands checks what run does with a command it does not know, with help, and
// with -h, before any database is involved.
func TestRun_Commands(t *testing.T) {
	t.Run("ErrUnknown", func(t *testing.T) {
		r := runCmd(t, env{}, "frobnicate")
		if r.Err == nil || !strings.Contains(r.Err.Error(), `unknown command "frobnicate": use serve, migrate, bootstrap, audit or version`) {
			t.Errorf("got %v, want an unknown command error", r.Err)
		}
	})
	t.Run("Help", func(t *testing.T) {
		r := mustRun(t, env{}, "help")
		mustContain(t, "stdout", r.Stdout, "serve", "migrate", "bootstrap status", "bootstrap claim", "bootstrap reset", "audit")
	})
	t.Run("FlagsHelp", func(t *testing.T) {
		// Help asked for goes to stdout (see TestHelp_EveryFlag).
		r := mustRun(t, env{}, "-h")
		mustContain(t, "stdout", r.Stdout, "--database-url", "--operator-token-file", "--bootstrap-gate", "--listen")
	})
	t.Run("ErrNotAFlag", func(t *testing.T) {
		r := runCmd(t, env{"TERDUT_DATABASE_URL": testDB}, "serve", "now")
		if r.Err == nil || !strings.Contains(r.Err.Error(), `unexpected argument "now"`) {
			t.Errorf("got %v, want an unexpected argument error", r.Err)
		}
	})
}
