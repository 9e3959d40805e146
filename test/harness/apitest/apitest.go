// Package apitest runs terdut-server's HTTP API in-process for tests and benchmarks:
// real handlers on a real listener over a real Postgres database.
package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
)

// OperatorToken is the token NewServer configures unless told otherwise.
const OperatorToken = "operator-token-for-tests-0123456789abcdef"

// testPasswords is one hasher at bcrypt's minimum cost shared by every instance: making one
// computes a dummy hash, which adds up over the hundreds of instances a race test starts.
var testPasswords = sync.OnceValues(func() (*api.Passwords, error) { return api.NewPasswords(bcrypt.MinCost) })

// Server is one terdut-server instance. Several may share one database, as replicas do.
type Server struct {
	URL     string
	Store   *store.Store
	Options api.Options
	Logs    *SyncBuffer // everything the server logged, at debug level
	HTTP    *httptest.Server
}

// OpenStore opens the database at url (with opts, such as a pooler) and closes it when the
// test ends.
func OpenStore(tb testing.TB, url string, opts ...store.Option) *store.Store {
	tb.Helper()
	st, err := store.Open(context.Background(), url, opts...)
	if err != nil {
		tb.Fatalf("open store: %v", err)
	}
	tb.Cleanup(st.Close)
	return st
}

// NewServer starts an instance on its own listener and store (its own pool) over the
// database at dbURL. mutate, if not nil, adjusts the options before the server is built.
// By default the gate is on, password sign-in is on (at bcrypt's minimum cost), the access
// log is on (as it is in production), and the operator token is OperatorToken, written to a file in a temporary directory. A password check
// waits up to 30s for a free slot (production: 1s), so that a burst of sign-ins on a busy test
// machine is not refused as overloaded unless a test asks for that.
func NewServer(tb testing.TB, dbURL string, mutate func(*api.Options)) *Server {
	tb.Helper()
	return NewServerOn(tb, OpenStore(tb, dbURL), mutate)
}

// NewServerOn is NewServer over a store the caller opened (behind a pooler, say).
func NewServerOn(tb testing.TB, st *store.Store, mutate func(*api.Options)) *Server {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("listen: %v", err)
	}
	base := "http://" + ln.Addr().String()
	public, _ := url.Parse(base)
	passwords, err := testPasswords()
	if err != nil {
		tb.Fatal(err)
	}
	logs := &SyncBuffer{}
	opts := api.Options{PublicURL: public, Gate: true, PasswordLogin: true, SessionTTL: time.Hour,
		OperatorTokens: TokenFile(tb, OperatorToken), Passwords: passwords, PasswordCheckWait: 30 * time.Second,
		ResetLimit: store.RateLimit{Max: 5, Window: time.Minute}, AccessLog: logs,
		Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	if mutate != nil {
		mutate(&opts)
	}
	srv := httptest.NewUnstartedServer(api.NewServer(st, opts))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	tb.Cleanup(srv.Close)
	return &Server{URL: base, Store: st, Options: opts, Logs: logs, HTTP: srv}
}

// Request is one call to the API.
type Request struct {
	Method string
	Path   string
	Body   any // encoded as JSON unless it is a string or []byte, sent as is
	Bearer string
	Cookie *http.Cookie
	Header http.Header
}

// Response is a finished call: status, headers and the whole body.
type Response struct {
	Status  int
	Header  http.Header
	Body    []byte
	Cookies []*http.Cookie
}

// JSON decodes the body into v, failing the test if it is not JSON.
func (r Response) JSON(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("decode %d response %q: %v", r.Status, r.Body, err)
	}
}

// Code returns the "code" of an error body, or "".
func (r Response) Code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.Body, &e)
	return e.Code
}

// Cookie returns the named cookie the response set, or nil.
func (r Response) Cookie(name string) *http.Cookie {
	for _, c := range r.Cookies {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// noRedirects bounds each request by a hang, not the speed: the suite runs on busy machines.
var noRedirects = &http.Client{Timeout: 2 * time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// Do sends req to the server without following redirects. It returns an error only when
// the request could not be made; it is safe to call from many goroutines.
func (s *Server) Do(req Request) (Response, error) {
	var body io.Reader
	switch b := req.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			return Response{}, err
		}
		body = bytes.NewReader(enc)
	}
	hr, err := http.NewRequest(req.Method, s.URL+req.Path, body)
	if err != nil {
		return Response{}, err
	}
	for k, vs := range req.Header {
		hr.Header[k] = vs
	}
	if body != nil && hr.Header.Get("Content-Type") == "" {
		hr.Header.Set("Content-Type", "application/json")
	}
	if req.Bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+req.Bearer)
	}
	if req.Cookie != nil {
		hr.AddCookie(req.Cookie)
	}
	resp, err := noRedirects.Do(hr)
	if err != nil {
		return Response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Response{Status: resp.StatusCode, Header: resp.Header, Body: b, Cookies: resp.Cookies()}, err
}

// MustDo is Do for the test goroutine: it fails the test when the request cannot be made.
func (s *Server) MustDo(tb testing.TB, req Request) Response {
	tb.Helper()
	resp, err := s.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.Path, err)
	}
	return resp
}

// SyncBuffer is a bytes.Buffer safe for concurrent writes, for capturing logs.
type SyncBuffer struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes int
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

// Writes returns how many times Write was called: for a process's standard error, how many
// write system calls its log would have made.
func (b *SyncBuffer) Writes() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.writes
}

// String returns everything written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
