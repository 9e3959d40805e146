package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestHeaders_Pages: every HTML page tells the browser not to sniff its type and not to send
// its address on to other sites.
func TestHeaders_Pages(t *testing.T) {
	db := pgtest.MustDatabase(t)
	srv := apitest.NewServer(t, db, nil)
	html := http.Header{"Accept": {"text/html"}}
	pages := map[string]apitest.Request{
		"login":   {Method: http.MethodGet, Path: "/login"},
		"pending": {Method: http.MethodPost, Path: "/api/auth/login", Header: html, Body: map[string]string{"username": "a", "password": "b"}},
		"error":   {Method: http.MethodGet, Path: "/auth/oidc/login", Header: html},
	}
	check := func(name string, req apitest.Request) {
		t.Helper()
		resp := srv.MustDo(t, req)
		if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("%s: got %d %s, want a page", name, resp.Status, resp.Header.Get("Content-Type"))
		}
		if got := resp.Header.Get("X-Content-Type-Options"); got != "nosniff" {
			t.Errorf("%s: X-Content-Type-Options got %q, want nosniff", name, got)
		}
		if got := resp.Header.Get("Referrer-Policy"); got != "no-referrer" {
			t.Errorf("%s: Referrer-Policy got %q, want no-referrer", name, got)
		}
	}
	for name, req := range pages {
		check(name, req)
	}
	srv.MustClaim(t)
	alice := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	check("home", apitest.Request{Method: http.MethodGet, Path: "/", Cookie: srv.MustLogin(t, "alice", alice.Password)})
}

// TestHeaders_SignInNoStore: the answers that carry a new session cookie may not be cached.
func TestHeaders_SignInNoStore(t *testing.T) {
	e := newCoreEnv(t, nil)
	for name, req := range map[string]apitest.Request{
		"json": {Method: http.MethodPost, Path: "/api/auth/login", Body: map[string]string{"username": "alice", "password": e.alice.Password}},
		"form": {Method: http.MethodPost, Path: "/api/auth/login", Body: "username=alice&password=" + url.QueryEscape(e.alice.Password),
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}},
	} {
		resp := e.do(t, req)
		if resp.Cookie("terdut_session") == nil {
			t.Fatalf("%s: got %d %s without a session cookie, want one", name, resp.Status, resp.Body)
		}
		if got := resp.Header.Get("Cache-Control"); got != "no-store" {
			t.Fatalf("%s: Cache-Control got %q, want no-store", name, got)
		}
	}
}

// TestSessionCookie_HostPrefix: with an https public URL the session cookie is named with the
// __Host- prefix (Secure, Path=/, no Domain), and it is the one read and cleared; the plain name
// is not honoured.
func TestSessionCookie_HostPrefix(t *testing.T) {
	public, _ := url.Parse("https://terdut.example.test")
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.PublicURL = public })
	srv.MustClaim(t)
	alice := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	resp := login(t, srv, "alice", alice.Password, nil)
	c := resp.Cookie("__Host-terdut_session")
	if resp.Status != http.StatusOK || c == nil || resp.Cookie("terdut_session") != nil {
		t.Fatalf("sign-in: got %d with cookies %v, want 200 and only __Host-terdut_session", resp.Status, resp.Cookies)
	}
	if !c.Secure || c.Path != "/" || c.Domain != "" || !c.HttpOnly {
		t.Fatalf("cookie: got Secure %v Path %q Domain %q HttpOnly %v, want Secure, /, none, HttpOnly", c.Secure, c.Path, c.Domain, c.HttpOnly)
	}
	if got := meStatus(t, srv, c); got != http.StatusOK {
		t.Fatalf("GET /api/me with the __Host- cookie: got %d, want 200", got)
	}
	if got := meStatus(t, srv, &http.Cookie{Name: "terdut_session", Value: c.Value}); got != http.StatusUnauthorized {
		t.Fatalf("GET /api/me with the token under the plain name: got %d, want 401", got)
	}
	out := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Cookie: c})
	if cleared := out.Cookie("__Host-terdut_session"); out.Status != http.StatusNoContent || cleared == nil || cleared.MaxAge >= 0 {
		t.Fatalf("sign-out: got %d with cookies %v, want 204 clearing __Host-terdut_session", out.Status, out.Cookies)
	}
	if got := meStatus(t, srv, c); got != http.StatusUnauthorized {
		t.Fatalf("GET /api/me after sign-out: got %d, want 401", got)
	}
}
