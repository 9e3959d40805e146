package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Notification is one of Alertmanager's webhook notifications, as the store takes it: a
// snapshot of one group (less silenced alerts, and TruncatedAlerts that max_alerts left out).
type Notification struct {
	GroupKey        string
	TruncatedAlerts int
	GroupLabels     map[string]string
	CommonLabels    map[string]string
	Alerts          []NotifiedAlert
}

// NotifiedAlert is one alert of a Notification.
type NotifiedAlert struct {
	Fingerprint  string
	Status       string // AlertFiring or AlertResolved
	Labels       map[string]string
	Annotations  map[string]string
	StartsAt     time.Time
	EndsAt       time.Time // zero while firing
	GeneratorURL string
}

// Alert and occurrence statuses, and why an alert stopped firing.
const (
	AlertFiring               = "firing"
	AlertResolved             = "resolved"
	ResolvedByAlertmanager    = "alertmanager"
	ResolvedByExpiry          = "expiry"
	IncidentResolvedByAlerts  = "alerts"
	IncidentResolvedManually  = "manual"
	maxIndividualAlertEvents  = 200
	incidentGroupLockKeySpace = "incident group"
)

// IngestResult is what one notification changed.
type IngestResult struct {
	IncidentID int64 // the group's open incident after the notification, or the one it resolved; 0: none
	Opened     bool  // the notification opened IncidentID
	Resolved   bool  // the notification resolved IncidentID (its last firing alert stopped)
	New        int   // occurrences that began firing (or fired again after an expiry)
	Refreshed  int   // firing occurrences reported firing again
	Stopped    int   // firing occurrences reported resolved
	Stale      int   // copies that changed nothing: older than what is stored, or of a resolved occurrence
}

// Ingest applies a notification of the integration, in one transaction: the alerts' rows, their
// occurrences, the group's incident and its timeline. It is a snapshot, not an event: the same
// notification again, on any replica and at once, changes nothing more (occurrences are found
// by alert, group and startsAt, under a lock of the group that every replica shares) and writes
// no event. It returns ErrUnavailable for what is worth retrying.
func (s *Store) Ingest(ctx context.Context, caller IntegrationCaller, n Notification) (IngestResult, error) {
	var res IngestResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		res = IngestResult{}
		return ingest(ctx, tx, caller, n, &res)
	})
	return res, err
}

// occurrence is the newest stored occurrence of an (alert, startsAt) of the group.
type occurrence struct {
	id           int64
	status       string
	source       string
	incidentID   int64
	incidentOpen bool
}

func ingest(ctx context.Context, tx pgx.Tx, caller IntegrationCaller, n Notification, res *IngestResult) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))`,
		groupLockKey(caller.IntegrationID, n.GroupKey)); err != nil {
		return wrap(err, "lock the group")
	}
	alerts := latestCopies(n.Alerts)
	ids, err := upsertAlerts(ctx, tx, caller.IntegrationID, alerts)
	if err != nil {
		return err
	}
	found, err := findOccurrences(ctx, tx, n.GroupKey, alerts, ids)
	if err != nil {
		return err
	}
	open, err := openIncident(ctx, tx, caller.IntegrationID, n.GroupKey)
	if err != nil {
		return err
	}

	// What each copy does to its occurrence.
	var joins, refresh, reopen, stopped []int
	var stopIDs, refreshIDs, reopenIDs []int64
	for i, a := range alerts {
		o, ok := found[i]
		switch {
		case !ok && a.Status == AlertFiring:
			joins = append(joins, i)
		case !ok:
			res.Stale++ // a resolution of an occurrence never seen firing: the feed keeps it
		case o.status == AlertFiring && a.Status == AlertFiring:
			refresh = append(refresh, i)
			refreshIDs = append(refreshIDs, o.id)
		case o.status == AlertFiring:
			stopped = append(stopped, i)
			stopIDs = append(stopIDs, o.id)
		case o.source == ResolvedByExpiry && a.Status == AlertResolved:
			// The real end of what the server took for ended: corrected, with no event.
			stopIDs = append(stopIDs, o.id)
		case o.source == ResolvedByExpiry && o.incidentOpen && open != nil && o.incidentID == open.id:
			reopen = append(reopen, i)
			reopenIDs = append(reopenIDs, o.id)
		case o.source == ResolvedByExpiry:
			joins = append(joins, i) // fires again, in the group's open (or a new) incident
		default:
			res.Stale++
		}
	}
	res.Refreshed, res.Stopped = len(refresh), len(stopped)
	res.New = len(joins) + len(reopen)

	if len(joins) > 0 && open == nil {
		open, err = createIncident(ctx, tx, caller.IntegrationID, n, alerts[joins[0]])
		if err != nil {
			return err
		}
		res.Opened = true
	}
	if err := resolveOccurrences(ctx, tx, alerts, stopIDs, found); err != nil {
		return err
	}
	if len(refreshIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE incident_alerts SET last_seen_at = now() WHERE id = ANY($1)`, refreshIDs); err != nil {
			return wrap(err, "refresh occurrences")
		}
	}
	if len(reopenIDs) > 0 {
		if _, err := tx.Exec(ctx, `UPDATE incident_alerts SET status = 'firing', ends_at = NULL, resolution_source = NULL,
			last_seen_at = now() WHERE id = ANY($1)`, reopenIDs); err != nil {
			return wrap(err, "reopen occurrences")
		}
	}
	if open != nil {
		res.IncidentID = open.id
		if err := joinIncident(ctx, tx, open, n.GroupKey, alerts, ids, joins, reopen); err != nil {
			return err
		}
		if n.TruncatedAlerts > 0 {
			// The alerts max_alerts left out are not in the body, and nothing says which are
			// still firing: every firing one of the incident counts as reported.
			if _, err := tx.Exec(ctx, `UPDATE incident_alerts SET last_seen_at = now()
				WHERE incident_id = $1 AND status = 'firing'`, open.id); err != nil {
				return wrap(err, "keep a truncated group's alerts alive")
			}
		}
	}
	if err := stoppedEvents(ctx, tx, alerts, ids, stopped, found); err != nil {
		return err
	}
	if open != nil {
		if res.Resolved, err = resolveIfQuiet(ctx, tx, open.id); err != nil {
			return err
		}
	}
	return touchIntegration(ctx, tx, caller)
}

// groupLockKey names the lock of one group of one integration.
func groupLockKey(integrationID int64, groupKey string) string {
	return fmt.Sprintf("%s\n%d\n%s", incidentGroupLockKeySpace, integrationID, groupKey)
}

// latestCopies returns the notification's alerts in order of fingerprint (so that concurrent
// notifications of overlapping groups lock alert rows in one order), one per fingerprint: the
// newest occurrence's copy, a resolution before a firing of the same occurrence.
func latestCopies(in []NotifiedAlert) []NotifiedAlert {
	out := slices.Clone(in)
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Fingerprint != out[j].Fingerprint {
			return out[i].Fingerprint < out[j].Fingerprint
		}
		if !out[i].StartsAt.Equal(out[j].StartsAt) {
			return out[i].StartsAt.After(out[j].StartsAt)
		}
		return out[i].Status == AlertResolved && out[j].Status != AlertResolved
	})
	return slices.CompactFunc(out, func(a, b NotifiedAlert) bool { return a.Fingerprint == b.Fingerprint })
}

// upsertAlertsSQL writes the alerts' rows: a new fingerprint is inserted; a copy of the stored
// occurrence or of a newer one replaces what the row says, except a firing copy of an
// occurrence Alertmanager resolved (stale). It returns every alert's id, in the body's order.
const upsertAlertsSQL = `WITH x AS (
		SELECT * FROM ROWS FROM (pg_catalog.unnest($2::text[]), pg_catalog.unnest($3::text[]),
			pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::jsonb[]), pg_catalog.unnest($6::jsonb[]),
			pg_catalog.unnest($7::timestamptz[]), pg_catalog.unnest($8::timestamptz[]), pg_catalog.unnest($9::text[]))
			WITH ORDINALITY
			AS x(fingerprint, name, status, labels, annotations, starts_at, ends_at, generator_url, n)
	), up AS (
		INSERT INTO alerts AS a (integration_id, fingerprint, name, status, labels, annotations, starts_at,
			ends_at, generator_url, received_at, resolution_source)
		SELECT $1, fingerprint, name, status, labels, annotations, starts_at, ends_at, generator_url, now(),
			CASE WHEN status = 'resolved' THEN 'alertmanager' END
		FROM x ORDER BY n
		ON CONFLICT (integration_id, fingerprint) DO UPDATE SET name = excluded.name, status = excluded.status,
			labels = excluded.labels, annotations = excluded.annotations, starts_at = excluded.starts_at,
			ends_at = excluded.ends_at, generator_url = excluded.generator_url, received_at = excluded.received_at,
			resolution_source = excluded.resolution_source
		WHERE excluded.starts_at > a.starts_at OR excluded.starts_at = a.starts_at
			AND (excluded.status = 'resolved' OR a.resolution_source IS DISTINCT FROM 'alertmanager')
		RETURNING a.id, a.fingerprint
	)
	SELECT coalesce(up.id, a.id) FROM x
	LEFT JOIN up ON up.fingerprint = x.fingerprint
	LEFT JOIN alerts a ON a.integration_id = $1 AND a.fingerprint = x.fingerprint
	ORDER BY x.n`

func upsertAlerts(ctx context.Context, tx pgx.Tx, integrationID int64, alerts []NotifiedAlert) ([]int64, error) {
	if len(alerts) == 0 {
		return nil, nil
	}
	cols := struct {
		fingerprint, name, status, generatorURL []string
		labels, annotations                     [][]byte
		startsAt                                []time.Time
		endsAt                                  []*time.Time
	}{}
	for _, a := range alerts {
		labels, err := json.Marshal(nonNil(a.Labels))
		if err != nil {
			return nil, fmt.Errorf("encode labels: %w", err)
		}
		annotations, err := json.Marshal(nonNil(a.Annotations))
		if err != nil {
			return nil, fmt.Errorf("encode annotations: %w", err)
		}
		var ends *time.Time
		if a.Status == AlertResolved && !a.EndsAt.IsZero() {
			ends = &a.EndsAt
		} else if a.Status == AlertResolved {
			now := time.Now()
			ends = &now
		}
		cols.fingerprint = append(cols.fingerprint, a.Fingerprint)
		cols.name = append(cols.name, a.Labels["alertname"])
		cols.status = append(cols.status, a.Status)
		cols.labels = append(cols.labels, labels)
		cols.annotations = append(cols.annotations, annotations)
		cols.startsAt = append(cols.startsAt, a.StartsAt)
		cols.endsAt = append(cols.endsAt, ends)
		cols.generatorURL = append(cols.generatorURL, a.GeneratorURL)
	}
	rows, err := tx.Query(ctx, upsertAlertsSQL, integrationID, cols.fingerprint, cols.name, cols.status,
		jsonArray(cols.labels), jsonArray(cols.annotations), cols.startsAt, cols.endsAt, cols.generatorURL)
	if err != nil {
		return nil, wrap(err, "write alerts")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, wrap(err, "write alerts")
	}
	if len(ids) != len(alerts) {
		return nil, fmt.Errorf("write alerts: %d ids for %d alerts", len(ids), len(alerts))
	}
	return ids, nil
}

// jsonArray passes JSON documents as text, for a ::jsonb[] parameter in every statement mode.
func jsonArray(docs [][]byte) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(d)
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// findOccurrences returns, by the index of each alert, the newest occurrence of its startsAt in
// the group, with whether its incident is open. The group's lock (held by the caller) keeps
// them as read: only the group's notifications and its expiry change them, under that lock.
func findOccurrences(ctx context.Context, tx pgx.Tx, groupKey string, alerts []NotifiedAlert, ids []int64) (map[int]occurrence, error) {
	found := map[int]occurrence{}
	if len(alerts) == 0 {
		return found, nil
	}
	starts := make([]time.Time, len(alerts))
	for i, a := range alerts {
		starts[i] = a.StartsAt
	}
	rows, err := tx.Query(ctx, `SELECT DISTINCT ON (x.n) x.n, o.id, o.status, coalesce(o.resolution_source, ''),
			o.incident_id, i.resolved_at IS NULL
		FROM ROWS FROM (pg_catalog.unnest($2::bigint[]), pg_catalog.unnest($3::timestamptz[])) WITH ORDINALITY AS x(alert_id, starts_at, n)
		JOIN incident_alerts o ON o.alert_id = x.alert_id AND o.group_key = $1 AND o.starts_at = x.starts_at
		JOIN incidents i ON i.id = o.incident_id
		ORDER BY x.n, o.id DESC`, groupKey, ids, starts)
	if err != nil {
		return nil, wrap(err, "read occurrences")
	}
	defer rows.Close()
	for rows.Next() {
		var n int
		var o occurrence
		if err := rows.Scan(&n, &o.id, &o.status, &o.source, &o.incidentID, &o.incidentOpen); err != nil {
			return nil, wrap(err, "read occurrences")
		}
		found[n-1] = o
	}
	return found, wrap(rows.Err(), "read occurrences")
}

// openIncidentRow is what ingestion needs of the group's open incident.
type openIncidentRow struct {
	id           int64
	alertCount   int
	severityRank int
	hasSeverity  bool
}

// openIncident returns the group's open incident, locked against people's actions until the
// notification is applied, or nil.
func openIncident(ctx context.Context, tx pgx.Tx, integrationID int64, groupKey string) (*openIncidentRow, error) {
	var o openIncidentRow
	err := tx.QueryRow(ctx, `SELECT id, alert_count, severity_rank, severity IS NOT NULL FROM incidents
		WHERE integration_id = $1 AND group_key = $2 AND resolved_at IS NULL FOR NO KEY UPDATE`,
		integrationID, groupKey).Scan(&o.id, &o.alertCount, &o.severityRank, &o.hasSeverity)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, wrap(err, "read the group's open incident")
	}
	return &o, nil
}

// createIncident opens the group's incident, with its "triggered" event.
func createIncident(ctx context.Context, tx pgx.Tx, integrationID int64, n Notification, first NotifiedAlert) (*openIncidentRow, error) {
	labels, err := json.Marshal(nonNil(n.GroupLabels))
	if err != nil {
		return nil, fmt.Errorf("encode group labels: %w", err)
	}
	o := &openIncidentRow{}
	err = tx.QueryRow(ctx, `INSERT INTO incidents (integration_id, group_key, title, group_labels, status)
		VALUES ($1, $2, $3, $4::text::jsonb, 'triggered') RETURNING id`,
		integrationID, n.GroupKey, IncidentTitle(n, first), string(labels)).Scan(&o.id)
	if err != nil {
		return nil, wrap(err, "open incident")
	}
	return o, appendIncidentEvent(ctx, tx, incidentEvent{incidentID: o.id, typ: EventTriggered})
}

// IncidentTitle is an incident's title, fixed when it opens: the alert name (of the group's
// labels, else the labels its alerts share, else its first alert's), then the group's other
// labels as " (k=v, ...)" in order of key.
func IncidentTitle(n Notification, first NotifiedAlert) string {
	name := n.GroupLabels["alertname"]
	if name == "" {
		name = n.CommonLabels["alertname"]
	}
	if name == "" {
		name = first.Labels["alertname"]
	}
	var rest []string
	for _, k := range slices.Sorted(maps.Keys(n.GroupLabels)) {
		if k != "alertname" {
			rest = append(rest, k+"="+n.GroupLabels[k])
		}
	}
	if len(rest) == 0 {
		return name
	}
	if name == "" {
		return strings.Join(rest, ", ")
	}
	return name + " (" + strings.Join(rest, ", ") + ")"
}
