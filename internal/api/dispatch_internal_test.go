package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestStaticRoutes_AsChi: every route the handler dispatches itself is the one chi finds for
// that method and path, on either port's router, and the table holds the hot routes.
func TestStaticRoutes_AsChi(t *testing.T) {
	s := newServer(nil, Options{})
	people, operator := s.routes(true)
	single, _ := s.routes(false)
	for name, hh := range map[string]http.Handler{"people": people, "operator": operator, "single": single} {
		h := hh.(*handler)
		for k, sr := range h.static {
			if strings.ContainsAny(k.path, "{*") || k.path != sr.pattern || k.path != "/" && strings.HasSuffix(k.path, "/") {
				t.Errorf("%s: %s %s dispatched as %q", name, k.method, k.path, sr.pattern)
			}
			if got := h.mux.Find(chi.NewRouteContext(), k.method, k.path); got != sr.pattern {
				t.Errorf("%s: %s %s: chi finds %q, the handler %q", name, k.method, k.path, got, sr.pattern)
			}
		}
		t.Logf("%s: %d static routes", name, len(h.static))
	}
	for _, k := range []staticKey{{"GET", "/api/me"}, {"GET", "/healthz"}, {"POST", "/api/auth/login"}} {
		if _, ok := single.(*handler).static[k]; !ok {
			t.Errorf("%s %s is not dispatched by the handler", k.method, k.path)
		}
	}
	if _, ok := people.(*handler).static[staticKey{"POST", "/api/bootstrap"}]; ok {
		t.Error("people's port dispatches the operator's POST /api/bootstrap")
	}
}

// TestStaticRoutes_Fallback: what is near a static route but not it (another method, a
// trailing slash, an unneeded escape, a method chi does not know) is chi's, and answers as
// chi answers it; the static route answers under its pattern.
func TestStaticRoutes_Fallback(t *testing.T) {
	h := NewServer(nil, Options{})
	for _, c := range []struct {
		method, target string
		status         int
		code           string
	}{
		{"GET", "/api/me", 401, "unauthorized"},
		{"POST", "/api/me", 405, "method_not_allowed"},
		{"HEAD", "/api/me", 405, ""},
		{"get", "/api/me", 405, "method_not_allowed"},
		{"GET", "/api/me/", 404, "not_found"},
		{"GET", "/api/%6De", 404, "not_found"},
		{"GET", "/API/me", 404, "not_found"},
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(c.method, c.target, nil))
		if w.Code != c.status || !strings.Contains(w.Body.String(), `"code":"`+c.code+`"`) && c.code != "" {
			t.Errorf("%s %s: %d %s, want %d %s", c.method, c.target, w.Code, w.Body, c.status, c.code)
		}
	}
}

// TestStaticRoutes_TrailingSlash: a route whose pattern ends in a slash is left to chi, which
// names it without the slash; "/" is the handler's.
func TestStaticRoutes_TrailingSlash(t *testing.T) {
	mux := chi.NewRouter()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	mux.Get("/", ok)
	mux.Get("/things/", ok)
	mux.Get("/things", ok)
	table := staticRoutes(mux)
	if _, found := table[staticKey{"GET", "/things/"}]; found {
		t.Error("GET /things/ is dispatched by the handler")
	}
	for _, path := range []string{"/", "/things"} {
		if _, found := table[staticKey{"GET", path}]; !found {
			t.Errorf("GET %s is not dispatched by the handler", path)
		}
	}
}
