package api

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
)

// handleHealthz is liveness: the process answers. It never touches the database.
func handleHealthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// defaultReadyCacheTTL is how long a readiness check answers every /readyz (Options.ReadyCacheTTL).
const defaultReadyCacheTTL = time.Second

// notReadyReasons are the values of terdut_not_ready's reason label: why readiness fails, a
// fixed set (the detail, which names versions, SQLSTATEs and settings, goes to the log).
var notReadyReasons = []string{"database_unreachable", "schema_outdated", "schema_too_new", "database_error", "sso_wrong_issuer"}

// readiness is the last readiness check's outcome, shared by every /readyz for a while, so
// that anyone's probes cost the database at most one check each ReadyCacheTTL.
type readiness struct {
	ttl   time.Duration
	gauge *prometheus.GaugeVec // terdut_not_ready{reason}

	mu     sync.Mutex // held across a check: probes that arrive meanwhile wait for its outcome
	at     time.Time  // of the last check; zero: none yet
	ready  bool
	reason string // fixed, of notReadyReasons; empty when ready
	detail string // for the log: what failed, as a person reads it
}

func newReadiness(ttl time.Duration, reg prometheus.Registerer) *readiness {
	if ttl <= 0 {
		ttl = defaultReadyCacheTTL
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "terdut_not_ready",
		Help: "1 for the reason this replica's readiness (/readyz) fails, 0 for the others."}, []string{"reason"})
	for _, r := range notReadyReasons {
		g.WithLabelValues(r)
	}
	reg.MustRegister(g)
	return &readiness{ttl: ttl, gauge: g}
}

// handleReadyz is readiness: the database answers, its schema is the one this binary ships,
// and single sign-on, when on, is not known to have a wrong issuer. It is on the public port,
// for the kubelet's probe, so it says only {"status": "ok"} (200) or {"status":
// "unavailable"} (503): what failed (schema versions, SQLSTATEs, settings) goes to the log,
// once each time it changes, and to terdut_not_ready{reason}. A check answers every probe for
// ReadyCacheTTL, and probes that arrive during one wait for it. A discovery document naming
// endpoints single sign-on will not use keeps the server ready, and a provider that is merely
// down, slow or hung does not count: sign-ins retry it. It never waits for the provider: it
// reads what the last discovery found, and while that was a misconfiguration it starts another
// in the background (no sooner than the retry delay), so readiness recovers once the provider
// is fixed. It does not depend on the claim state.
func (s *server) handleReadyz() http.Handler {
	type response struct {
		Status string `json:"status"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.ready(r.Context()) {
			writeJSON(w, http.StatusServiceUnavailable, response{Status: "unavailable"})
			return
		}
		writeJSON(w, http.StatusOK, response{Status: "ok"})
	})
}

// ready returns the outcome of the last check, checking again when it is older than the TTL.
func (s *server) ready(ctx context.Context) bool {
	rd := s.readiness
	rd.mu.Lock()
	defer rd.mu.Unlock()
	if !rd.at.IsZero() && time.Since(rd.at) < rd.ttl {
		return rd.ready
	}
	// The check is every waiting probe's: a client that hangs up does not cut it short.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	reason, detail := s.checkReady(ctx)
	rd.at = time.Now()
	if reason != rd.reason || detail != rd.detail || rd.ready != (reason == "") {
		switch {
		case reason != "":
			s.log.Warn("not ready: /readyz answers 503", "reason", reason, "detail", detail)
		case rd.reason != "":
			s.log.Info("ready again: /readyz answers 200")
		}
		for _, r := range notReadyReasons {
			v := 0.0
			if r == reason {
				v = 1
			}
			rd.gauge.WithLabelValues(r).Set(v)
		}
	}
	rd.ready, rd.reason, rd.detail = reason == "", reason, detail
	return rd.ready
}

// checkReady checks readiness once: "" when ready, else the reason (of notReadyReasons) and
// what failed, as a person reads it.
func (s *server) checkReady(ctx context.Context) (reason, detail string) {
	if err := s.store.Ping(ctx); err != nil {
		return "database_unreachable", "database unreachable: " + err.Error()
	}
	if err := s.store.CheckSchema(ctx); err != nil {
		return s.schemaReason(err)
	}
	if s.oidc != nil {
		s.oidc.Recheck()
		if e := s.oidc.Misconfiguration(); e != nil && s.oidc.FailsReadiness() {
			return "sso_wrong_issuer", e.Message
		}
	}
	return "", ""
}

// schemaReason is why readiness fails when the schema check failed: an outdated or unknown
// schema as such, the database out of reach as such, and any other database error by its
// SQLSTATE and cause (a statement prepared by another client on a pooled connection is 42P05
// or 26000: a transaction-mode pooler without --database-pooler).
func (s *server) schemaReason(err error) (reason, detail string) {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, store.ErrSchemaOutdated):
		return "schema_outdated", "database schema is not current: " + err.Error()
	case errors.Is(err, store.ErrSchemaTooNew):
		return "schema_too_new", "database schema is not current: " + err.Error()
	case errors.Is(err, store.ErrUnavailable):
		return "database_unreachable", "database unreachable: " + err.Error()
	case errors.As(err, &pgErr):
		detail = "database error reading the schema version (SQLSTATE " + pgErr.Code + "): " + err.Error()
		if pgErr.Code == "42P05" || pgErr.Code == "26000" {
			detail += ": prepared statements collide; behind a transaction-mode pooler, set --database-pooler=transaction"
		}
		return "database_error", detail
	}
	return "database_error", "database error reading the schema version: " + err.Error()
}
