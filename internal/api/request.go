package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// handler is the server's http.Handler. It gives each request one requestContext, routes it
// (see route) and counts it in the metrics.
type handler struct {
	mux     *chi.Mux
	static  map[staticKey]*staticRoute // mux's routes without parameters (see staticRoutes)
	metrics *metrics
	log     *slog.Logger // a handler's panic
	routing sync.Pool    // of *chi.Context, reused as chi.Mux reuses its own
	// access, when its w is not nil, gets a line for every request (see accessLog).
	access accessWriter
	ids    *requestIDGen
}

// newHandler returns the handler of mux's routes, which must all be in place.
func newHandler(mux *chi.Mux, m *metrics, log *slog.Logger) *handler {
	return &handler{mux: mux, static: staticRoutes(mux), metrics: m, log: log,
		routing: sync.Pool{New: func() any { return chi.NewRouteContext() }}, ids: newRequestIDs()}
}

// requestContext is a request's context, made once for it: chi's routing state, the status
// of the answer (for the metrics) and, once requireUser has authenticated the caller, the
// principal. Before, chi.Mux made a copy of the request and a context for its routing
// state, instrument a status writer, and requireUser a second copy and a context for the
// principal: five allocations and about 750 of the 3,500 bytes an API-key request made.
// Now there are two, the copy of the request and this. chi.Mux finds its routing state
// here and makes none of its own.
type requestContext struct {
	context.Context
	routing *chi.Context
	w       statusWriter
	p       principal // the zero principal until requireUser sets it
	id      [1]string // the request's id, always the server's own
	// clientID is the client's X-Request-Id when it is a plain token (validRequestID), else
	// "": kept beside id, marked as the client's, never in its place.
	clientID string
	// done is the Context's Done, which never changes once made: pgx and the context
	// package ask for it several times a statement. It is made for every request, one
	// that reads nothing from the database included (a channel, about 100 bytes).
	done <-chan struct{}
}

type requestKey struct{}

func (c *requestContext) Done() <-chan struct{} { return c.done }

func (c *requestContext) Value(key any) any {
	switch key {
	case chi.RouteCtxKey:
		return c.routing
	case requestKey{}:
		return c
	}
	return c.Context.Value(key)
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	c := &requestContext{Context: ctx, w: statusWriter{ResponseWriter: w, status: http.StatusOK},
		id: [1]string{h.ids.next()}, clientID: clientRequestID(r), done: ctx.Done()}
	// The answer names the request; its header value is the id's own array, not a slice made
	// for it (a Header's values are replaced or appended to, never written in place).
	w.Header()["X-Request-Id"] = c.id[:]
	// A static route needs no routing state: chi.RouteContext is nil for it, and
	// chi.URLParam "", as a route without parameters has none.
	sr := h.static[staticKey{r.Method, routePath(r)}]
	if sr == nil {
		c.routing = h.routing.Get().(*chi.Context)
		c.routing.Reset()
		c.routing.Routes = h.mux
	}
	h.route(&c.w, r.WithContext(c), sr)
	took := time.Since(start)
	var route string
	if sr != nil {
		route = sr.pattern
	} else {
		route = c.routing.RoutePattern()
	}
	h.metrics.observe(route, r.Method, c.w.status, took)
	if h.access.w != nil {
		accessLog(h.access, r.Method, route, c, start.Add(took), took)
	}
	if sr == nil {
		// As chi.Mux does with its own: a handler must not keep the routing state past its
		// return (chi.Context's Clone is for that).
		h.routing.Put(c.routing)
	}
}

// withPrincipal makes p the request's principal, in its requestContext. It sets it in place:
// code later in the request sees it, and so would a goroutine that an earlier middleware
// started with the request's context (none does). Every request has a requestContext, made
// by the handler that routes(); requireUser cannot run without one.
func withPrincipal(r *http.Request, p principal) {
	r.Context().Value(requestKey{}).(*requestContext).p = p
}

// requestFrom returns the requestContext of the request whose context ctx is; outside a
// request, an empty one.
func requestFrom(ctx context.Context) *requestContext {
	if c, ok := ctx.Value(requestKey{}).(*requestContext); ok {
		return c
	}
	return &requestContext{}
}

// requestID returns the server's id of the request whose context ctx is, or "" outside a
// request.
func requestID(ctx context.Context) string { return requestFrom(ctx).id[0] }

// appendRequestIDs appends to a log line's attributes the request's id (request_id, the
// server's) and, when the client sent one, client_request_id.
func appendRequestIDs(attrs []slog.Attr, ctx context.Context) []slog.Attr {
	c := requestFrom(ctx)
	attrs = append(attrs, slog.String("request_id", c.id[0]))
	if c.clientID != "" {
		attrs = append(attrs, slog.String("client_request_id", c.clientID))
	}
	return attrs
}

// requestIDs is the request's ids as one attribute list for a log call's arguments.
func requestIDs(ctx context.Context) slog.Attr {
	return slog.Attr{Key: "", Value: slog.GroupValue(appendRequestIDs(nil, ctx)...)}
}
