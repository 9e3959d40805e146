package store

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Alert is what Alertmanager said of one alert (one per integration and fingerprint), as of
// its current occurrence in the feed, or as of one occurrence in an incident.
type Alert struct {
	ID               int64
	Fingerprint      string
	Name             string
	Status           string
	Labels           map[string]string
	Annotations      map[string]string
	StartsAt         time.Time
	EndsAt           *time.Time
	GeneratorURL     string
	ReceivedAt       time.Time
	ArchivedAt       *time.Time // its (newest) incident's archiving, once it is resolved
	IncidentID       *int64
	ResolutionSource string // "" while firing; ResolvedByAlertmanager or ResolvedByExpiry
}

// alertColumnsOf selects an Alert with the state (status, start, end, resolution) of the rows
// aliased occ: the alert's own current occurrence ("a") or one occurrence in incident i ("o").
// Both join the incident as i.
func alertColumnsOf(occ string) string {
	return `a.id, a.fingerprint, a.name, ` + occ + `.status, a.labels, a.annotations, ` + occ + `.starts_at, ` +
		occ + `.ends_at, a.generator_url, a.received_at,
		CASE WHEN ` + occ + `.status = 'resolved' THEN i.archived_at END, i.id, coalesce(` + occ + `.resolution_source, '')`
}

func collectAlerts(rows pgx.Rows) ([]Alert, error) {
	defer rows.Close()
	out := []Alert{}
	for rows.Next() {
		var a Alert
		if err := rows.Scan(&a.ID, &a.Fingerprint, &a.Name, &a.Status, &a.Labels, &a.Annotations, &a.StartsAt,
			&a.EndsAt, &a.GeneratorURL, &a.ReceivedAt, &a.ArchivedAt, &a.IncidentID, &a.ResolutionSource); err != nil {
			return nil, err
		}
		if a.Labels == nil {
			a.Labels = map[string]string{}
		}
		if a.Annotations == nil {
			a.Annotations = map[string]string{}
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// AlertQuery selects alerts of the feed; its filters compose with AND.
type AlertQuery struct {
	Status   string // "": all; else AlertFiring or AlertResolved
	Archived bool   // only archived (resolved, and its newest incident archived); else only the rest
	Limit    int
}

const alertFeedFrom = ` FROM alerts a LEFT JOIN incidents i ON i.id = a.incident_id`

// Alerts returns the feed's alerts q selects, the newest start first.
func (s *Store) Alerts(ctx context.Context, q AlertQuery) ([]Alert, error) {
	sql, args := alertsQuery(q)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, wrap(err, "read alerts")
	}
	out, err := collectAlerts(rows)
	return out, wrap(err, "read alerts")
}

// alertsQuery is the statement and arguments of Alerts. The limit is written into the statement
// (a whole number, never text), as the audit's is (eventsQuery): as a parameter, the prepared
// statement's generic plan is costed for a tenth of the table (at a million alerts, a parallel
// scan), never chosen, and every page pays for planning afresh.
func alertsQuery(q AlertQuery) (string, []any) {
	var where []string
	var args []any
	if q.Status != "" {
		args = append(args, q.Status)
		where = append(where, "a.status = $"+strconv.Itoa(len(args)))
	}
	archived := "(a.status = 'resolved' AND i.archived_at IS NOT NULL)"
	if q.Archived {
		where = append(where, archived)
	} else {
		where = append(where, "NOT "+archived)
	}
	return `SELECT ` + alertColumnsOf("a") + alertFeedFrom + ` WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY a.starts_at DESC, a.id DESC LIMIT ` + strconv.Itoa(q.Limit), args
}

// AlertByID returns one alert of the feed; ErrNotFound if there is none.
func (s *Store) AlertByID(ctx context.Context, id int64) (Alert, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+alertColumnsOf("a")+alertFeedFrom+` WHERE a.id = $1`, id)
	if err != nil {
		return Alert{}, wrap(err, "read alert")
	}
	out, err := collectAlerts(rows)
	if err != nil {
		return Alert{}, wrap(err, "read alert")
	}
	if len(out) == 0 {
		return Alert{}, ErrNotFound
	}
	return out[0], nil
}
