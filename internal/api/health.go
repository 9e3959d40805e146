package api

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terdut-server/terdut-server/internal/store"
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
			writeJSON(w, http.StatusServiceUnavailable, response{Status: "unavailable", Reason: s.schemaReason(err)})
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

// schemaReason is what /readyz says when the schema check failed: an outdated or unknown
// schema as such, the database out of reach as such, and any other database error by its
// SQLSTATE, logged with its cause (a statement prepared by another client on a pooled
// connection is 42P05 or 26000: a transaction-mode pooler without --database-pooler).
func (s *server) schemaReason(err error) string {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, store.ErrSchemaOutdated), errors.Is(err, store.ErrSchemaTooNew):
		return "database schema is not current: " + err.Error()
	case errors.Is(err, store.ErrUnavailable):
		return "database unreachable"
	case errors.As(err, &pgErr):
		s.log.Warn("readiness: reading the schema version failed", "err", err)
		reason := "database error reading the schema version (SQLSTATE " + pgErr.Code + ")"
		if pgErr.Code == "42P05" || pgErr.Code == "26000" {
			reason += ": prepared statements collide; behind a transaction-mode pooler, set --database-pooler=transaction"
		}
		return reason
	}
	s.log.Warn("readiness: reading the schema version failed", "err", err)
	return "database error reading the schema version (see the server's log)"
}
