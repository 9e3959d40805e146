package api

import (
	"errors"
	"net"
	"net/http"

	"github.com/terdut-server/terdut-server/internal/store"
)

func (s *server) handleBootstrapStatus() http.Handler {
	type response struct {
		State      string `json:"state"`
		Generation int64  `json:"generation"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := s.store.Bootstrap(r.Context())
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, response{State: string(b.State), Generation: b.Generation})
	})
}

func (s *server) handleBootstrapClaim() http.Handler {
	type response struct {
		User       userJSON   `json:"user"`
		APIKey     apiKeyJSON `json:"api_key"`
		Generation int64      `json:"generation"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proof := operatorFrom(r.Context())
		res, err := s.store.Claim(r.Context(), s.operatorAudit(r, proof))
		switch {
		case errors.Is(err, store.ErrAlreadyClaimed):
			s.metrics.claims.WithLabelValues("already_completed").Inc()
		case err != nil:
			s.metrics.claims.WithLabelValues("error").Inc()
		default:
			s.metrics.claims.WithLabelValues("claimed").Inc()
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.log.InfoContext(r.Context(), "install claimed", "event", "bootstrap.claim", "outcome", outcomeSucceeded,
			requestIDs(r.Context()), "generation", res.Generation,
			"principal_id", res.Principal.ID, "remote_addr", s.clientName(r), "operator", proof)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, response{User: toUserJSON(res.Principal),
			APIKey: toAPIKeyJSON(res.Key, res.Secret), Generation: res.Generation})
	})
}

func (s *server) handleBootstrapReset() http.Handler {
	type response struct {
		State          string `json:"state"`
		Generation     int64  `json:"generation"`
		RevokedAPIKeys int64  `json:"revoked_api_keys"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proof := operatorFrom(r.Context())
		res, err := s.store.Reset(r.Context(), s.operatorAudit(r, proof), s.opts.ResetLimit)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.metrics.resets.Inc()
		s.log.WarnContext(r.Context(), "bootstrap claim reset", "event", "bootstrap.reset", "outcome", outcomeSucceeded,
			requestIDs(r.Context()), "generation", res.Generation,
			"revoked_api_keys", res.RevokedAPIKeys, "revoked_sessions", res.RevokedSessions,
			"remote_addr", s.clientName(r), "operator", proof)
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusOK, response{State: string(store.StatePending), Generation: res.Generation,
			RevokedAPIKeys: res.RevokedAPIKeys})
	})
}

// refusePending answers a sign-in refused by the gate: a page for browsers, JSON for clients.
func (s *server) refusePending(w http.ResponseWriter, r *http.Request, method string) {
	s.metrics.signinRefused.WithLabelValues(method, "bootstrap_pending").Inc()
	name := "login.password.refused"
	if method == "oidc" {
		name = "login.sso.refused"
	}
	s.refusedEvent(r, name, "bootstrap_pending")
	if wantsHTML(r) {
		w.Header().Set("Retry-After", "10")
		data := &pageData{}
		if s.openClaim() {
			data.Title, data.ClaimCommand = "terdut-server is not claimed yet", s.claimCommand()
		}
		s.renderPage(w, http.StatusServiceUnavailable, "pending.html", data)
		return
	}
	s.writeError(w, r, s.pendingError())
}

func remoteHost(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
