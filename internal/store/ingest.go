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
	Replay     bool  // the group's last notification, applied moments ago: answered from its digest
}

// Ingest applies a notification of the integration, in one transaction: the alerts' rows, their
// occurrences, the group's incident and its timeline. It is a snapshot, not an event: the same
// notification again, on any replica and at once, changes nothing more (occurrences are found
// by alert, group and startsAt, under a lock of the group that every replica shares) and writes
// no event. It returns ErrUnavailable for what is worth retrying.
func (s *Store) Ingest(ctx context.Context, caller IntegrationCaller, n Notification) (IngestResult, error) {
	alerts := latestCopies(n.Alerts)
	digest, err := digestOf(n, alerts)
	if err != nil {
		return IngestResult{}, fmt.Errorf("digest the notification: %w", err)
	}
	if replay, err := s.appliedRecently(ctx, caller, n.GroupKey, digest); err != nil || replay {
		return IngestResult{Replay: replay}, err
	}
	var res IngestResult
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		res = IngestResult{}
		return ingest(ctx, tx, caller, n, alerts, digest, !s.onCallOff.Load(), &res)
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
	stale        bool // last reported longer ago than refreshAfter
}

// refreshAfter is how old a firing occurrence's last report (last_seen_at), or an alert's
// received_at, must be before a copy that changes nothing else writes it again: the same group
// re-sent at once (an HA pair, a retry, a replica's repeat) is then a read. Expiry needs reports
// to within an integration's expire_after, at least a minute.
const refreshAfter = "15 seconds"

func ingest(ctx context.Context, tx pgx.Tx, caller IntegrationCaller, n Notification, alerts []NotifiedAlert,
	digest []byte, onCall bool, res *IngestResult) error {
	ids, found, open, err := readGroup(ctx, tx, caller.IntegrationID, n.GroupKey, alerts)
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
			if o.stale {
				refreshIDs = append(refreshIDs, o.id)
			}
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
		open, err = createIncident(ctx, tx, caller.IntegrationID, n, alerts[joins[0]], onCall)
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
				WHERE incident_id = $1 AND status = 'firing' AND last_seen_at < now() - interval '`+refreshAfter+`'`, open.id); err != nil {
				return wrap(err, "keep a truncated group's alerts alive")
			}
		}
	}
	if err := stoppedEvents(ctx, tx, alerts, ids, stopped, found); err != nil {
		return err
	}
	if open != nil && len(stopIDs) > 0 {
		// Only a resolution can leave the incident with nothing firing.
		if res.Resolved, err = resolveIfQuiet(ctx, tx, open.id); err != nil {
			return err
		}
	}
	return touchIntegration(ctx, tx, caller, n.GroupKey, digest)
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
// occurrence Alertmanager resolved (stale), and a copy that changes nothing of a row received
// within refreshAfter (received_at is then that recent). It returns every alert's id, in the
// body's order.
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
		WHERE (excluded.starts_at > a.starts_at OR excluded.starts_at = a.starts_at
				AND (excluded.status = 'resolved' OR a.resolution_source IS DISTINCT FROM 'alertmanager'))
			AND ((a.name, a.status, a.labels, a.annotations, a.starts_at, a.ends_at, a.generator_url, a.resolution_source)
				IS DISTINCT FROM (excluded.name, excluded.status, excluded.labels, excluded.annotations, excluded.starts_at,
					excluded.ends_at, excluded.generator_url, excluded.resolution_source)
				OR a.received_at < now() - interval '` + refreshAfter + `')
		RETURNING a.id, a.fingerprint
	)
	SELECT coalesce(up.id, a.id) FROM x
	LEFT JOIN up ON up.fingerprint = x.fingerprint
	LEFT JOIN alerts a ON a.integration_id = $1 AND a.fingerprint = x.fingerprint
	ORDER BY x.n`

// alertArgs are upsertAlertsSQL's arguments after the integration: the alerts as columns.
func alertArgs(alerts []NotifiedAlert) ([]any, error) {
	n := len(alerts)
	fingerprint, name, status, generatorURL := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	labels, annotations := make([]string, n), make([]string, n)
	startsAt, endsAt := make([]time.Time, n), make([]*time.Time, n)
	for i, a := range alerts {
		l, err := json.Marshal(nonNil(a.Labels))
		if err != nil {
			return nil, fmt.Errorf("encode labels: %w", err)
		}
		an, err := json.Marshal(nonNil(a.Annotations))
		if err != nil {
			return nil, fmt.Errorf("encode annotations: %w", err)
		}
		if a.Status == AlertResolved {
			end := a.EndsAt
			if end.IsZero() {
				end = time.Now()
			}
			endsAt[i] = &end
		}
		fingerprint[i], name[i], status[i], generatorURL[i] = a.Fingerprint, a.Labels["alertname"], a.Status, a.GeneratorURL
		labels[i], annotations[i], startsAt[i] = string(l), string(an), a.StartsAt
	}
	return []any{fingerprint, name, status, labels, annotations, startsAt, endsAt, generatorURL}, nil
}

// findOccurrencesSQL finds, for each (fingerprint, startsAt) of a notification, the newest
// occurrence of the group ($2) with whether its incident is open and whether its last report is
// older than refreshAfter. The group's lock keeps them as read: only the group's notifications
// and its expiry change them, under that lock.
const findOccurrencesSQL = `SELECT DISTINCT ON (x.n) x.n, o.id, o.status, coalesce(o.resolution_source, ''),
		o.incident_id, i.resolved_at IS NULL, o.last_seen_at < now() - interval '` + refreshAfter + `'
	FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::timestamptz[])) WITH ORDINALITY AS x(fingerprint, starts_at, n)
	JOIN alerts a ON a.integration_id = $1 AND a.fingerprint = x.fingerprint
	JOIN incident_alerts o ON o.alert_id = a.id AND o.group_key = $2 AND o.starts_at = x.starts_at
	JOIN incidents i ON i.id = o.incident_id
	ORDER BY x.n, o.id DESC`

// openIncidentSQL reads the group's open incident, locked against people's actions until the
// notification is applied.
const openIncidentSQL = `SELECT id, alert_count, severity_rank, severity IS NOT NULL FROM incidents
	WHERE integration_id = $1 AND group_key = $2 AND resolved_at IS NULL FOR NO KEY UPDATE`

// openIncidentRow is what ingestion needs of the group's open incident.
type openIncidentRow struct {
	id           int64
	alertCount   int
	severityRank int
	hasSeverity  bool
}

// readGroup takes the group's lock, writes the alerts' rows and reads the group's occurrences
// and open incident (nil when none), in one round trip: the alerts' ids in their order, and the
// occurrences by the index of their alert.
func readGroup(ctx context.Context, tx pgx.Tx, integrationID int64, groupKey string, alerts []NotifiedAlert) (
	[]int64, map[int]occurrence, *openIncidentRow, error) {
	cols, err := alertArgs(alerts)
	if err != nil {
		return nil, nil, nil, err
	}
	var ids []int64
	found := map[int]occurrence{}
	var open *openIncidentRow
	b := &pgx.Batch{}
	b.Queue(`SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0))`, groupLockKey(integrationID, groupKey))
	b.Queue(upsertAlertsSQL, append([]any{integrationID}, cols...)...).Query(func(rows pgx.Rows) error {
		ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
	b.Queue(findOccurrencesSQL, integrationID, groupKey, cols[0], cols[5]).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var n int
			var o occurrence
			if err := rows.Scan(&n, &o.id, &o.status, &o.source, &o.incidentID, &o.incidentOpen, &o.stale); err != nil {
				return err
			}
			found[n-1] = o
		}
		return rows.Err()
	})
	b.Queue(openIncidentSQL, integrationID, groupKey).QueryRow(func(row pgx.Row) error {
		o := &openIncidentRow{}
		err := row.Scan(&o.id, &o.alertCount, &o.severityRank, &o.hasSeverity)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		open = o
		return err
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, nil, nil, wrap(err, "read the group")
	}
	if len(ids) != len(alerts) {
		return nil, nil, nil, fmt.Errorf("write alerts: %d ids for %d alerts", len(ids), len(alerts))
	}
	return ids, found, open, nil
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// createIncident opens the group's incident, with its "triggered" event, and with onCall gives
// it to today's on-call person, with an "assigned" event that names them: one statement. The
// day's entry is read FOR SHARE, so a change of it (AssignSchedule, DeleteScheduleEntry,
// DeleteUser) waits for this transaction, or comes first and is read as it left the day: the
// incident goes to the day's holder before or after a replacement, never to a deleted person.
func createIncident(ctx context.Context, tx pgx.Tx, integrationID int64, n Notification, first NotifiedAlert,
	onCall bool) (*openIncidentRow, error) {
	labels, err := json.Marshal(nonNil(n.GroupLabels))
	if err != nil {
		return nil, fmt.Errorf("encode group labels: %w", err)
	}
	o := &openIncidentRow{}
	err = tx.QueryRow(ctx, `WITH day AS (
			SELECT user_id FROM schedule WHERE $5 AND date = `+todayUTC+` FOR SHARE
		), i AS (
			INSERT INTO incidents (integration_id, group_key, title, group_labels, status, assigned_to_id)
			VALUES ($1, $2, $3, $4::text::jsonb, 'triggered', (SELECT user_id FROM day)) RETURNING id
		), e AS (
			INSERT INTO incident_events (incident_id, type, user_id, username)
			SELECT i.id, x.type, x.user_id, x.username FROM i, (SELECT 1, 'triggered', NULL::bigint, ''
				UNION ALL SELECT 2, 'assigned', day.user_id, coalesce(u.username, '') FROM day LEFT JOIN users u ON u.id = day.user_id)
				AS x(n, type, user_id, username)
			ORDER BY x.n
		)
		SELECT id FROM i`,
		integrationID, n.GroupKey, IncidentTitle(n, first), string(labels), onCall).Scan(&o.id)
	return o, wrap(err, "open incident")
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
