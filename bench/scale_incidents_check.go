package bench

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// incidentChecks are the invariants of the incident domain that the server relies on and a bulk
// load could break, each a query counting what breaks it (the unique indexes, foreign keys and
// CHECKs the load went through are the database's to enforce; occurrences and events have no
// foreign key to their incident, so that is checked here). checkIncidents runs them.
var incidentChecks = []struct{ what, sql string }{
	{"occurrences or timeline events without their incident", `SELECT
		(SELECT count(*) FROM incident_alerts o WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = o.incident_id))
		+ (SELECT count(*) FROM incident_events e WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = e.incident_id))`},
	{"groups with more than one open incident", `SELECT count(*) FROM (SELECT 1 FROM incidents WHERE resolved_at IS NULL
		GROUP BY integration_id, group_key HAVING count(*) > 1) x`},
	{"incidents whose alert_count is not their occurrences' count, open ones with nothing firing, ones with a firing " +
		"occurrence the expiry would resolve during the run, severities not the highest of their alerts', occurrences " +
		"of another group or integration than their incident's", `WITH o AS (
			SELECT o.incident_id, count(*) AS n, count(*) FILTER (WHERE o.status = 'firing') AS firing,
				count(*) FILTER (WHERE o.status = 'firing' AND o.last_seen_at < now() - g.expire_after + interval '1 hour') AS expiring,
				max(CASE a.labels->>'severity' WHEN 'critical' THEN 4 WHEN 'error' THEN 3 WHEN 'high' THEN 3
					WHEN 'warning' THEN 2 WHEN 'info' THEN 1 WHEN 'low' THEN 1 ELSE 0 END) AS rank,
				count(*) FILTER (WHERE o.group_key <> i.group_key OR a.integration_id <> i.integration_id) AS strangers
			FROM incident_alerts o JOIN alerts a ON a.id = o.alert_id JOIN incidents i ON i.id = o.incident_id
				JOIN integrations g ON g.id = a.integration_id
			GROUP BY o.incident_id)
		SELECT count(*) FILTER (WHERE i.alert_count <> coalesce(o.n, 0) OR i.resolved_at IS NULL AND coalesce(o.firing, 0) = 0
			OR o.expiring > 0 OR i.severity_rank <> coalesce(o.rank, 0) OR o.strangers > 0)
		FROM incidents i LEFT JOIN o ON o.incident_id = i.id`},
	{"alerts whose row is not their newest occurrence, whose incident_id is not their newest incident, or whose name " +
		"is not their alertname label; alerts with no occurrence", `SELECT count(*) FROM alerts a FULL JOIN (
			SELECT DISTINCT ON (alert_id) alert_id, status, starts_at, ends_at, resolution_source,
				max(incident_id) OVER (PARTITION BY alert_id) AS newest
			FROM incident_alerts ORDER BY alert_id, starts_at DESC, id DESC) o ON o.alert_id = a.id
		WHERE a.id IS NULL OR o.alert_id IS NULL OR a.name <> a.labels->>'alertname'
			OR (a.status, a.starts_at, a.ends_at, a.resolution_source, a.incident_id)
				IS DISTINCT FROM (o.status, o.starts_at, o.ends_at, o.resolution_source, o.newest)`},
	{"incidents whose timeline does not start with triggered, has not one alert_added for each of its first 200 " +
		"alerts, or has no resolved event though resolved (or one though open)", `SELECT count(*) FROM incidents i LEFT JOIN (
			SELECT incident_id, min(id) FILTER (WHERE type = 'triggered') AS triggered, min(id) AS first,
				count(*) FILTER (WHERE type = 'alert_added') AS added, count(*) FILTER (WHERE type = 'resolved') AS resolved
			FROM incident_events GROUP BY incident_id) e ON e.incident_id = i.id
		WHERE e.first IS DISTINCT FROM e.triggered OR coalesce(e.added, 0) <> least(i.alert_count, 200)
			OR coalesce(e.resolved, 0) <> (i.resolved_at IS NOT NULL)::int`},
	{"timeline events out of order of time, or naming an alert not in their incident", `SELECT count(*) FROM (
			SELECT e.created_at < lag(e.created_at) OVER (PARTITION BY e.incident_id ORDER BY e.id) AS early,
				e.alert_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM incident_alerts o
					WHERE o.incident_id = e.incident_id AND o.alert_id = e.alert_id) AS stranger
			FROM incident_events e) x
		WHERE early OR stranger`},
}

// checkIncidents checks the loaded database: occurrences occurrences, a tenth as many incidents
// of which loadOpen open, and every invariant of incidentChecks.
func checkIncidents(ctx context.Context, pool *pgxpool.Pool, occurrences int) error {
	var got [3]int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM incident_alerts), (SELECT count(*) FROM incidents),
		(SELECT count(*) FROM incidents WHERE resolved_at IS NULL)`).Scan(&got[0], &got[1], &got[2]); err != nil {
		return err
	}
	if want := [3]int{occurrences, occurrences / 10, loadOpen}; got != want {
		return fmt.Errorf("got %d occurrences, %d incidents, %d open; want %d, %d, %d", got[0], got[1], got[2], want[0], want[1], want[2])
	}
	var errs []error
	for _, c := range incidentChecks {
		var n int
		if err := pool.QueryRow(ctx, c.sql).Scan(&n); err != nil {
			return fmt.Errorf("check %s: %w", c.what, err)
		}
		if n != 0 {
			errs = append(errs, fmt.Errorf("%d %s", n, c.what))
		}
	}
	return errors.Join(errs...)
}
