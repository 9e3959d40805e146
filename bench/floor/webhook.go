package main

import (
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// The floor's POST /api/webhooks/alertmanager: the least a correct receiver of Alertmanager's
// webhook does. It reads the body (bounded as the server bounds it), decodes it into the shape
// Alertmanager sends, refuses what is not version 4 or an alert without fingerprint, status or
// startsAt, keeps one copy of each fingerprint (the newest), and writes the alerts with one
// statement: an upsert by (integration, fingerprint) into floorAlertsTable, shaped like the
// server's alerts table, whose integration is the one of the Bearer key (SHA-256, as the
// server stores it; no live key: 401). No occurrence, incident, event, lock or metric.

// floorAlertsTable is the table the bench makes for the floor: CREATE TABLE ... (LIKE alerts
// INCLUDING ALL) with alerts' foreign key to integrations.
const floorAlertsTable = "bench_floor_alerts"

// webhookMaxBytes is the server's default bound on a notification's body.
const webhookMaxBytes = 32 << 20

const upsertSQL = `WITH k AS (
		SELECT integration_id FROM integration_keys WHERE key_hash = $1 AND revoked_at IS NULL
	), up AS (
		INSERT INTO ` + floorAlertsTable + ` AS a (integration_id, fingerprint, name, status, labels, annotations,
			starts_at, ends_at, generator_url, received_at, resolution_source)
		SELECT k.integration_id, x.fingerprint, x.name, x.status, x.labels, x.annotations, x.starts_at, x.ends_at,
			x.generator_url, now(), CASE WHEN x.status = 'resolved' THEN 'alertmanager' END
		FROM k, ROWS FROM (unnest($2::text[]), unnest($3::text[]), unnest($4::text[]), unnest($5::jsonb[]),
			unnest($6::jsonb[]), unnest($7::timestamptz[]), unnest($8::timestamptz[]), unnest($9::text[]))
			AS x(fingerprint, name, status, labels, annotations, starts_at, ends_at, generator_url)
		ON CONFLICT (integration_id, fingerprint) DO UPDATE SET name = excluded.name, status = excluded.status,
			labels = excluded.labels, annotations = excluded.annotations, starts_at = excluded.starts_at,
			ends_at = excluded.ends_at, generator_url = excluded.generator_url, received_at = excluded.received_at,
			resolution_source = excluded.resolution_source
		WHERE excluded.starts_at >= a.starts_at
		RETURNING 1
	)
	SELECT (SELECT integration_id FROM k), (SELECT count(*) FROM up)`

type notification struct {
	Version string  `json:"version"`
	Alerts  []alert `json:"alerts"`
}

type alert struct {
	Status       string            `json:"status"`
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations"`
	StartsAt     time.Time         `json:"startsAt"`
	EndsAt       time.Time         `json:"endsAt"`
	GeneratorURL string            `json:"generatorURL"`
	Fingerprint  string            `json:"fingerprint"`
}

func webhook(pool *pgxpool.Pool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || token == "" {
			writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "unauthorized"})
			return
		}
		var n notification
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, webhookMaxBytes)).Decode(&n); err != nil || n.Version != "4" || n.Alerts == nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"code": "invalid_notification"})
			return
		}
		for _, a := range n.Alerts {
			if a.Fingerprint == "" || a.StartsAt.IsZero() || a.Status != "firing" && a.Status != "resolved" {
				writeJSON(w, http.StatusBadRequest, map[string]string{"code": "invalid_alert"})
				return
			}
		}
		// One row may be written once a statement: the newest copy of each fingerprint, in
		// order of fingerprint (concurrent notifications then lock rows in one order).
		slices.SortStableFunc(n.Alerts, func(a, b alert) int {
			if c := strings.Compare(a.Fingerprint, b.Fingerprint); c != 0 {
				return c
			}
			return b.StartsAt.Compare(a.StartsAt)
		})
		alerts := slices.CompactFunc(n.Alerts, func(a, b alert) bool { return a.Fingerprint == b.Fingerprint })
		var fingerprint, name, status, labels, annotations, generatorURL []string
		var starts []time.Time
		var ends []*time.Time
		for _, a := range alerts {
			l, err := json.Marshal(a.Labels)
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"code": "internal"})
				return
			}
			an, err := json.Marshal(a.Annotations)
			if err != nil {
				writeJSON(w, http.StatusInternalServerError, map[string]string{"code": "internal"})
				return
			}
			var end *time.Time
			if a.Status == "resolved" {
				end = &a.EndsAt
			}
			fingerprint, name, status = append(fingerprint, a.Fingerprint), append(name, a.Labels["alertname"]), append(status, a.Status)
			labels, annotations = append(labels, nonNull(l)), append(annotations, nonNull(an))
			starts, ends, generatorURL = append(starts, a.StartsAt), append(ends, end), append(generatorURL, a.GeneratorURL)
		}
		sum := sha256.Sum256([]byte(token))
		var integration *int64
		var written int
		err := pool.QueryRow(r.Context(), upsertSQL, sum[:], fingerprint, name, status, labels, annotations, starts, ends,
			generatorURL).Scan(&integration, &written)
		switch {
		case err != nil:
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"code": "unavailable"})
		case integration == nil:
			writeJSON(w, http.StatusUnauthorized, map[string]string{"code": "unauthorized"})
		default:
			writeJSON(w, http.StatusOK, map[string]any{"status": "stored", "alerts": len(n.Alerts)})
		}
	}
}

// nonNull is a JSON object for a map the body left out (json.Marshal writes a nil map as null).
func nonNull(b []byte) string {
	if string(b) == "null" {
		return "{}"
	}
	return string(b)
}
