package api

import (
	"context"
	"net/http"
	"time"
)

// handleHealthz is liveness: the process answers. It never touches the database.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// handleReadyz is readiness: the database answers, its schema is the one this binary ships,
// and single sign-on, when on, is not known to have a wrong issuer. A discovery document
// naming endpoints single sign-on will not use is reported in "sso" but keeps the server
// ready, and a provider that is merely down, slow or hung does not count: sign-ins retry it.
// It never waits for the provider: it reads what the last discovery found, and while that was
// a misconfiguration it starts another in the background (no sooner than the retry delay),
// so readiness recovers once the provider is fixed. It does not depend on the claim state.
func (s *server) handleReadyz() http.Handler {
	type response struct {
		Status string `json:"status"`
		Reason string `json:"reason,omitempty"`
		// SSO is why single sign-on is misconfigured, when it is; it fails readiness only
		// for a wrong --oidc-issuer.
		SSO string `json:"sso,omitempty"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.store.Ping(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, response{Status: "unavailable", Reason: "database unreachable"})
			return
		}
		if err := s.store.CheckSchema(ctx); err != nil {
			writeJSON(w, http.StatusServiceUnavailable, response{Status: "unavailable", Reason: "database schema is not current"})
			return
		}
		resp := response{Status: "ok"}
		if s.oidc != nil {
			s.oidc.Recheck()
			if e := s.oidc.Misconfiguration(); e != nil {
				resp.SSO = e.Message
				if s.oidc.FailsReadiness() {
					writeJSON(w, http.StatusServiceUnavailable, response{Status: "unavailable", Reason: e.Message, SSO: e.Message})
					return
				}
			}
		}
		writeJSON(w, http.StatusOK, resp)
	})
}
