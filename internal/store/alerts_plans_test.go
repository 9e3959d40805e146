package store_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
)

// TestPlans_AlertFeed: the alert feed (GET /api/alerts, which terdut-tui reads with limit=500)
// reads alerts on an index of the feed, never the whole table, and a prepared statement of it settles on one plan
// after five pages rather than planning every page afresh, which costs more the larger the
// table (alertsQuery).
func TestPlans_AlertFeed(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	incidents := planRows / 10
	mustExec(t, st, `INSERT INTO incidents (integration_id, group_key, title, group_labels, status, resolved_at,
			resolution_source, archived_at, alert_count)
		SELECT $1, 'g' || i, 'T', '{}', 'resolved', now(), 'alerts', CASE WHEN i % 5 = 0 THEN now() END, 10
		FROM generate_series(1, $2) i`, c.IntegrationID, incidents)
	mustExec(t, st, `INSERT INTO alerts (integration_id, fingerprint, name, status, labels, annotations, starts_at, ends_at,
			received_at, resolution_source, incident_id)
		SELECT $1, 'fp' || i, 'A', CASE WHEN i % 50 = 0 THEN 'firing' ELSE 'resolved' END, '{}', '{}',
			now() - i * interval '1 minute', CASE WHEN i % 50 <> 0 THEN now() END, now(),
			CASE WHEN i % 50 <> 0 THEN 'alertmanager' END, i % $2 + 1
		FROM generate_series(1, $3) i`, c.IntegrationID, incidents, planRows)
	mustExec(t, st, `ANALYZE incidents, alerts`)

	for _, q := range []store.AlertQuery{{Limit: 500}, {Status: store.AlertFiring, Limit: 500}, {Status: store.AlertResolved, Limit: 100}} {
		sql, args := store.AlertsQuery(q)
		for _, generic := range []bool{false, true} {
			scans := explain(t, st.Pool(), generic, sql, args...).scans()
			if !slices.ContainsFunc(scans, func(s string) bool { return strings.Contains(s, " using alerts_") }) ||
				slices.Contains(scans, "Seq Scan on alerts") {
				t.Errorf("%+v, generic %v: got scans %q, want alerts read on an index of the feed", q, generic, scans)
			}
		}
		pooled, err := st.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Out of the pool: its prepared statements go with it.
		conn := pooled.Hijack()
		for range 10 {
			// As the store reads it: a query, prepared and cached (an Exec without
			// arguments would take the simple protocol).
			rows, err := conn.Query(ctx, sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		var custom int
		if err := conn.QueryRow(ctx, `SELECT custom_plans FROM pg_prepared_statements WHERE statement = $1`, sql).Scan(&custom); err != nil {
			t.Fatal(err)
		}
		if custom > 5 {
			t.Errorf("%+v: got %d of 10 pages planned afresh, want at most the first 5", q, custom)
		}
		if err := conn.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
