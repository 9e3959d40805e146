package store

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Incident statuses.
const (
	IncidentTriggered    = "triggered"
	IncidentAcknowledged = "acknowledged"
	IncidentResolved     = "resolved"
)

// Errors of the incident actions.
var (
	// ErrIncidentResolved means the action needs an open incident, and this one is resolved.
	ErrIncidentResolved = errors.New("incident is resolved")
	// ErrIncidentOpen means the action needs a resolved incident (archiving), and this one is open.
	ErrIncidentOpen = errors.New("incident is not resolved")
	// ErrUnknownUser means the person named does not exist.
	ErrUnknownUser = errors.New("no such user")
	// ErrNotANote means the timeline event is not a note, and only notes are deleted.
	ErrNotANote = errors.New("only notes can be deleted")
	// ErrNotAuthor means the note is someone else's.
	ErrNotAuthor = errors.New("only its author can delete a note")
)

// Incident is the work item people acknowledge, assign, snooze, note and resolve: one group of
// one integration, from the notification that opened it to its resolution.
type Incident struct {
	ID               int64
	GroupKey         string
	Title            string
	GroupLabels      map[string]string
	Status           string
	Severity         string // "": no alert had a severity label
	TriggeredAt      time.Time
	AcknowledgedByID *int64
	AcknowledgedBy   string
	AcknowledgedAt   *time.Time
	AssignedToID     *int64
	AssignedTo       string
	SnoozedUntil     *time.Time
	ResolvedAt       *time.Time
	ResolutionSource string // "", IncidentResolvedByAlerts or IncidentResolvedManually
	ArchivedAt       *time.Time
	AlertCount       int
	Alerts           []Alert // Incident only: its occurrences, firing first, at most MaxInlineAlerts
}

// MaxInlineAlerts bounds the alerts Incident returns with an incident.
const MaxInlineAlerts = 1000

const incidentColumns = `i.id, i.group_key, i.title, i.group_labels, i.status, coalesce(i.severity, ''),
	i.triggered_at, i.acknowledged_by_id, coalesce(ab.username, ''), i.acknowledged_at, i.assigned_to_id,
	coalesce(asg.username, ''), i.snoozed_until, i.resolved_at, coalesce(i.resolution_source, ''),
	i.archived_at, i.alert_count`

const incidentFrom = ` FROM incidents i LEFT JOIN users ab ON ab.id = i.acknowledged_by_id
	LEFT JOIN users asg ON asg.id = i.assigned_to_id`

func scanIncident(row pgx.Row) (Incident, error) {
	var in Incident
	err := row.Scan(&in.ID, &in.GroupKey, &in.Title, &in.GroupLabels, &in.Status, &in.Severity, &in.TriggeredAt,
		&in.AcknowledgedByID, &in.AcknowledgedBy, &in.AcknowledgedAt, &in.AssignedToID, &in.AssignedTo,
		&in.SnoozedUntil, &in.ResolvedAt, &in.ResolutionSource, &in.ArchivedAt, &in.AlertCount)
	if in.GroupLabels == nil {
		in.GroupLabels = map[string]string{}
	}
	return in, err
}

// IncidentQuery selects incidents; its filters compose with AND.
type IncidentQuery struct {
	Status   string // "": open (triggered or acknowledged); else that status
	Archived bool   // only archived; else only those not archived
	Snoozed  bool   // only those snoozed until later than now; else only those not snoozed
	Limit    int
}

// Incidents returns the incidents q selects, newest triggered_at first.
func (s *Store) Incidents(ctx context.Context, q IncidentQuery) ([]Incident, error) {
	var where []string
	var args []any
	if q.Status == "" {
		where = append(where, "i.resolved_at IS NULL")
	} else {
		args = append(args, q.Status)
		where = append(where, "i.status = $"+strconv.Itoa(len(args)))
	}
	if q.Archived {
		where = append(where, "i.archived_at IS NOT NULL")
	} else {
		where = append(where, "i.archived_at IS NULL")
	}
	if q.Snoozed {
		where = append(where, "i.snoozed_until > now()")
	} else {
		where = append(where, "(i.snoozed_until IS NULL OR i.snoozed_until <= now())")
	}
	args = append(args, q.Limit)
	rows, err := s.pool.Query(ctx, `SELECT `+incidentColumns+incidentFrom+` WHERE `+strings.Join(where, " AND ")+
		` ORDER BY i.triggered_at DESC, i.id DESC LIMIT $`+strconv.Itoa(len(args)), args...)
	if err != nil {
		return nil, wrap(err, "read incidents")
	}
	defer rows.Close()
	out := []Incident{}
	for rows.Next() {
		in, err := scanIncident(rows)
		if err != nil {
			return nil, wrap(err, "read incidents")
		}
		out = append(out, in)
	}
	return out, wrap(rows.Err(), "read incidents")
}

// Incident returns one incident with its alerts, each as its occurrence in this incident,
// firing first, at most MaxInlineAlerts; ErrNotFound if there is none.
func (s *Store) Incident(ctx context.Context, id int64) (Incident, error) {
	in, err := incidentByID(ctx, s.pool, id)
	if err != nil {
		return in, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+alertColumnsOf("o")+`
		FROM incident_alerts o JOIN alerts a ON a.id = o.alert_id JOIN incidents i ON i.id = o.incident_id
		WHERE o.incident_id = $1 ORDER BY o.status <> 'firing', o.id LIMIT $2`, id, MaxInlineAlerts)
	if err != nil {
		return in, wrap(err, "read the incident's alerts")
	}
	in.Alerts, err = collectAlerts(rows)
	return in, wrap(err, "read the incident's alerts")
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func incidentByID(ctx context.Context, db queryRower, id int64) (Incident, error) {
	in, err := scanIncident(db.QueryRow(ctx, `SELECT `+incidentColumns+incidentFrom+` WHERE i.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return in, ErrNotFound
	}
	return in, wrap(err, "read incident")
}

// IncidentEvent is one entry of an incident's timeline.
type IncidentEvent struct {
	ID         int64
	IncidentID int64
	Type       string
	UserID     *int64
	Username   string // "": the server acted
	AlertID    *int64
	Detail     string
	CreatedAt  time.Time
}

const incidentEventColumns = `id, incident_id, type, user_id, username, alert_id, detail, created_at`

// Timeline returns an incident's events, oldest first; ErrNotFound if there is no such incident.
// The events are read alone, on their index: every incident's timeline begins with its
// triggered event, so only an empty one asks whether the incident exists (joined to incidents,
// every read paid a descent of their primary key that grows with the table).
func (s *Store) Timeline(ctx context.Context, id int64) ([]IncidentEvent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+incidentEventColumns+` FROM incident_events WHERE incident_id = $1 ORDER BY id`, id)
	if err != nil {
		return nil, wrap(err, "read timeline")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (IncidentEvent, error) {
		var e IncidentEvent
		err := row.Scan(&e.ID, &e.IncidentID, &e.Type, &e.UserID, &e.Username, &e.AlertID, &e.Detail, &e.CreatedAt)
		return e, err
	})
	if err != nil {
		return nil, wrap(err, "read timeline")
	}
	if len(out) > 0 {
		return out, nil
	}
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM incidents WHERE id = $1)`, id).Scan(&exists); err != nil {
		return nil, wrap(err, "read timeline")
	}
	if !exists {
		return nil, ErrNotFound
	}
	return []IncidentEvent{}, nil
}

// OpenIncidents counts the open incidents, on the index of the queue.
func (s *Store) OpenIncidents(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM incidents WHERE resolved_at IS NULL`).Scan(&n)
	return n, wrap(err, "count open incidents")
}
