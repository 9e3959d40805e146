package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the one map of every endpoint, grouped by who may call it.
func (s *server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "No such endpoint."})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: "This endpoint does not take that method."})
	})

	// Public: probes, metrics, pages, sign-in, and the claim status.
	r.Method(http.MethodGet, "/healthz", handleHealthz())
	r.Method(http.MethodGet, "/readyz", s.handleReadyz())
	r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	r.Method(http.MethodGet, "/", s.handleHome())
	r.Method(http.MethodGet, "/login", s.handleLoginPage())
	r.Method(http.MethodGet, "/auth/oidc/login", s.handleOIDCLogin())
	r.Method(http.MethodGet, "/auth/oidc/callback", s.handleOIDCCallback())
	r.Method(http.MethodPost, "/api/auth/login", s.handleLogin())
	r.Method(http.MethodPost, "/api/auth/logout", s.handleLogout())
	r.Method(http.MethodGet, "/api/bootstrap/status", s.handleBootstrapStatus())

	// Operator token: the claim is open when no token is configured; the reset never is.
	r.Method(http.MethodPost, "/api/bootstrap", s.requireOperator(true, s.handleBootstrapClaim()))
	r.Method(http.MethodPost, "/api/bootstrap/reset", s.requireOperator(false, s.handleBootstrapReset()))

	// A session or an API key.
	r.Group(func(r chi.Router) {
		r.Use(s.requireUser)
		r.Method(http.MethodGet, "/api/me", s.handleMe())
		r.Route("/api/users/{id}", func(r chi.Router) {
			r.Use(s.requireSelfOrAdmin)
			r.Method(http.MethodPut, "/password", s.handlePasswordSet())
			r.Group(func(r chi.Router) {
				r.Use(s.refuseOthersServiceUsers)
				r.Method(http.MethodPost, "/api-keys", s.handleAPIKeyCreate())
				r.Method(http.MethodGet, "/api-keys", s.handleAPIKeyList())
				r.Method(http.MethodDelete, "/api-keys/{keyID}", s.handleAPIKeyDelete())
			})

			// Admins only.
			r.With(s.requireAdmin).Method(http.MethodDelete, "/", s.handleUserDelete())
		})
		// Admins only.
		r.With(s.requireAdmin).Method(http.MethodGet, "/api/users", s.handleUserList())
		r.With(s.requireAdmin).Method(http.MethodPost, "/api/users", s.handleUserCreate())
		r.With(s.requireAdmin).Method(http.MethodGet, "/api/audit", s.handleAudit())
	})
	h := newHandler(r, s.metrics)
	if s.opts.AccessLog {
		h.access = s.log
	}
	return h
}
