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
	"github.com/jackc/pgx/v5/pgxpool"
)

// Notification is one of Alertmanager's webhook notifications, as the store takes it: a
// snapshot of one group (less silenced alerts, and TruncatedAlerts that max_alerts left out).
type Notification struct {
	GroupKey string
	// Status is Alertmanager's for the alerts it sent: firing while any of them fires.
	Status          string
	TruncatedAlerts int
	GroupLabels     map[string]string
	CommonLabels    map[string]string
	Alerts          []NotifiedAlert
	// BodySum is the SHA-256 of the body as it came, kept for ReplayedBody; nil: none.
	BodySum []byte
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
	cols := encodeAlerts(alerts, time.Now())
	digest := digestOf(n, alerts, cols)
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return IngestResult{}, wrap(err, "acquire a connection")
	}
	defer conn.Release()
	var res IngestResult
	if err := ingest(ctx, conn, caller, n, alerts, cols, digest, !s.onCallOff.Load(), &res); err != nil {
		rollback(ctx, conn)
		if isConnError(err) && !errors.Is(err, ErrUnavailable) {
			err = fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		return IngestResult{}, err
	}
	return res, nil
}

// batchSender sends a batch of statements in one round trip: a connection of the pool.
type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// rollback ends the transaction a failed notification left open on conn, if any. A
// connection that cannot is closed when it goes back to the pool (pgxpool destroys a
// connection released inside a transaction).
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, _ = conn.Exec(ctx, "ROLLBACK") // on failure, the connection is dropped on release
}

// occurrence is the newest stored occurrence of an (alert, startsAt) of the group.
type occurrence struct {
	id           int64
	alertID      int64
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

// ingest applies the notification in one transaction of two round trips: readGroup begins it
// and reads the group under its lock; what each copy does is decided here; then every write
// and the commit go in one batch (ingestWrites). A replay (the group's last notification,
// applied within replayWindow, found by its digest with the group) commits with nothing
// written but the delivery's record. A transaction of a failed round trip is left
// open, for the caller to roll back; a failure seen while the COMMIT was on its way (the
// request canceled, the connection lost) may come after Postgres committed, and the same
// snapshot sent again then changes nothing. BEGIN and COMMIT ride with the statements: as
// round trips of their own, they were two of a notification's five.
func ingest(ctx context.Context, tx batchSender, caller IntegrationCaller, n Notification, alerts []NotifiedAlert,
	cols alertColumns, digest []byte, onCall bool, res *IngestResult) error {
	found, open, replay, err := readGroup(ctx, tx, caller.IntegrationID, n.GroupKey, alerts, digest)
	if err != nil {
		return err
	}
	if replay {
		res.Replay = true
		b := &pgx.Batch{}
		if !caller.touchedRecently {
			b.Queue(touchIntegrationSQL, caller.IntegrationID, caller.KeyID)
		}
		b.Queue("COMMIT")
		return wrap(tx.SendBatch(ctx, b).Close(), "record the delivery")
	}
	w := ingestWrites{integrationID: caller.IntegrationID, groupKey: n.GroupKey, alerts: alerts, cols: cols, found: found,
		open: open}
	for i, a := range alerts {
		o, ok := found[i]
		switch {
		case !ok && a.Status == AlertFiring:
			w.joins = append(w.joins, i)
		case !ok:
			res.Stale++ // a resolution of an occurrence never seen firing: the feed keeps it
		case o.status == AlertFiring && a.Status == AlertFiring:
			res.Refreshed++
			if o.stale {
				w.refreshIDs = append(w.refreshIDs, o.id)
			}
		case o.status == AlertFiring:
			w.stopped = append(w.stopped, i)
			w.stopIDs = append(w.stopIDs, o.id)
		case o.source == ResolvedByExpiry && a.Status == AlertResolved:
			// The real end of what the server took for ended: corrected, with no event.
			w.stopIDs = append(w.stopIDs, o.id)
		case o.source == ResolvedByExpiry && o.incidentOpen && open != nil && o.incidentID == open.id:
			w.reopen = append(w.reopen, i)
		case o.source == ResolvedByExpiry:
			w.joins = append(w.joins, i) // fires again, in the group's open (or a new) incident
		default:
			res.Stale++
		}
	}
	res.Stopped = len(w.stopped)
	res.New = len(w.joins) + len(w.reopen)
	b := &pgx.Batch{}
	if len(w.joins) > 0 && open == nil {
		severity, rank := w.severity(0, false)
		queueCreateIncident(b, caller.IntegrationID, n, alerts[w.joins[0]], onCall, len(w.joins), severity, rank, &res.IncidentID)
		res.Opened = true
	} else if open != nil {
		res.IncidentID = open.id
	}
	if err := w.queue(b, n, res.Stale > 0, &res.Resolved); err != nil {
		return err
	}
	queueTouchIntegration(b, caller, n, digest)
	b.Queue("COMMIT")
	return wrap(tx.SendBatch(ctx, b).Close(), "apply the notification")
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
// occurrence or of a newer one (freshCopy) replaces what the row says, except a copy that
// changes nothing of a row received within refreshAfter (received_at is then that recent). An
// alert that joins the group's incident ($12 true) points at it (incidentRef) unless it points
// at a newer one, whatever the copy: one whose stored copy is newer, or of an occurrence
// Alertmanager resolved (the occurrence joins in another group), keeps its other columns.
var upsertAlertsSQL = `INSERT INTO alerts AS a (integration_id, fingerprint, name, status, labels, annotations, starts_at,
			ends_at, generator_url, received_at, resolution_source, incident_id)
		SELECT $1, fingerprint, name, status, labels, annotations, starts_at, ends_at, generator_url, now(),
			CASE WHEN status = 'resolved' THEN 'alertmanager' END, CASE WHEN joins THEN ` + incidentRef + ` END
		FROM ROWS FROM (pg_catalog.unnest($4::text[]), pg_catalog.unnest($5::text[]),
			pg_catalog.unnest($6::text[]), pg_catalog.unnest($7::jsonb[]), pg_catalog.unnest($8::jsonb[]),
			pg_catalog.unnest($9::timestamptz[]), pg_catalog.unnest($10::timestamptz[]), pg_catalog.unnest($11::text[]),
			pg_catalog.unnest($12::bool[]))
			WITH ORDINALITY AS x(fingerprint, name, status, labels, annotations, starts_at, ends_at, generator_url, joins, n)
		ORDER BY n
		ON CONFLICT (integration_id, fingerprint) DO UPDATE SET ` + setFromFreshCopy("name", "status", "labels", "annotations",
	"starts_at", "ends_at", "generator_url", "received_at", "resolution_source") + `,
			incident_id = greatest(a.incident_id, excluded.incident_id)
		WHERE ` + freshCopy + `
				AND ((a.name, a.status, a.labels, a.annotations, a.starts_at, a.ends_at, a.generator_url, a.resolution_source,
						a.incident_id)
					IS DISTINCT FROM (excluded.name, excluded.status, excluded.labels, excluded.annotations, excluded.starts_at,
						excluded.ends_at, excluded.generator_url, excluded.resolution_source, greatest(a.incident_id, excluded.incident_id))
					OR a.received_at < now() - interval '` + refreshAfter + `')
			OR excluded.incident_id > coalesce(a.incident_id, 0)`

// freshCopy says, in upsertAlertsSQL's conflict, that the copy is of the stored occurrence or
// of a newer one, and not a firing copy of an occurrence Alertmanager resolved (stale).
const freshCopy = `(excluded.starts_at > a.starts_at OR excluded.starts_at = a.starts_at
	AND (excluded.status = 'resolved' OR a.resolution_source IS DISTINCT FROM 'alertmanager'))`

// setFromFreshCopy sets each of columns, in upsertAlertsSQL's conflict, to the copy's value if
// the copy is fresh (freshCopy), else to the row's.
func setFromFreshCopy(columns ...string) string {
	sets := make([]string, len(columns))
	for i, c := range columns {
		sets[i] = c + " = CASE WHEN " + freshCopy + " THEN excluded." + c + " ELSE a." + c + " END"
	}
	return strings.Join(sets, ", ")
}

// incidentRef is, in the statements of a notification's writes ($1 the integration, $2 the
// group, $3 its open incident when the notification found one), the group's open incident:
// the one found, else the one this notification opened earlier in the same batch.
const incidentRef = `coalesce($3::bigint, (SELECT id FROM incidents WHERE integration_id = $1 AND group_key = $2
	AND resolved_at IS NULL))`

// alertColumns are a notification's alerts, in the order Ingest applies them, as
// upsertAlertsSQL's arguments $4 to $11, encoded once for the digest and the upsert: labels
// and annotations as JSON objects, and a resolution's end (now when Alertmanager left it out).
type alertColumns struct {
	fingerprint, name, status, labels, annotations, generatorURL []string
	startsAt                                                     []time.Time
	endsAt                                                       []*time.Time
}

func encodeAlerts(alerts []NotifiedAlert, now time.Time) alertColumns {
	n := len(alerts)
	c := alertColumns{fingerprint: make([]string, n), name: make([]string, n), status: make([]string, n),
		labels: make([]string, n), annotations: make([]string, n), generatorURL: make([]string, n),
		startsAt: make([]time.Time, n), endsAt: make([]*time.Time, n)}
	var buf []byte
	for i, a := range alerts {
		if a.Status == AlertResolved {
			end := a.EndsAt
			if end.IsZero() {
				end = now
			}
			c.endsAt[i] = &end
		}
		buf = appendJSONObject(buf[:0], a.Labels)
		c.labels[i] = string(buf)
		buf = appendJSONObject(buf[:0], a.Annotations)
		c.annotations[i] = string(buf)
		c.fingerprint[i], c.name[i], c.status[i], c.generatorURL[i] = a.Fingerprint, a.Labels["alertname"], a.Status, a.GeneratorURL
		c.startsAt[i] = a.StartsAt
	}
	return c
}

func (c alertColumns) args() []any {
	return []any{c.fingerprint, c.name, c.status, c.labels, c.annotations, c.startsAt, c.endsAt, c.generatorURL}
}

// appendJSONObject appends m as a JSON object, its keys in order (as encoding/json writes a
// map, and with its escapes), nil as {}. A notification's labels and annotations are encoded
// once each, for the digest and for the row; encoding/json took a reflected sort per map.
func appendJSONObject(buf []byte, m map[string]string) []byte {
	buf = append(buf, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendJSONString(buf, k)
		buf = append(buf, ':')
		buf = appendJSONString(buf, m[k])
	}
	return append(buf, '}')
}

// appendJSONString appends s quoted: as it is when it is printable ASCII that encoding/json
// writes unescaped, else as encoding/json writes it.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(buf, q...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// findOccurrencesSQL finds, for each (fingerprint, startsAt) of a notification, its alert and
// the newest occurrence of the group ($2) with whether its incident is open and whether its
// last report is older than refreshAfter. Each lookup is a lateral one by index, whatever the
// tables' statistics say (a join planned on a new install's stale statistics scanned every
// occurrence). The group's lock keeps them as read: only the group's notifications and its
// expiry change them, under that lock.
const findOccurrencesSQL = `SELECT x.n, a.id, o.id, o.status, coalesce(o.resolution_source, ''), o.incident_id, o.open, o.stale
	FROM ROWS FROM (pg_catalog.unnest($3::text[]), pg_catalog.unnest($4::timestamptz[])) WITH ORDINALITY AS x(fingerprint, starts_at, n)
	CROSS JOIN LATERAL (SELECT id FROM alerts WHERE integration_id = $1 AND fingerprint = x.fingerprint LIMIT 1) a
	CROSS JOIN LATERAL (SELECT o.id, o.status, o.resolution_source, o.incident_id, i.resolved_at IS NULL AS open,
			o.last_seen_at < now() - interval '` + refreshAfter + `' AS stale
		FROM incident_alerts o JOIN incidents i ON i.id = o.incident_id
		WHERE o.alert_id = a.id AND o.group_key = $2 AND o.starts_at = x.starts_at
		ORDER BY o.id DESC LIMIT 1) o`

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

// ingestSettings set what a notification's transaction plans with (readGroup).
const ingestSettings = `pg_catalog.set_config('enable_seqscan', 'off', true), pg_catalog.set_config('jit', 'off', true)`

// readGroup begins the notification's transaction, takes the group's lock and reads whether
// the notification (digest) is a replay of the group's last one (digest.go), the group's
// occurrences (by the index of their alert) and open incident (nil when none), in one round
// trip.
func readGroup(ctx context.Context, tx batchSender, integrationID int64, groupKey string, alerts []NotifiedAlert, digest []byte) (
	found map[int]occurrence, open *openIncidentRow, replay bool, err error) {
	fingerprints, starts := make([]string, len(alerts)), make([]time.Time, len(alerts))
	for i, a := range alerts {
		fingerprints[i], starts[i] = a.Fingerprint, a.StartsAt
	}
	found = map[int]occurrence{}
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	// Every statement of a notification finds its rows by key, and a plan that reads a table
	// whole is never the right one for it; yet the planner makes one for the generic plan a
	// connection keeps when the tables are new and small, and keeps it as they grow, until
	// they are next analyzed (on a new install, resolving 50 occurrences read all 20,000 of
	// them). Sequential scans are off for the transaction, and with them JIT, which their
	// penalty's cost would start (20 ms a statement). They are set in the statement that takes
	// the lock: both come before the reads, which take their snapshot once they hold it.
	b.Queue(`SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1, 0)), `+ingestSettings, groupLockKey(integrationID, groupKey))
	b.Queue(appliedRecentlySQL, integrationID, groupKey, digest).QueryRow(func(row pgx.Row) error {
		if err := row.Scan(&replay); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	})
	b.Queue(findOccurrencesSQL, integrationID, groupKey, fingerprints, starts).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var n int
			var o occurrence
			if err := rows.Scan(&n, &o.alertID, &o.id, &o.status, &o.source, &o.incidentID, &o.incidentOpen, &o.stale); err != nil {
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
		return nil, nil, false, wrap(err, "read the group")
	}
	return found, open, replay, nil
}

// queueCreateIncident opens the group's incident of alertCount alerts and severity (none when
// ""), with its "triggered" event, and with onCall gives it to today's on-call person, with an
// "assigned" event that names them: one statement, which sets *id when the batch runs. The
// day's entry is read FOR SHARE, so a change of it (AssignSchedule, DeleteScheduleEntry,
// DeleteUser) waits for this transaction, or comes first and is read as it left the day: the
// incident goes to the day's holder before or after a replacement, never to a deleted person.
func queueCreateIncident(b *pgx.Batch, integrationID int64, n Notification, first NotifiedAlert, onCall bool,
	alertCount int, severity string, rank int, id *int64) {
	labels := appendJSONObject(nil, n.GroupLabels)
	b.Queue(`WITH day AS (
			SELECT user_id FROM schedule WHERE $5 AND date = `+todayUTC+` FOR SHARE
		), i AS (
			INSERT INTO incidents (integration_id, group_key, title, group_labels, status, assigned_to_id, alert_count,
				severity, severity_rank)
			VALUES ($1, $2, $3, $4::text::jsonb, 'triggered', (SELECT user_id FROM day), $6, NULLIF($7, ''), $8) RETURNING id
		), e AS (
			INSERT INTO incident_events (incident_id, type, user_id, username)
			SELECT i.id, x.type, x.user_id, x.username FROM i, (SELECT 1, '`+EventTriggered+`', NULL::bigint, ''
				UNION ALL SELECT 2, '`+EventAssigned+`', day.user_id, coalesce(u.username, '') FROM day LEFT JOIN users u ON u.id = day.user_id)
				AS x(n, type, user_id, username)
			ORDER BY x.n
		)
		SELECT id FROM i`, integrationID, n.GroupKey, IncidentTitle(n, first), string(labels), onCall, alertCount, severity,
		rank).QueryRow(func(row pgx.Row) error {
		return row.Scan(id)
	})
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
