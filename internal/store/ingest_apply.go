package store

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Incident timeline event types (../shared/incident-contract.md). New ones may be added: the
// client renders a type it does not know generically.
const (
	EventTriggered      = "triggered"
	EventAlertAdded     = "alert_added"
	EventAlertsAdded    = "alerts_added" // a storm's joins past the first 200, one per notification
	EventAlertResolved  = "alert_resolved"
	EventAlertsResolved = "alerts_resolved" // a large incident's resolutions, one per notification
	EventAcknowledged   = "acknowledged"
	EventUnacknowledged = "unacknowledged"
	EventAssigned       = "assigned"
	EventSnoozed        = "snoozed"
	EventUnsnoozed      = "unsnoozed"
	EventResolved       = "resolved"
	EventNote           = "note"
)

// incidentEvent is a timeline row to write.
type incidentEvent struct {
	incidentID int64
	typ        string
	userID     int64
	username   string
	alertID    int64
	detail     string
}

func appendIncidentEvent(ctx context.Context, tx pgx.Tx, e incidentEvent) error {
	_, err := tx.Exec(ctx, `INSERT INTO incident_events (incident_id, type, user_id, username, alert_id, detail)
		VALUES ($1, $2, $3, $4, $5, $6)`, e.incidentID, e.typ, nullID(e.userID), e.username, nullID(e.alertID), e.detail)
	return wrap(err, "write incident event")
}

// appendAlertEvents writes one event of typ, with detail, for each alert, in one statement.
func appendAlertEvents(ctx context.Context, tx pgx.Tx, incidentID int64, typ, detail string, alertIDs []int64) error {
	if len(alertIDs) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `INSERT INTO incident_events (incident_id, type, alert_id, detail)
		SELECT $1, $2, a, $4 FROM pg_catalog.unnest($3::bigint[]) WITH ORDINALITY AS x(a, n) ORDER BY n`,
		incidentID, typ, alertIDs, detail)
	return wrap(err, "write incident events")
}

// resolutionEvents writes the events of an incident's alerts that stopped firing: one
// alert_resolved each (with detail) while the incident holds at most 200 alerts, else one
// alerts_resolved that says how many (summary).
func resolutionEvents(ctx context.Context, tx pgx.Tx, incidentID int64, alertIDs []int64, detail, summary string) error {
	var count int
	if err := tx.QueryRow(ctx, `SELECT alert_count FROM incidents WHERE id = $1`, incidentID).Scan(&count); err != nil {
		return wrap(err, "read incident")
	}
	if count <= maxIndividualAlertEvents {
		return appendAlertEvents(ctx, tx, incidentID, EventAlertResolved, detail, alertIDs)
	}
	return appendIncidentEvent(ctx, tx, incidentEvent{incidentID: incidentID, typ: EventAlertsResolved, detail: summary})
}

// joinIncident adds the occurrences that began firing to the open incident, raises its
// severity, and writes their events: one each for the first 200 of the incident, then one a
// notification that says how many more joined.
func joinIncident(ctx context.Context, tx pgx.Tx, open *openIncidentRow, groupKey string, alerts []NotifiedAlert,
	ids []int64, joins, reopen []int) error {
	if len(joins)+len(reopen) == 0 {
		return nil
	}
	var alertIDs []int64
	var starts []time.Time
	rank, severity := open.severityRank, ""
	for _, i := range joins {
		alertIDs = append(alertIDs, ids[i])
		starts = append(starts, alerts[i].StartsAt)
	}
	for _, i := range slices.Concat(joins, reopen) {
		if v, ok := alerts[i].Labels["severity"]; ok {
			if r := SeverityRank(v); r > rank || !open.hasSeverity && severity == "" {
				rank, severity = r, v
			}
		}
	}
	if len(joins) > 0 {
		if _, err := tx.Exec(ctx, `INSERT INTO incident_alerts (incident_id, alert_id, group_key, starts_at, status)
			SELECT $1, a, $2, s, 'firing' FROM ROWS FROM (pg_catalog.unnest($3::bigint[]), pg_catalog.unnest($4::timestamptz[])) AS x(a, s)`,
			open.id, groupKey, alertIDs, starts); err != nil {
			return wrap(err, "add occurrences")
		}
		if _, err := tx.Exec(ctx, `UPDATE alerts SET incident_id = $1 WHERE id = ANY($2)
			AND (incident_id IS NULL OR incident_id < $1)`, open.id, alertIDs); err != nil {
			return wrap(err, "link alerts to their incident")
		}
	}
	if _, err := tx.Exec(ctx, `UPDATE incidents SET alert_count = alert_count + $2,
			severity = CASE WHEN $3 <> '' THEN $3 ELSE severity END,
			severity_rank = CASE WHEN $3 <> '' THEN $4 ELSE severity_rank END
		WHERE id = $1`, open.id, len(joins), severity, rank); err != nil {
		return wrap(err, "count the incident's alerts")
	}
	budget := max(maxIndividualAlertEvents-open.alertCount, 0)
	individual := alertIDs[:min(budget, len(alertIDs))]
	if err := appendAlertEvents(ctx, tx, open.id, EventAlertAdded, "", individual); err != nil {
		return err
	}
	if more := len(alertIDs) - len(individual); more > 0 {
		if err := appendIncidentEvent(ctx, tx, incidentEvent{incidentID: open.id, typ: EventAlertsAdded,
			detail: fmt.Sprintf("%d more alerts joined", more)}); err != nil {
			return err
		}
	}
	open.alertCount += len(joins)
	for _, i := range reopen {
		if err := appendIncidentEvent(ctx, tx, incidentEvent{incidentID: open.id, typ: EventAlertAdded,
			alertID: ids[i], detail: "firing again after it expired"}); err != nil {
			return err
		}
	}
	return nil
}

// SeverityRank orders the values of the severity label: critical > error, high > warning >
// info, low > any other value.
func SeverityRank(v string) int {
	switch v {
	case "critical":
		return 4
	case "error", "high":
		return 3
	case "warning":
		return 2
	case "info", "low":
		return 1
	}
	return 0
}

// resolveOccurrences marks the occurrences stopIDs resolved by Alertmanager, at the end time of
// their copies: firing ones that stopped, and expired ones whose real end came.
func resolveOccurrences(ctx context.Context, tx pgx.Tx, alerts []NotifiedAlert, stopIDs []int64, found map[int]occurrence) error {
	if len(stopIDs) == 0 {
		return nil
	}
	ends := make([]time.Time, 0, len(stopIDs))
	byID := map[int64]time.Time{}
	for i, a := range alerts {
		if o, ok := found[i]; ok {
			end := a.EndsAt
			if end.IsZero() {
				end = time.Now()
			}
			byID[o.id] = end
		}
	}
	for _, id := range stopIDs {
		ends = append(ends, byID[id])
	}
	_, err := tx.Exec(ctx, `UPDATE incident_alerts o SET status = 'resolved', ends_at = x.e,
			resolution_source = 'alertmanager'
		FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::timestamptz[])) AS x(id, e) WHERE o.id = x.id`, stopIDs, ends)
	return wrap(err, "resolve occurrences")
}

// stoppedEvents writes the events of the occurrences that stopped firing, by incident: one each
// while the incident holds at most 200 alerts, else one that says how many.
func stoppedEvents(ctx context.Context, tx pgx.Tx, alerts []NotifiedAlert, ids []int64, stopped []int,
	found map[int]occurrence) error {
	byIncident := map[int64][]int64{}
	var order []int64
	for _, i := range stopped {
		id := found[i].incidentID
		if _, ok := byIncident[id]; !ok {
			order = append(order, id)
		}
		byIncident[id] = append(byIncident[id], ids[i])
	}
	for _, incidentID := range order {
		alertIDs := byIncident[incidentID]
		if err := resolutionEvents(ctx, tx, incidentID, alertIDs, "", fmt.Sprintf("%d alerts resolved", len(alertIDs))); err != nil {
			return err
		}
	}
	return nil
}

// resolveIfQuiet resolves the open incident when none of its occurrences fires any more
// ("alerts"), with its "resolved" event (no user: the alerts stopped). It reports whether it did.
func resolveIfQuiet(ctx context.Context, tx pgx.Tx, incidentID int64) (bool, error) {
	tag, err := tx.Exec(ctx, `UPDATE incidents SET status = 'resolved', resolved_at = now(), resolution_source = 'alerts'
		WHERE id = $1 AND resolved_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM incident_alerts WHERE incident_id = $1 AND status = 'firing')`, incidentID)
	if err != nil {
		return false, wrap(err, "resolve the incident")
	}
	if tag.RowsAffected() == 0 {
		return false, nil
	}
	return true, appendIncidentEvent(ctx, tx, incidentEvent{incidentID: incidentID, typ: EventResolved})
}

// touchIntegration records the notification's digest on its group (digest.go), and the delivery
// on the integration and its key, at most once a second each (so that concurrent deliveries of
// one integration do not queue behind one row, and not at all when its key's authentication
// found both recent), in one statement.
func touchIntegration(ctx context.Context, tx pgx.Tx, caller IntegrationCaller, groupKey string, digest []byte) error {
	_, err := tx.Exec(ctx, `WITH d AS (
			INSERT INTO notification_digests (integration_id, group_key, digest, applied_at) VALUES ($1, $3, $4, now())
			ON CONFLICT (integration_id, group_key) DO UPDATE SET digest = excluded.digest, applied_at = excluded.applied_at
		), i AS (
			UPDATE integrations SET last_delivery_at = now()
			WHERE id = $1 AND NOT $5 AND (last_delivery_at IS NULL OR last_delivery_at < now() - interval '1 second')
		)
		UPDATE integration_keys SET last_used_at = now()
		WHERE id = $2 AND NOT $5 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 second')`,
		caller.IntegrationID, caller.KeyID, groupKey, digest, caller.touchedRecently)
	return wrap(err, "record the delivery")
}
