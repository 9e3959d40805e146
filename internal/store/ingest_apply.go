package store

import (
	"context"
	"errors"
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

// resolutionEventsSQL writes the events of an incident's ($1) alerts ($2) that stopped firing:
// one alert_resolved each (detail $3) while the incident holds at most 200 alerts, else one
// alerts_resolved that says how many ($4).
const resolutionEventsSQL = `INSERT INTO incident_events (incident_id, type, alert_id, detail)
	SELECT i.id, t.type, t.alert_id, t.detail FROM incidents i
	CROSS JOIN LATERAL (
		SELECT '` + EventAlertResolved + `' AS type, x.a AS alert_id, $3::text AS detail, x.n
		FROM pg_catalog.unnest($2::bigint[]) WITH ORDINALITY AS x(a, n) WHERE i.alert_count <= ` + maxIndividualAlertEventsSQL + `
		UNION ALL
		SELECT '` + EventAlertsResolved + `', NULL, $4::text, 0 WHERE i.alert_count > ` + maxIndividualAlertEventsSQL + `) t
	WHERE i.id = $1 ORDER BY t.n`

// maxIndividualAlertEventsSQL is maxIndividualAlertEvents in SQL.
const maxIndividualAlertEventsSQL = "200"

// resolutionEvents runs resolutionEventsSQL.
func resolutionEvents(ctx context.Context, tx pgx.Tx, incidentID int64, alertIDs []int64, detail, summary string) error {
	_, err := tx.Exec(ctx, resolutionEventsSQL, incidentID, alertIDs, detail, summary)
	return wrap(err, "write incident events")
}

// ingestWrites is what a notification writes, decided from what readGroup found: by index of
// the notification's alerts, the copies that join the group's incident (joins: a new
// occurrence), fire again in it after an expiry (reopen) and stopped firing (stopped); by
// occurrence, those to resolve (stopIDs: also expired ones whose real end came) and those
// whose last report is to be refreshed.
type ingestWrites struct {
	integrationID          int64
	groupKey               string
	alerts                 []NotifiedAlert
	cols                   alertColumns
	found                  map[int]occurrence
	open                   *openIncidentRow // nil: none was open; the batch opens one if anything joins
	joins, reopen, stopped []int
	stopIDs, refreshIDs    []int64
}

// queue adds the notification's writes to b, in this order: the alerts' rows; the
// occurrences resolved, refreshed, reopened and added, with the incident's count, severity
// and events; a truncated group's alerts kept alive; the events of what stopped; and the
// incident resolved (*resolved set) when nothing of it fires any more. stale says that some
// copies changed nothing (resolutions already applied among them).
//
// An incident does not resolve on a notification that left alerts out (max_alerts): they may
// fire, unseen (Alertmanager's status is that of the alerts it sent), and resolving would lose
// them. A later notification that leaves nothing out resolves it (its alerts, resolved before,
// are then stale copies), or, once the group is no longer sent, the expiry
// (ExpireAlerts).
func (w *ingestWrites) queue(b *pgx.Batch, n Notification, stale bool, resolved *bool) error {
	truncated := n.TruncatedAlerts > 0
	var openID *int64
	if w.open != nil {
		openID = &w.open.id
	}
	ref := []any{w.integrationID, w.groupKey, openID}
	joining := make([]bool, len(w.alerts))
	for _, i := range w.joins {
		joining[i] = true
	}
	b.Queue(upsertAlertsSQL, slices.Concat(ref, w.cols.args(), []any{joining})...)
	w.queueResolveOccurrences(b)
	if len(w.refreshIDs) > 0 {
		b.Queue(`UPDATE incident_alerts SET last_seen_at = now() WHERE id = ANY($1)`, w.refreshIDs)
	}
	if len(w.reopen) > 0 {
		ids := make([]int64, len(w.reopen))
		for k, i := range w.reopen {
			ids[k] = w.found[i].id
		}
		b.Queue(`UPDATE incident_alerts SET status = 'firing', ends_at = NULL, resolution_source = NULL,
			last_seen_at = now() WHERE id = ANY($1)`, ids)
	}
	if len(w.joins)+len(w.reopen) > 0 {
		w.queueJoins(b, ref)
	}
	if truncated && (w.open != nil || len(w.joins) > 0) {
		// The alerts max_alerts left out are not in the body, and nothing says which are
		// still firing: every firing one of the incident counts as reported.
		b.Queue(`UPDATE incident_alerts SET last_seen_at = now()
			WHERE incident_id = `+incidentRef+` AND status = 'firing' AND last_seen_at < now() - interval '`+refreshAfter+`'`, ref...)
	}
	w.queueStoppedEvents(b)
	if w.open != nil && !truncated && (len(w.stopIDs) > 0 || stale) {
		// Only a resolution, or the complete notification of a group that left alerts out
		// before, can leave it with nothing firing.
		b.Queue(resolveIfQuietSQL, w.open.id).QueryRow(func(row pgx.Row) error {
			return scanResolved(row, resolved)
		})
	}
	return nil
}

// severity is the incident's new severity after the joining and reopened alerts, given its
// rank and whether it has one: the highest ranked of their severity labels if it outranks the
// incident's (the first one seen if the incident has none), else "" (unchanged).
func (w *ingestWrites) severity(rank int, hasSeverity bool) (string, int) {
	severity := ""
	for _, i := range slices.Concat(w.joins, w.reopen) {
		if v, ok := w.alerts[i].Labels["severity"]; ok {
			if r := SeverityRank(v); r > rank || !hasSeverity && severity == "" {
				rank, severity = r, v
			}
		}
	}
	return severity, rank
}

// queueJoins adds the occurrences that began firing to the group's open incident with their
// events (one each for the first 200 of the incident, then one a notification that says how
// many more joined), and, in an incident that was open before, raises its severity and counts
// its alerts (an incident the batch opens has both from queueCreateIncident).
func (w *ingestWrites) queueJoins(b *pgx.Batch, ref []any) {
	alertCount := 0
	if w.open != nil {
		alertCount = w.open.alertCount
	}
	budget := max(maxIndividualAlertEvents-alertCount, 0)
	if len(w.joins) > 0 {
		fingerprints, starts, withEvent := make([]string, len(w.joins)), make([]time.Time, len(w.joins)), make([]bool, len(w.joins))
		for k, i := range w.joins {
			fingerprints[k], starts[k], withEvent[k] = w.alerts[i].Fingerprint, w.alerts[i].StartsAt, k < budget
		}
		b.Queue(joinSQL,
			slices.Concat(ref, []any{fingerprints, starts, withEvent})...)
		if more := len(w.joins) - min(budget, len(w.joins)); more > 0 {
			b.Queue(`INSERT INTO incident_events (incident_id, type, detail) SELECT `+incidentRef+`, '`+EventAlertsAdded+`', $4`,
				slices.Concat(ref, []any{fmt.Sprintf("%d more alerts joined", more)})...)
		}
	}
	if w.open != nil {
		severity, rank := w.severity(w.open.severityRank, w.open.hasSeverity)
		b.Queue(`UPDATE incidents SET alert_count = alert_count + $2,
				severity = CASE WHEN $3 <> '' THEN $3 ELSE severity END,
				severity_rank = CASE WHEN $3 <> '' THEN $4 ELSE severity_rank END
			WHERE id = $1`, w.open.id, len(w.joins), severity, rank)
	}
	if len(w.reopen) > 0 {
		ids := make([]int64, len(w.reopen))
		for k, i := range w.reopen {
			ids[k] = w.found[i].alertID
		}
		b.Queue(`INSERT INTO incident_events (incident_id, type, alert_id, detail)
			SELECT $1, '`+EventAlertAdded+`', a, 'firing again after it expired'
			FROM pg_catalog.unnest($2::bigint[]) WITH ORDINALITY AS x(a, n) ORDER BY n`, w.open.id, ids)
	}
}

// joinSQL adds occurrences (fingerprints $4, startsAt $5) to the group's open incident
// (incidentRef), each alert found by a lateral lookup by index (as fingerprint = ANY($4),
// Postgres read every alert of the integration to find them), and writes alert_added for
// those of $6. The upsert before it pointed their alerts at the incident.
const joinSQL = `WITH j AS MATERIALIZED (
		SELECT x.n, x.starts_at, x.event, a.id AS alert_id, ` + incidentRef + ` AS incident_id
		FROM ROWS FROM (pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::timestamptz[]), pg_catalog.unnest($6::bool[]))
			WITH ORDINALITY AS x(fingerprint, starts_at, event, n)
		CROSS JOIN LATERAL (SELECT id FROM alerts WHERE integration_id = $1 AND fingerprint = x.fingerprint LIMIT 1) a
	), o AS (
		INSERT INTO incident_alerts (incident_id, alert_id, group_key, starts_at, status)
		SELECT incident_id, alert_id, $2, starts_at, 'firing' FROM j ORDER BY n
	)
	INSERT INTO incident_events (incident_id, type, alert_id)
	SELECT incident_id, '` + EventAlertAdded + `', alert_id FROM j WHERE event ORDER BY n`

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

// queueResolveOccurrences marks the occurrences stopIDs resolved by Alertmanager, at the end
// time of their copies (the alert rows'): firing ones that stopped, and expired ones whose real end came. The
// id = ANY condition has the planner find them by index whatever its statistics say.
func (w *ingestWrites) queueResolveOccurrences(b *pgx.Batch) {
	if len(w.stopIDs) == 0 {
		return
	}
	byID := map[int64]time.Time{}
	for i := range w.alerts {
		// Only resolutions stop occurrences, and each has its end in the alerts' columns: the
		// alert row and its occurrence get the same one, Alertmanager's or the time it came.
		if o, ok := w.found[i]; ok && w.cols.endsAt[i] != nil {
			byID[o.id] = *w.cols.endsAt[i]
		}
	}
	ends := make([]time.Time, len(w.stopIDs))
	for k, id := range w.stopIDs {
		ends[k] = byID[id]
	}
	b.Queue(resolveOccurrencesSQL, w.stopIDs, ends)
}

// resolveOccurrencesSQL resolves the occurrences $1 by Alertmanager at the times $2.
const resolveOccurrencesSQL = `UPDATE incident_alerts o SET status = 'resolved', ends_at = x.e, resolution_source = 'alertmanager'
	FROM ROWS FROM (pg_catalog.unnest($1::bigint[]), pg_catalog.unnest($2::timestamptz[])) AS x(id, e)
	WHERE o.id = ANY($1) AND o.id = x.id`

// queueStoppedEvents writes the events of the occurrences that stopped firing, by incident
// (resolutionEventsSQL).
func (w *ingestWrites) queueStoppedEvents(b *pgx.Batch) {
	byIncident := map[int64][]int64{}
	var order []int64
	for _, i := range w.stopped {
		o := w.found[i]
		if _, ok := byIncident[o.incidentID]; !ok {
			order = append(order, o.incidentID)
		}
		byIncident[o.incidentID] = append(byIncident[o.incidentID], o.alertID)
	}
	for _, incidentID := range order {
		alertIDs := byIncident[incidentID]
		b.Queue(resolutionEventsSQL, incidentID, alertIDs, "", fmt.Sprintf("%d alerts resolved", len(alertIDs)))
	}
}

// resolveIfQuietSQL resolves the open incident $1 when none of its occurrences fires any more
// ("alerts"), with its "resolved" event (no user: the alerts stopped), and returns its id if it
// did.
const resolveIfQuietSQL = `WITH r AS (
		UPDATE incidents SET status = 'resolved', resolved_at = now(), resolution_source = 'alerts'
		WHERE id = $1 AND resolved_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM incident_alerts WHERE incident_id = $1 AND status = 'firing')
		RETURNING id
	), e AS (
		INSERT INTO incident_events (incident_id, type) SELECT id, '` + EventResolved + `' FROM r
	)
	SELECT id FROM r`

// resolveIfQuiet runs resolveIfQuietSQL and reports whether it resolved the incident.
func resolveIfQuiet(ctx context.Context, tx pgx.Tx, incidentID int64) (bool, error) {
	var resolved bool
	err := scanResolved(tx.QueryRow(ctx, resolveIfQuietSQL, incidentID), &resolved)
	return resolved, wrap(err, "resolve the incident")
}

func scanResolved(row pgx.Row, resolved *bool) error {
	var id int64
	err := row.Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	*resolved = err == nil
	return err
}

// queueTouchIntegration records the notification's digest on its group, with its body's
// SHA-256 and count of alerts when it has one (digest.go), and the delivery on the integration
// and its key (touchIntegrationSQL) unless their authentication found both recorded within the
// second. A notification without its body's sum leaves the body's columns as they were, as a
// replica of an older version does: the digest they were recorded with (body_of) says whether
// they still hold.
func queueTouchIntegration(b *pgx.Batch, caller IntegrationCaller, n Notification, digest []byte) {
	if n.BodySum == nil {
		b.Queue(`INSERT INTO notification_digests (integration_id, group_key, digest, applied_at) VALUES ($1, $2, $3, now())
			ON CONFLICT (integration_id, group_key) DO UPDATE SET digest = excluded.digest, applied_at = excluded.applied_at`,
			caller.IntegrationID, n.GroupKey, digest)
	} else {
		b.Queue(`INSERT INTO notification_digests (integration_id, group_key, digest, applied_at, body, body_of, body_alerts)
				VALUES ($1, $2, $3, now(), $4, $3, $5)
			ON CONFLICT (integration_id, group_key) DO UPDATE SET digest = excluded.digest, applied_at = excluded.applied_at,
				body = excluded.body, body_of = excluded.body_of, body_alerts = excluded.body_alerts`,
			caller.IntegrationID, n.GroupKey, digest, n.BodySum, len(n.Alerts))
	}
	if !caller.touchedRecently {
		b.Queue(touchIntegrationSQL, caller.IntegrationID, caller.KeyID)
	}
}

// touchIntegrationSQL records a delivery on the integration $1 and its key $2, at most once a
// second each, so that concurrent deliveries of one integration do not queue behind one row.
// It is a statement of its own, sent only when the key's authentication found either older
// than a second: with that condition as a parameter, Postgres planned the statement again on
// every notification (a plan without the updates, for the commonest value, was always the
// cheaper), and the planning cost more than the rest of a replay's read.
const touchIntegrationSQL = `WITH i AS (
		UPDATE integrations SET last_delivery_at = now()
		WHERE id = $1 AND (last_delivery_at IS NULL OR last_delivery_at < now() - interval '1 second')
	)
	UPDATE integration_keys SET last_used_at = now()
	WHERE id = $2 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 second')`
