package api

import (
	"fmt"
	"net/http"
	"runtime/debug"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// staticKey is a request's method and the path chi routes by.
type staticKey struct{ method, path string }

// staticRoute is what chi would call for one method of a route without parameters: the
// route's own handler (its group's middlewares included) behind the router's middlewares.
type staticRoute struct {
	pattern string
	handler http.Handler
}

// staticRoutes lists mux's routes without parameters or wildcards by method and path. chi
// tries a route's static edges before any other, so a request whose method and path are one
// of these reaches that route's handler through chi too; the handler dispatches those itself,
// with one map lookup instead of chi's walk of its tree, and leaves everything else (routes
// with parameters, mounted routers, 404s and 405s) to chi. Nothing but a route table that
// chi itself was given goes in: TestStaticRoutes_AsChi holds each entry to chi's own Find.
// The walk of the tree was about 2 µs of CPU of every API-key request on a busy 2-core machine,
// in cache misses more than in instructions (bench/README.md).
func staticRoutes(mux *chi.Mux) map[staticKey]*staticRoute {
	routes := make(map[staticKey]*staticRoute)
	mws := chi.Chain(mux.Middlewares()...)
	for _, rt := range mux.Routes() {
		// chi names a route by its pattern without a trailing slash (RoutePattern): such a
		// route is left to chi, so that its metrics and access lines keep chi's name.
		if rt.SubRoutes != nil || strings.ContainsAny(rt.Pattern, "{*") ||
			rt.Pattern != "/" && strings.HasSuffix(rt.Pattern, "/") {
			continue
		}
		for method, h := range rt.Handlers {
			if method == "*" { // a route for every method: chi's own concern
				continue
			}
			routes[staticKey{method, rt.Pattern}] = &staticRoute{pattern: rt.Pattern, handler: mws.Handler(h)}
		}
	}
	return routes
}

// routePath is the path chi routes r by: the escaped path when the client's escaping is not
// the canonical one, else the path, and "/" for none (chi.Mux.routeHTTP).
func routePath(r *http.Request) string {
	switch {
	case r.URL.RawPath != "":
		return r.URL.RawPath
	case r.URL.Path == "":
		return "/"
	}
	return r.URL.Path
}

// route serves r: by its static route sr when it has one, else through chi. A
// panic in a handler answers 500 and is logged with its stack, as chi's Recoverer did; an
// http.ErrAbortHandler goes on up, to abort the answer.
func (h *handler) route(w http.ResponseWriter, r *http.Request, sr *staticRoute) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler { //nolint:errorlint // the sentinel itself is what panics
				panic(v)
			}
			h.log.Error("handler panicked", "panic", logcap.String(fmt.Sprint(v)), "stack", string(debug.Stack()),
				requestIDs(r.Context()))
			if r.Header.Get("Connection") != "Upgrade" {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}
	}()
	if sr != nil {
		r.Pattern = sr.pattern
		sr.handler.ServeHTTP(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}
