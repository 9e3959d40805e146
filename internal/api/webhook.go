package api

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terdut-server/terdut-server/internal/store"
)

// POST /api/webhooks/alertmanager takes Alertmanager's webhook (version 4) from an integration's
// key, and no other credential. Alertmanager retries a 5xx and a connection error, and never a
// 4xx: so the answer is 2xx only once the notification is committed, 503 for anything that may
// pass, and 4xx only for what sending again cannot fix (a wrong key, a body that is not
// Alertmanager's), with nothing stored from a refused body.

// DefaultWebhookMaxBytes bounds a notification's body unless Options.WebhookMaxBytes says
// otherwise: Alertmanager sends a whole group in one body (2,000 alerts made 0.56 MB).
const DefaultWebhookMaxBytes = 32 << 20

// Bounds of what one alert may carry: values past their bound are cut (the alert is kept), more
// labels or annotations than maxAlertPairs refuse the body.
const (
	maxAlertPairs       = 256
	maxLabelNameBytes   = 256
	maxLabelValueBytes  = 4 << 10
	maxAnnotationBytes  = 64 << 10
	maxGroupKeyBytes    = 8 << 10
	maxFingerprintBytes = 128
	maxGeneratorURL     = 4 << 10
	webhookAttempts     = 3
	// preAuthBodyBytes bounds what of a body is read before its key is checked (a body that
	// declares no more; 50 alerts as node-exporter's are about 27 KiB): no more than the
	// server takes of headers (MaxHeaderBytes), and less than net/http itself reads of a
	// refused request's body to keep its connection open (256 KiB). A larger body is read
	// only for a live key.
	preAuthBodyBytes = 64 << 10
)

// amNotification is the webhook's body as Alertmanager sends it; fields it may add are ignored.
type amNotification struct {
	Version         string            `json:"version"`
	GroupKey        string            `json:"groupKey"`
	TruncatedAlerts int               `json:"truncatedAlerts"`
	Status          string            `json:"status"`
	GroupLabels     map[string]string `json:"groupLabels"`
	CommonLabels    map[string]string `json:"commonLabels"`
	Alerts          []amAlert         `json:"alerts"`
}

type amAlert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

func (s *server) handleAlertmanagerWebhook() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		outcome := s.receiveNotification(w, r)
		s.metrics.webhookNotifications.WithLabelValues(outcome).Inc()
		s.metrics.webhookDuration.Observe(time.Since(start).Seconds())
	})
}

// receiveNotification answers one delivery and returns its outcome for the metrics.
//
// A body sent again byte for byte, just applied, is answered from its SHA-256 without being
// decoded (store.ReplayedBody): Alertmanager re-sends each snapshot as it wrote it. A body that
// declares at most preAuthBodyBytes, sent with something shaped as an integration's key, is
// read before that key is checked, so that the key and the body's replay are read in one round
// trip (store.AuthenticateDelivery); a larger one, or one of no declared length, only once the
// key is known.
func (s *server) receiveNotification(w http.ResponseWriter, r *http.Request) string {
	token, _ := bearerToken(r)
	var body, sum []byte
	var bad *apiError
	early := store.IsIntegrationKey(token) && r.ContentLength > 0 && r.ContentLength <= min(preAuthBodyBytes, s.webhookMaxBytes())
	if early {
		if body, bad = s.readBody(w, r); bad == nil {
			sum = sha256Of(body)
		}
	}
	ctx := r.Context()
	if bad != nil {
		// The body could not be read, and its sender may be gone: the key is checked even so,
		// to answer and record the refusal as for a body read after it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
	}
	caller, alerts, replay, err := s.store.AuthenticateDelivery(ctx, token, sum)
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.refusedEvent(r, "webhook.alertmanager", "invalid_integration_key")
		s.writeError(w, r, &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
			Message: "Send an integration's key: Authorization: Bearer terdut_am_… (an admin makes one with POST /api/integrations)."})
		return "unauthorized"
	case err != nil:
		s.writeError(w, r, err)
		return failedOutcome(err)
	}
	if !early {
		if body, bad = s.readBody(w, r); bad == nil {
			sum = sha256Of(body)
			if alerts, replay, err = s.store.ReplayedBody(r.Context(), caller, sum); err != nil {
				return s.notStored(w, r, err)
			}
		}
	}
	if replay {
		return s.stored(w, store.IngestResult{Replay: true}, alerts)
	}
	var n store.Notification
	if bad == nil {
		n, bad = parseNotification(body)
		n.BodySum = sum
	}
	if bad != nil {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 5*time.Second)
		defer cancel()
		if err := s.store.RecordIntegrationError(ctx, caller.IntegrationID, fmt.Sprintf("%d %s", bad.Status, bad.Message)); err != nil {
			s.log.WarnContext(r.Context(), "could not record an integration's refused delivery", "integration_id", caller.IntegrationID, "err", err)
		}
		s.writeError(w, r, bad)
		if bad.Status == http.StatusRequestEntityTooLarge {
			return "too_large"
		}
		return "invalid"
	}
	var res store.IngestResult
	for attempt := 1; ; attempt++ {
		res, err = s.store.Ingest(r.Context(), caller, n)
		if err == nil || attempt == webhookAttempts || !retryable(err) {
			break
		}
	}
	if err != nil {
		return s.notStored(w, r, err)
	}
	return s.stored(w, res, len(n.Alerts))
}

// notStored answers a notification the store could not take (err), and returns the outcome:
// 503 for what may pass, so that Alertmanager sends it again.
func (s *server) notStored(w http.ResponseWriter, r *http.Request, err error) string {
	if (retryable(err) || errors.Is(err, store.ErrUnavailable)) && !errors.Is(err, context.Canceled) {
		s.writeError(w, r, &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "The notification could not be stored now; Alertmanager will send it again.", RetryAfter: time.Second})
		return "unavailable"
	}
	s.writeError(w, r, err)
	return failedOutcome(err)
}

// stored answers a notification of alerts alerts that the store applied (res), counting its
// alerts by outcome, and returns the outcome.
func (s *server) stored(w http.ResponseWriter, res store.IngestResult, alerts int) string {
	replayed := 0
	if res.Replay {
		replayed = alerts
	}
	for outcome, count := range map[string]int{"new": res.New, "refreshed": res.Refreshed, "resolved": res.Stopped,
		"stale": res.Stale, "replayed": replayed} {
		if count > 0 {
			s.metrics.webhookAlerts.WithLabelValues(outcome).Add(float64(count))
		}
	}
	body := struct {
		Status     string `json:"status"`
		Alerts     int    `json:"alerts"`
		IncidentID int64  `json:"incident_id,omitempty"`
	}{Status: "stored", Alerts: alerts, IncidentID: res.IncidentID}
	writeJSON(w, http.StatusOK, body)
	return "stored"
}

// retryable reports a failure that the same transaction, tried again, may not meet: a
// serialization failure or a deadlock Postgres broke.
// failedOutcome is the outcome of a delivery that failed with err: canceled when Alertmanager
// went away first (its timeout, or a shutdown: it sends the notification again), unavailable
// when the database is out of reach, else error.
func failedOutcome(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	}
	return "error"
}

func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// readBody reads the body: a 413 past the bound, a 400 if it cannot be read to its end.
func (s *server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	limit := s.webhookMaxBytes()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var maxErr *http.MaxBytesError
	switch {
	case errors.As(err, &maxErr):
		return nil, &apiError{Status: http.StatusRequestEntityTooLarge, Code: "body_too_large",
			Message: fmt.Sprintf("The notification is larger than %d bytes: lower max_alerts in Alertmanager's receiver, or raise --webhook-max-bytes.", limit)}
	case err != nil:
		return nil, errBadRequest("invalid_body", "The body could not be read to its end.")
	}
	return body, nil
}

// sha256Of is the SHA-256 of a body as it came, which store.AuthenticateDelivery and
// store.ReplayedBody look up and store.Notification.BodySum records.
func sha256Of(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}

func (s *server) webhookMaxBytes() int64 {
	if s.opts.WebhookMaxBytes <= 0 {
		return DefaultWebhookMaxBytes
	}
	return s.opts.WebhookMaxBytes
}

// parseNotification checks the body: a 400 for anything that is not Alertmanager's webhook of
// version 4, with a message that quotes nothing of the body.
func parseNotification(body []byte) (store.Notification, *apiError) {
	if !utf8.Valid(body) {
		return store.Notification{}, errBadRequest("invalid_body", "The body is not valid UTF-8.")
	}
	var am amNotification
	if err := decodeNotification(body, &am); err != nil {
		return store.Notification{}, errBadRequest("invalid_json", "The body is not Alertmanager's webhook JSON.")
	}
	if am.Version != "4" {
		return store.Notification{}, errBadRequest("unsupported_version",
			"Only Alertmanager's webhook version 4 is understood; send its default body (no custom payload template).")
	}
	if am.GroupKey == "" || len(am.GroupKey) > maxGroupKeyBytes || am.Alerts == nil || am.TruncatedAlerts < 0 {
		return store.Notification{}, errBadRequest("invalid_notification",
			"The notification lacks groupKey or alerts, as Alertmanager's version 4 webhook always has them.")
	}
	n := store.Notification{GroupKey: am.GroupKey, Status: am.Status, TruncatedAlerts: am.TruncatedAlerts,
		GroupLabels: cutPairs(am.GroupLabels, maxLabelValueBytes), CommonLabels: cutPairs(am.CommonLabels, maxLabelValueBytes),
		Alerts: make([]store.NotifiedAlert, 0, len(am.Alerts))}
	for i, a := range am.Alerts {
		switch {
		case a.Status != store.AlertFiring && a.Status != store.AlertResolved:
			return n, errBadRequest("invalid_alert", fmt.Sprintf("Alert %d: status must be firing or resolved.", i))
		case a.Fingerprint == "" || len(a.Fingerprint) > maxFingerprintBytes:
			return n, errBadRequest("invalid_alert", fmt.Sprintf("Alert %d: a fingerprint of 1 to %d bytes is required.", i, maxFingerprintBytes))
		case a.StartsAt.IsZero():
			return n, errBadRequest("invalid_alert", fmt.Sprintf("Alert %d: startsAt is required.", i))
		case len(a.Labels) > maxAlertPairs || len(a.Annotations) > maxAlertPairs || len(am.GroupLabels) > maxAlertPairs:
			return n, errBadRequest("invalid_alert", fmt.Sprintf("Alert %d: at most %d labels and %d annotations.", i, maxAlertPairs, maxAlertPairs))
		}
		for k := range a.Labels {
			if len(k) > maxLabelNameBytes {
				return n, errBadRequest("invalid_alert", fmt.Sprintf("Alert %d: a label name is at most %d bytes.", i, maxLabelNameBytes))
			}
		}
		end := a.EndsAt
		if a.Status == store.AlertFiring {
			end = time.Time{}
		}
		n.Alerts = append(n.Alerts, store.NotifiedAlert{Fingerprint: a.Fingerprint, Status: a.Status,
			Labels: cutPairs(a.Labels, maxLabelValueBytes), Annotations: cutPairs(a.Annotations, maxAnnotationBytes),
			StartsAt: a.StartsAt, EndsAt: end, GeneratorURL: cut(a.GeneratorURL, maxGeneratorURL)})
	}
	return n, nil
}

// cutPairs cuts each value of m to limit bytes (on a rune boundary, "…" after), in place: m is
// the decoded body's own. A map the body left out is an empty one.
func cutPairs(m map[string]string, limit int) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	for k, v := range m {
		if len(v) > limit {
			m[k] = cut(v, limit)
		}
	}
	return m
}

func cut(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := limit - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
