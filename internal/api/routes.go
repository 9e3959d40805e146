package api

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes is the one map of every endpoint, grouped by who may call it. It returns one
// handler for everything unless split is true; then people's handler answers the operator's
// endpoints 404, and the operator's handler answers only them (and everything else 404).
func (s *server) routes(split bool) (people, operator http.Handler) {
	s.split = split
	r := s.newRouter()

	// Public: probes, metrics, pages and sign-in.
	r.Method(http.MethodGet, "/healthz", handleHealthz())
	r.Method(http.MethodGet, "/readyz", s.handleReadyz())
	if !s.opts.MetricsOwnPort {
		r.Method(http.MethodGet, "/metrics", promhttp.HandlerFor(s.opts.Gatherer, promhttp.HandlerOpts{}))
	}
	r.Method(http.MethodGet, "/", s.handleHome())
	r.Method(http.MethodGet, "/login", s.handleLoginPage())
	r.Method(http.MethodGet, "/auth/oidc/login", s.handleOIDCLogin())
	r.Method(http.MethodGet, "/auth/oidc/callback", s.handleOIDCCallback())
	r.Method(http.MethodPost, "/api/auth/login", s.handleLogin())
	r.Method(http.MethodPost, "/api/auth/logout", s.handleLogout())
	r.Method(http.MethodPost, "/api/password-link", s.requirePasswordLogin(s.handlePasswordLinkRedeem()))
	r.Method(http.MethodGet, setPasswordPath, s.handleSetPasswordPage())
	r.Method(http.MethodPost, setPasswordPath, s.handleSetPasswordForm())

	// The operator's: the claim status (public), then, with the operator token, the claim
	// (open when no token is configured) and the reset (never open). With split, on a port
	// of their own, so that a NetworkPolicy can admit the operator alone to them.
	op := r
	if split {
		op = s.newRouter()
	}
	op.Method(http.MethodGet, "/api/bootstrap/status", s.handleBootstrapStatus())
	op.Method(http.MethodPost, "/api/bootstrap", s.requireOperator(true, s.handleBootstrapClaim()))
	op.Method(http.MethodPost, "/api/bootstrap/reset", s.requireOperator(false, s.handleBootstrapReset()))

	// An integration's key, and nothing else: Alertmanager's webhook.
	r.Method(http.MethodPost, "/api/webhooks/alertmanager", s.handleAlertmanagerWebhook())

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
			r.With(s.requireAdmin, s.requirePasswordLogin).Method(http.MethodPost, "/password-link", s.handlePasswordLinkCreate())
		})
		// Incidents and alerts: any signed-in person.
		r.Method(http.MethodGet, "/api/alerts", s.handleAlertList())
		r.Method(http.MethodGet, "/api/alerts/{id}", s.handleAlertGet())
		r.Method(http.MethodGet, "/api/incidents", s.handleIncidentList())
		r.Route("/api/incidents/{id}", func(r chi.Router) {
			r.Method(http.MethodGet, "/", s.handleIncidentGet())
			r.Method(http.MethodGet, "/timeline", s.handleIncidentTimeline())
			r.Method(http.MethodPost, "/acknowledge", s.handleAcknowledge())
			r.Method(http.MethodDelete, "/acknowledge", s.handleUnacknowledge())
			r.Method(http.MethodPost, "/resolve", s.handleResolve())
			r.Method(http.MethodPost, "/assign", s.handleAssign())
			r.Method(http.MethodPost, "/snooze", s.handleSnooze())
			r.Method(http.MethodDelete, "/snooze", s.handleUnsnooze())
			r.Method(http.MethodPost, "/archive", s.handleArchive())
			r.Method(http.MethodDelete, "/archive", s.handleUnarchive())
			r.Method(http.MethodPost, "/notes", s.handleNoteAdd())
			r.Method(http.MethodDelete, "/notes/{eventID}", s.handleNoteDelete())
		})
		// The on-call schedule: anyone reads it; a member changes only their own days.
		r.Method(http.MethodGet, "/api/schedule", s.handleScheduleList())
		r.Method(http.MethodGet, "/api/schedule/current", s.handleScheduleCurrent())
		r.Method(http.MethodPost, "/api/schedule", s.handleScheduleAssign())
		r.Method(http.MethodDelete, "/api/schedule/{id}", s.handleScheduleDelete())
		// Statistics: any signed-in person.
		r.Method(http.MethodGet, "/api/stats/alerts", s.handleAlertStats())
		r.Method(http.MethodGet, "/api/stats/alerts/top", s.handleTopAlerts())
		r.Method(http.MethodGet, "/api/stats/alerts/by-hour", s.handleAlertsByHour())
		r.Method(http.MethodGet, "/api/stats/alerts/by-day", s.handleAlertsByDay())
		r.Method(http.MethodGet, "/api/stats/incidents", s.handleIncidentStats())
		// The roster for members (whom to assign), the full list for admins.
		r.Method(http.MethodGet, "/api/users", s.handleUserList())

		// Admins only.
		r.Route("/api/integrations", func(r chi.Router) {
			r.Use(s.requireAdmin)
			r.Method(http.MethodGet, "/", s.handleIntegrationList())
			r.Method(http.MethodPost, "/", s.handleIntegrationCreate())
			r.Method(http.MethodDelete, "/{id}", s.handleIntegrationDelete())
			r.Method(http.MethodPost, "/{id}/keys", s.handleIntegrationKeyCreate())
			r.Method(http.MethodDelete, "/{id}/keys/{keyID}", s.handleIntegrationKeyDelete())
		})
		r.With(s.requireAdmin).Method(http.MethodPost, "/api/users", s.handleUserCreate())
		r.With(s.requireAdmin).Method(http.MethodGet, "/api/audit", s.handleAudit())
	})
	if !split {
		return s.handler(r), nil
	}
	return s.handler(r), s.handler(op)
}

// webhookPort is the handler of a port for Alertmanager's webhook alone (--webhook-listen), so
// that a NetworkPolicy can admit Alertmanager's namespace to it and to nothing else. No proxy
// stands in front of it: headers that name a client (X-Forwarded-For, X-Real-IP, Forwarded)
// are dropped, so a sender there never names an address but its own.
func (s *server) webhookPort() http.Handler {
	r := s.newRouter()
	r.Method(http.MethodPost, "/api/webhooks/alertmanager", s.handleAlertmanagerWebhook())
	h := s.handler(r)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, name := range []string{"X-Forwarded-For", "X-Real-Ip", "Forwarded"} {
			r.Header.Del(name)
		}
		h.ServeHTTP(w, r)
	})
}

// NewMetricsHandler returns the handler of a port for metrics alone (Options.MetricsOwnPort):
// GET /metrics from g, and every other path the JSON 404 of the other ports. Its requests are
// neither counted in the metrics nor logged: a scrape every few seconds would drown the rest.
func NewMetricsHandler(g prometheus.Gatherer) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "No such endpoint: this port serves GET /metrics alone.", Code: "not_found"})
	})
	return mux
}

// newRouter returns a router that answers unknown paths and methods with the JSON errors.
func (s *server) newRouter() *chi.Mux {
	r := chi.NewRouter() // the handler recovers a panic (see handler.route)
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "No such endpoint."})
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, &apiError{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: "This endpoint does not take that method."})
	})
	return r
}

// handler wraps a router in what every request of either port gets: its context, the
// metrics and the access log.
func (s *server) handler(r *chi.Mux) http.Handler {
	h := newHandler(r, s.metrics, s.log)
	h.access = newAccessWriter(s.opts.AccessLog)
	return h
}
