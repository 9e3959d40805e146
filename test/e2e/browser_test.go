package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// browser is a person's user agent: it keeps cookies for the public URL and sends each
// request to the replica it is told to, playing the load balancer without sticky sessions.
type browser struct {
	jar    *cookiejar.Jar
	public *url.URL
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(publicURL)
	return &browser{jar: jar, public: u}
}

// request is one request of a browser or an API client.
type request struct {
	method string // GET when empty
	target string // a path, or an absolute URL on the public URL (a redirect's Location)
	body   any    // sent as JSON when not nil
	bearer string
	accept string // application/json when empty
}

// response is a whole response.
type response struct {
	status int
	header http.Header
	body   []byte
}

// code returns the "code" of a JSON error body.
func (r response) code() string {
	var e struct{ Code string }
	_ = json.Unmarshal(r.body, &e)
	return e.Code
}

var noRedirects = &http.Client{Timeout: 30 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends req to the replica s with the browser's cookies and keeps the cookies it sets.
// It follows no redirect.
func (b *browser) do(t *testing.T, s *server, req request) response {
	t.Helper()
	target, err := b.public.Parse(req.target)
	if err != nil || target.Host != b.public.Host {
		t.Fatalf("target %q: want a path or a URL on %s", req.target, publicURL)
	}
	var body io.Reader
	if req.body != nil {
		enc, err := json.Marshal(req.body)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(enc)
	}
	method := req.method
	if method == "" {
		method = http.MethodGet
	}
	hr, err := http.NewRequestWithContext(t.Context(), method, s.URL+target.RequestURI(), body)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	hr.Header.Set("Accept", "application/json")
	if req.accept != "" {
		hr.Header.Set("Accept", req.accept)
	}
	if req.bearer != "" {
		hr.Header.Set("Authorization", "Bearer "+req.bearer)
	}
	for _, c := range b.jar.Cookies(target) {
		hr.AddCookie(c)
	}
	resp, err := noRedirects.Do(hr)
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, target.Path, s.name, err)
	}
	defer resp.Body.Close()
	b.jar.SetCookies(target, resp.Cookies())
	all, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s on %s: read: %v", method, target.Path, s.name, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: all}
}

// mustJSON sends req, checks the status and decodes the body into out (when not nil).
func (b *browser) mustJSON(t *testing.T, s *server, req request, want int, out any) {
	t.Helper()
	r := b.do(t, s, req)
	if req.method == "" {
		req.method = http.MethodGet
	}
	if r.status != want {
		t.Fatalf("%s %s on %s: got %d %s, want %d", req.method, req.target, s.name, r.status, r.body, want)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			t.Fatalf("%s %s on %s: decode %s: %v", req.method, req.target, s.name, r.body, err)
		}
	}
}

// session returns the value of the browser's session cookie, or "".
func (b *browser) session() string {
	for _, c := range b.jar.Cookies(b.public) {
		if c.Name == "terdut_session" {
			return c.Value
		}
	}
	return ""
}

// user is a user as GET /api/me shows it.
type user struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
	Role     string `json:"role"`
	Kind     string `json:"kind"`
}

// me returns who the browser is signed in as on replica s (or, with bearer, whose key it is).
func (b *browser) me(t *testing.T, s *server, bearer string) user {
	t.Helper()
	var body struct{ User user }
	b.mustJSON(t, s, request{target: "/api/me", bearer: bearer}, http.StatusOK, &body)
	return body.User
}

// signIn signs the person with the provider's subject sub in by single sign-on, without a
// browser engine: the sign-in starts on replica start, the provider approves it at once, and
// the callback goes to replica finish. It fails the test unless it ends signed in, sent to /.
func (b *browser) signIn(t *testing.T, in *install, start, finish *server, sub string) {
	t.Helper()
	r := b.do(t, start, request{target: "/auth/oidc/login?login_hint=" + url.QueryEscape(sub), accept: "text/html"})
	if r.status != http.StatusFound || !strings.HasPrefix(r.header.Get("Location"), in.idp.Issuer()) {
		t.Fatalf("sign-in start for %s on %s: got %d to %q, want 302 to the provider", sub, start.name,
			r.status, r.header.Get("Location"))
	}
	callback := in.idp.Authorize(t, r.header.Get("Location"))
	r = b.do(t, finish, request{target: callback, accept: "text/html"})
	if r.status != http.StatusSeeOther || r.header.Get("Location") != "/" || b.session() == "" {
		t.Fatalf("sign-in callback for %s on %s: got %d to %q, session cookie set %v; want 303 to / with one\n%s",
			sub, finish.name, r.status, r.header.Get("Location"), b.session() != "", r.body)
	}
}
