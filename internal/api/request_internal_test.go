package api

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
)

// TestHandler_Metrics: every answer is counted under its route pattern, method and status,
// one that panicked (and got the handler's 500, its stack logged) included, and a request no
// route matched as "unmatched"; chi's URL parameters come from the handler's routing state.
func TestHandler_Metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, nil)
	mux := chi.NewRouter()
	mux.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.Route("/things/{id}", func(r chi.Router) {
		r.Get("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(chi.URLParam(r, "id"))) })
	})
	var logs bytes.Buffer
	h := newHandler(mux, m, slog.New(slog.NewJSONHandler(&logs, nil)))

	serve := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w
	}
	if w := serve(http.MethodGet, "/boom"); w.Code != http.StatusInternalServerError {
		t.Fatalf("GET /boom: %d, want 500", w.Code)
	}
	if line := logs.String(); !strings.Contains(line, `"msg":"handler panicked","panic":"boom","stack":"goroutine `) ||
		!strings.Contains(line, `"request_id":`) {
		t.Errorf("the panic's log line: %s", line)
	}
	func() {
		defer func() {
			if v := recover(); v != http.ErrAbortHandler { //nolint:errorlint // the sentinel itself
				t.Errorf("a handler's http.ErrAbortHandler: recovered %v, want it to go on up", v)
			}
		}()
		mux.Get("/abort", func(http.ResponseWriter, *http.Request) { panic(http.ErrAbortHandler) })
		newHandler(mux, m, slog.New(slog.DiscardHandler)).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/abort", nil))
	}()
	for _, id := range []string{"1", "2"} {
		if w := serve(http.MethodGet, "/things/"+id+"/"); w.Code != http.StatusOK || w.Body.String() != id {
			t.Fatalf("GET /things/%s/: %d %q, want 200 %q", id, w.Code, w.Body, id)
		}
	}
	serve(http.MethodGet, "/nowhere")
	for _, c := range []struct {
		route, method, status string
		want                  float64
	}{
		{"/boom", "GET", "500", 1},
		{"/things/{id}", "GET", "200", 2},
		{"unmatched", "GET", "404", 1},
	} {
		if got := requestCount(t, m.http, c.route, c.method, c.status); got != c.want {
			t.Errorf("requests{route=%q, method=%q, status=%q}: %v, want %v", c.route, c.method, c.status, got, c.want)
		}
	}
}

// TestHandler_ContextDone: a handler's context ends when the request's does, and is the
// request's in every other way: its Done (which the requestContext keeps) is the request's,
// its Err follows, and a context made from it is cancelled with it, as pgx's statements are.
func TestHandler_ContextDone(t *testing.T) {
	mux := chi.NewRouter()
	h := newHandler(mux, newMetrics(prometheus.NewRegistry(), nil), slog.New(slog.DiscardHandler))
	var c *requestContext
	mux.Get("/ctx", func(_ http.ResponseWriter, r *http.Request) { c = requestFrom(r.Context()) })
	base, stop := context.WithCancel(context.Background())
	defer stop()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(base, http.MethodGet, "/ctx", nil))
	if c == nil || c.Done() != base.Done() {
		t.Fatalf("the handler's context's Done is not the request's")
	}

	entered := make(chan struct{})
	result := make(chan string, 1)
	mux.Get("/wait", func(_ http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		child, stop := context.WithCancel(ctx)
		defer stop()
		close(entered)
		select { // the request's cancellation reaches a context made from its own
		case <-child.Done():
		case <-time.After(10 * time.Second):
			result <- "a context made from the handler's was not cancelled with the request"
			return
		}
		result <- fmt.Sprint(ctx.Err(), " ", child.Err())
	})
	parent, cancel := context.WithCancel(context.Background())
	go h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequestWithContext(parent, http.MethodGet, "/wait", nil))
	<-entered
	cancel()
	if got, want := <-result, "context canceled context canceled"; got != want {
		t.Fatalf("after the request's cancellation: %q, want Err %q", got, want)
	}
}
