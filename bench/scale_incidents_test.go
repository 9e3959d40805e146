package bench

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// TestIncidentDB loads the incident half's smallest database into a real Postgres: the load must
// pass its own invariant checks (newIncidentDB runs them), have the shape both sides share, and
// the checks must catch a load that breaks what the server relies on.
func TestIncidentDB(t *testing.T) {
	ctx := t.Context()
	cluster, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	db, err := newIncidentDB(t, ctx, cluster, "incidents_test", scaleSmallOccurrences)
	if err != nil {
		t.Fatal(err)
	}
	pool := db.st.Pool()

	t.Run("OK", func(t *testing.T) {
		queue, err := db.st.Incidents(ctx, store.IncidentQuery{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(queue), loadOpen-4; got != want {
			t.Errorf("got %d incidents in the queue, want %d (the open ones, less four snoozed)", got, want)
		}
		feed, err := db.st.Alerts(ctx, store.AlertQuery{Limit: 500})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(feed); got != 500 {
			t.Errorf("got %d alerts in the feed's first 500, want 500: GET /api/alerts?limit=500 would answer less at 1k than at 1M", got)
		}
		var statuses, archived, groups, hours, weekdays int
		if err := pool.QueryRow(ctx, `SELECT count(DISTINCT status), count(archived_at), count(DISTINCT group_key),
			(SELECT count(DISTINCT extract(hour FROM starts_at AT TIME ZONE 'UTC')) FROM incident_alerts),
			(SELECT count(DISTINCT extract(isodow FROM starts_at AT TIME ZONE 'UTC')) FROM incident_alerts)
			FROM incidents`).Scan(&statuses, &archived, &groups, &hours, &weekdays); err != nil {
			t.Fatal(err)
		}
		if statuses != 3 || archived == 0 || groups != 25 || hours != 24 || weekdays != 7 {
			t.Errorf("got %d statuses, %d archived, %d groups, occurrences in %d hours of the day and %d weekdays; "+
				"want 3, some, 25, 24, 7", statuses, archived, groups, hours, weekdays)
		}
		open, err := db.refreshGroups(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range open {
			b := g.body
			_, pod := b.CommonLabels["pod"]
			if b.CommonLabels["alertname"] != b.GroupLabels["alertname"] || b.CommonLabels["namespace"] != b.GroupLabels["namespace"] ||
				pod != (len(b.Alerts) == 1) {
				t.Errorf("group %s of %d alerts: got common labels %v, want its group labels and a pod only for one alert",
					b.GroupKey, len(b.Alerts), b.CommonLabels)
			}
		}
	})

	t.Run("ErrBroken", func(t *testing.T) {
		for _, breaks := range []string{
			`UPDATE incidents SET alert_count = alert_count + 1 WHERE id = 50`,
			`UPDATE alerts SET incident_id = NULL WHERE id = 1`,
			`UPDATE alerts SET starts_at = starts_at - interval '1 second' WHERE id = 2`,
			`UPDATE incident_alerts SET last_seen_at = now() - interval '4 hours' WHERE status = 'firing' AND id = (
				SELECT min(id) FROM incident_alerts WHERE status = 'firing')`,
			`UPDATE incident_events SET created_at = created_at + interval '1 day' WHERE type = 'triggered' AND incident_id = 60`,
			`DELETE FROM incident_events WHERE type = 'resolved' AND incident_id = 61`,
			`UPDATE incidents SET severity_rank = 0 WHERE id = 62`,
			`INSERT INTO incident_events (incident_id, type, detail) VALUES (-1, 'note', 'of no incident')`,
		} {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(ctx, breaks); err != nil {
				t.Fatalf("%s: %v", breaks, err)
			}
			var failed int
			for _, c := range incidentChecks {
				var n int
				if err := tx.QueryRow(ctx, c.sql).Scan(&n); err != nil {
					t.Fatalf("%s: %v", c.what, err)
				}
				if n > 0 {
					failed++
				}
			}
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
			if failed == 0 {
				t.Errorf("%s: got no check failing, want one", breaks)
			}
		}
		if err := checkIncidents(ctx, pool, scaleSmallOccurrences); err != nil {
			t.Errorf("after the rollbacks: %v", err)
		}
	})
}
