package store

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statistics of terdut-tui's statistics tab and of the bars over its lists
// (../shared/incident-contract.md). They count every occurrence and incident the server keeps,
// archived ones included, until retention deletes them. None reads incidents or
// incident_alerts: triggers keep counts as their rows change (migrations/00023_stats.sql), in
// shards (as many as transactions ever changed counts at once), and each read sums the shards'
// rows.

// AlertStats counts occurrences (an alert's firings, each in one incident), not alert rows.
type AlertStats struct {
	Total    int64
	Firing   int64
	Resolved int64
}

// IncidentStats counts incidents by status, with the mean times: nil until an incident was
// acknowledged (MTTA, from triggered_at to its first acknowledgement, which an unacknowledge
// does not undo) or resolved (MTTR, from triggered_at to resolved_at, by hand or by its alerts).
type IncidentStats struct {
	Total        int64
	Triggered    int64
	Acknowledged int64
	Resolved     int64
	MTTA         *time.Duration
	MTTR         *time.Duration
}

// Count is a number of occurrences under a key: an alert name, a UTC hour (0-23) of their
// start, or an ISO weekday (1 Monday to 7 Sunday) of their start.
type Count struct {
	Key   string
	Count int64
}

// alertStatsSQL sums the shards' occurrence counts.
const alertStatsSQL = `SELECT coalesce(pg_catalog.sum(occurrences_firing), 0)::bigint,
	coalesce(pg_catalog.sum(occurrences_resolved), 0)::bigint FROM stats_shards`

// incidentStatsSQL sums the shards' incident counts; the means in microseconds, null without
// anything to average.
const incidentStatsSQL = `SELECT coalesce(pg_catalog.sum(incidents_triggered), 0)::bigint,
	coalesce(pg_catalog.sum(incidents_acknowledged), 0)::bigint, coalesce(pg_catalog.sum(incidents_resolved), 0)::bigint,
	pg_catalog.round(pg_catalog.sum(acknowledge_seconds) * 1000000 / NULLIF(pg_catalog.sum(first_acknowledgements), 0))::bigint,
	pg_catalog.round(pg_catalog.sum(resolve_seconds) * 1000000 / NULLIF(pg_catalog.sum(incidents_resolved), 0))::bigint
	FROM stats_shards`

// countsSQL sums one kind of the shards' keyed counts ($1), leaving out keys that sum to 0:
// by count, highest first, ties by key in byte order; at most $2.
const countsSQL = `SELECT key, pg_catalog.sum(n)::bigint FROM stats_counts WHERE kind = $1
	GROUP BY key HAVING pg_catalog.sum(n) <> 0 ORDER BY 2 DESC, key COLLATE "C" LIMIT $2`

// AlertStats counts the occurrences kept, firing and resolved.
func (s *Store) AlertStats(ctx context.Context) (AlertStats, error) {
	var a AlertStats
	err := s.pool.QueryRow(ctx, alertStatsSQL).Scan(&a.Firing, &a.Resolved)
	a.Total = a.Firing + a.Resolved
	return a, wrap(err, "read alert statistics")
}

// IncidentStats counts the incidents kept by status, with their mean times.
func (s *Store) IncidentStats(ctx context.Context) (IncidentStats, error) {
	var in IncidentStats
	var mtta, mttr *int64
	err := s.pool.QueryRow(ctx, incidentStatsSQL).Scan(&in.Triggered, &in.Acknowledged, &in.Resolved, &mtta, &mttr)
	in.Total = in.Triggered + in.Acknowledged + in.Resolved
	in.MTTA, in.MTTR = micros(mtta), micros(mttr)
	return in, wrap(err, "read incident statistics")
}

func micros(us *int64) *time.Duration {
	if us == nil {
		return nil
	}
	d := time.Duration(*us) * time.Microsecond
	return &d
}

// TopAlerts returns the alert names with the most occurrences, at most limit, by count
// (highest first), ties by name in byte order.
func (s *Store) TopAlerts(ctx context.Context, limit int) ([]Count, error) {
	return s.counts(ctx, "name", limit)
}

// AlertsByHour counts occurrences by the UTC hour of their start, hours 0 to 23 in order,
// those without any left out.
func (s *Store) AlertsByHour(ctx context.Context) ([]Count, error) {
	return s.numbered(ctx, "hour", 24)
}

// AlertsByDay counts occurrences by the ISO weekday of their start (UTC), 1 (Monday) to 7
// (Sunday) in order, days without any left out.
func (s *Store) AlertsByDay(ctx context.Context) ([]Count, error) {
	return s.numbered(ctx, "day", 7)
}

// numbered returns the counts of a kind keyed by small numbers, at most max, in their order.
func (s *Store) numbered(ctx context.Context, kind string, max int) ([]Count, error) {
	out, err := s.counts(ctx, kind, max)
	if err != nil {
		return nil, err
	}
	num := func(c Count) int { n, _ := strconv.Atoi(c.Key); return n }
	slices.SortFunc(out, func(a, b Count) int { return num(a) - num(b) })
	return out, nil
}

func (s *Store) counts(ctx context.Context, kind string, limit int) ([]Count, error) {
	rows, err := s.pool.Query(ctx, countsSQL, kind, limit)
	if err != nil {
		return nil, wrap(err, "read "+kind+" statistics")
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Count, error) {
		var c Count
		return c, row.Scan(&c.Key, &c.Count)
	})
	if out == nil {
		out = []Count{}
	}
	return out, wrap(err, "read "+kind+" statistics")
}
