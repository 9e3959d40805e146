package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
)

// TestHandler_Metrics: every answer is counted under its route pattern, method and status,
// one that panicked (and got the recoverer's 500) included, and a request no route matched
// as "unmatched"; chi's URL parameters come from the handler's routing state.
func TestHandler_Metrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := newMetrics(reg, nil)
	mux := chi.NewRouter()
	mux.Use(middleware.Recoverer)
	mux.Get("/boom", func(http.ResponseWriter, *http.Request) { panic("boom") })
	mux.Route("/things/{id}", func(r chi.Router) {
		r.Get("/", func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(chi.URLParam(r, "id"))) })
	})
	h := newHandler(mux, m)

	serve := func(method, target string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(method, target, nil))
		return w
	}
	if w := serve(http.MethodGet, "/boom"); w.Code != http.StatusInternalServerError {
		t.Fatalf("GET /boom: %d, want 500", w.Code)
	}
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
