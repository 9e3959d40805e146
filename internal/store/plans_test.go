package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The plan tests hold the promise of issue 32: the sweep, the audit's filters and a page of
// users are served by indexes, so that they cost the same at a million people as at a
// thousand. Each statement is explained as the store runs it, over tables filled with enough
// rows (and ANALYZEd) that a sequential scan is the planner's real alternative: a dropped
// index, or a condition no index serves (starts_with, an OR across columns), turns up as a
// Seq Scan or as a scan of another index, and fails the test. No planner setting is changed
// but plan_cache_mode: each statement is explained twice, as the custom plan of its first
// executions and as the generic plan a prepared statement (pgx prepares every one) may switch
// to after five.

// planRows is how many rows the plan tests give each large table.
const planRows = 20000

// mustFillForPlans fills users, sessions, API keys, set-password links and audit events with
// planRows rows each (audit events: 2.5 times as many), a few of them revoked, expired or rare,
// and analyzes them.
func mustFillForPlans(tb testing.TB, st *store.Store) {
	tb.Helper()
	mustExecMarked(tb, st, `INSERT INTO users (username, email, password_hash)
		SELECT 'person-' || i, 'person-' || i || '@example.test', 'x' FROM generate_series(1, $1) i`, planRows)
	mustExecMarked(tb, st, `INSERT INTO sessions (user_id, token_hash, expires_at, revoked_at)
		SELECT id, sha256(('session ' || id)::bytea), now() + interval '1 day' + id * interval '1 second',
			CASE WHEN id % 1000 = 0 THEN now() END
		FROM users`)
	mustExecMarked(tb, st, `UPDATE sessions SET expires_at = now() - interval '1 hour' WHERE id % 1000 = 1`)
	mustExec(tb, st, `INSERT INTO api_keys (user_id, name, key_hash, expires_at, revoked_at)
		SELECT id, 'key', sha256(('key ' || id)::bytea),
			CASE WHEN id % 10 = 0 THEN now() + interval '30 days' WHEN id % 1000 = 1 THEN now() - interval '30 days' END,
			CASE WHEN id % 1000 = 0 THEN now() END
		FROM users`)
	mustExec(tb, st, `INSERT INTO password_links (user_id, token_hash, expires_at)
		SELECT id, sha256(('link ' || id)::bytea), now() + CASE WHEN id % 1000 = 0 THEN interval '-1 hour' ELSE interval '1 day' END
		FROM users`)
	// Mostly people's actions on each other, under a handful of names; a few the operator's;
	// bootstrap.* rare.
	mustExec(tb, st, `INSERT INTO audit_events (event, actor_kind, actor_id, actor_name, target_id)
		SELECT CASE WHEN i % 997 = 0 THEN 'bootstrap.claim'
			ELSE (ARRAY['user.created', 'user.deleted', 'user.password_set', 'api_key.created', 'api_key.revoked'])[i % 5 + 1] END,
			CASE WHEN i % 101 = 0 THEN 'operator' ELSE 'user' END,
			CASE WHEN i % 101 = 0 THEN NULL ELSE i % $1 + 1 END, 'someone', i % $1 + 1
		FROM generate_series(1, $1 * 5 / 2) i`, planRows)
	mustExec(tb, st, `ANALYZE users, sessions, api_keys, password_links, audit_events`)
}

// planNode is the part of EXPLAIN (FORMAT JSON) the tests read.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	Relation  string     `json:"Relation Name"`
	IndexName string     `json:"Index Name"`
	IndexCond string     `json:"Index Cond"`
	Plans     []planNode `json:"Plans"`
}

// seeks reports whether the plan reads index in its order (an Index Scan, not a bitmap of
// every match to sort) from an Index Cond: starting where its rows are, rather than reading
// the whole index and filtering.
func (n planNode) seeks(index string) bool {
	if n.IndexName == index && n.IndexCond != "" && strings.HasPrefix(n.NodeType, "Index") {
		return true
	}
	return slices.ContainsFunc(n.Plans, func(c planNode) bool { return c.seeks(index) })
}

// readsPrefix reports whether the plan reads index on a condition that names none of column:
// every entry of a prefix of its key (say, every alert of an integration) rather than the ones
// the statement is about.
func (n planNode) readsPrefix(index, column string) bool {
	if n.IndexName == index && !strings.Contains(n.IndexCond, column) {
		return true
	}
	return slices.ContainsFunc(n.Plans, func(c planNode) bool { return c.readsPrefix(index, column) })
}

// scans lists every scan of the plan as "Node Type on relation [using index]".
func (n planNode) scans() []string {
	var out []string
	if strings.Contains(n.NodeType, "Scan") && n.Relation != "" || n.IndexName != "" {
		s := n.NodeType + " on " + n.Relation
		if n.IndexName != "" {
			s += " using " + n.IndexName
		}
		out = append(out, s)
	}
	for _, c := range n.Plans {
		out = append(out, c.scans()...)
	}
	return out
}

// explain returns the plan of sql with args: its custom plan, or with generic its generic
// plan (prepared, then explained with plan_cache_mode = force_generic_plan).
func explain(tb testing.TB, pool *pgxpool.Pool, generic bool, sql string, args ...any) planNode {
	tb.Helper()
	ctx := context.Background()
	pooled, err := pool.Acquire(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	// Out of the pool: its settings and prepared statement go with it.
	conn := pooled.Hijack()
	defer conn.Close(ctx) //nolint:errcheck // closing a test connection
	stmt := "EXPLAIN (FORMAT JSON) " + sql
	if generic {
		if _, err := conn.Exec(ctx, "PREPARE planned AS "+sql); err != nil {
			tb.Fatalf("prepare %s: %v", sql, err)
		}
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = force_generic_plan"); err != nil {
			tb.Fatal(err)
		}
		// EXECUTE, a utility statement, takes no parameters: the values go in as literals.
		params := make([]string, len(args))
		for i, a := range args {
			params[i] = literal(tb, a)
		}
		stmt, args = "EXPLAIN (FORMAT JSON) EXECUTE planned", nil
		if len(params) > 0 {
			stmt += "(" + strings.Join(params, ", ") + ")"
		}
	}
	var out []byte
	if err := conn.QueryRow(ctx, stmt, args...).Scan(&out); err != nil {
		tb.Fatalf("%s: %v", stmt, err)
	}
	var plans []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
		tb.Fatalf("EXPLAIN's answer: %v, %d plans:\n%s", err, len(plans), out)
	}
	return plans[0].Plan
}

// literal writes a statement's argument as an SQL literal.
func literal(tb testing.TB, a any) string {
	tb.Helper()
	switch v := a.(type) {
	case int, int64:
		return fmt.Sprint(v)
	case string:
		return "'" + strings.ReplaceAll(v, "'", "''") + "'"
	case time.Duration:
		return fmt.Sprintf("'%d microseconds'", v.Microseconds())
	case time.Time:
		return "'" + v.Format(time.RFC3339Nano) + "'::timestamptz"
	case bool:
		return fmt.Sprint(v)
	case nil:
		return "NULL"
	case []string:
		return arrayLiteral(tb, v)
	case []time.Time:
		return arrayLiteral(tb, v)
	case []bool:
		return arrayLiteral(tb, v)
	case []int64:
		return arrayLiteral(tb, v)
	}
	tb.Fatalf("no literal for %T", a)
	return ""
}

// arrayLiteral writes a slice as an SQL array of its elements' literals.
func arrayLiteral[T any](tb testing.TB, v []T) string {
	tb.Helper()
	elems := make([]string, len(v))
	for i, e := range v {
		elems[i] = literal(tb, e)
	}
	return "ARRAY[" + strings.Join(elems, ", ") + "]"
}

// assertIndexed fails unless both plans of sql (custom and generic) scan with index and
// nothing sequentially.
func assertIndexed(t *testing.T, pool *pgxpool.Pool, index, sql string, args ...any) {
	t.Helper()
	assertPlans(t, pool, []bool{false, true}, index, sql, args...)
}

// assertPlans is assertIndexed for the plans modes lists (generic or not).
func assertPlans(t *testing.T, pool *pgxpool.Pool, modes []bool, index, sql string, args ...any) {
	t.Helper()
	for _, generic := range modes {
		scans := explain(t, pool, generic, sql, args...).scans()
		mode := map[bool]string{false: "custom", true: "generic"}[generic]
		usesIndex := slices.ContainsFunc(scans, func(s string) bool { return strings.HasSuffix(s, " using "+index) })
		seq := slices.ContainsFunc(scans, func(s string) bool { return strings.HasPrefix(s, "Seq Scan") })
		if !usesIndex || seq {
			t.Errorf("%s plan: got scans %q, want %s used and no Seq Scan\n%s", mode, scans, index, sql)
		}
	}
}

func TestPlans_Indexed(t *testing.T) {
	st := mustStore(t)
	mustFillForPlans(t, st)
	pool := st.Pool()

	t.Run("Sweep", func(t *testing.T) {
		index := map[string]string{
			"sessions revoked":       "sessions_revoked_at_idx",
			"sessions expired":       "sessions_expires_at_idx",
			"api_keys revoked":       "api_keys_revoked_at_idx",
			"api_keys expired":       "api_keys_expires_at_idx",
			"password_links expired": "password_links_expires_at_idx",
		}
		statements := store.SweepStatements()
		if len(statements) != len(index) {
			t.Fatalf("got %d sweep statements, want %d", len(statements), len(index))
		}
		for name, st := range statements {
			t.Run(name, func(t *testing.T) {
				want, ok := index[name]
				if !ok {
					t.Fatalf("no index expected for %q", name)
				}
				assertIndexed(t, pool, want, st.SQL, append([]any{5000}, st.Args...)...)
			})
		}
	})

	t.Run("Audit", func(t *testing.T) {
		tests := []struct {
			name  string
			q     store.EventQuery
			index string
			sorts bool // the planner may read the index's matches and sort them
		}{
			{"actor", store.EventQuery{ActorID: 1234}, "audit_events_actor_id_idx", false},
			{"actor, before", store.EventQuery{ActorID: 1234, Before: 40000}, "audit_events_actor_id_idx", false},
			{"actor kind", store.EventQuery{ActorKind: store.ActorKindOperator}, "audit_events_actor_kind_idx", false},
			{"actor kind, common", store.EventQuery{ActorKind: store.ActorKindUser}, "audit_events_actor_kind_idx", false},
			{"event", store.EventQuery{Event: "bootstrap.claim"}, "audit_events_event_idx", false},
			{"event, common", store.EventQuery{Event: "user.created"}, "audit_events_event_idx", false},
			// Two filters: the planner reads the index of the rarer (here a person's ten
			// rows), and sorts them.
			{"event, actor", store.EventQuery{Event: "user.created", ActorID: 77}, "audit_events_actor_id_idx", true},
			{"prefix, common", store.EventQuery{Event: "user.*"}, "audit_events_event_idx", false},
			{"prefix, rare", store.EventQuery{Event: "bootstrap.*"}, "audit_events_event_idx", false},
			{"prefix, none", store.EventQuery{Event: "nothing.*"}, "audit_events_event_idx", false},
			{"prefix, before, limit", store.EventQuery{Event: "api_key.*", Before: 10000, Limit: 500}, "audit_events_event_idx", false},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				// Never the primary key: walked backwards, filtering, it reads every row newer
				// than the page (see eventsOnIndex).
				sql, args := store.EventsQuery(tt.q)
				assertIndexed(t, pool, tt.index, sql, args...)
				for _, generic := range []bool{false, true} {
					plan := explain(t, pool, generic, sql, args...)
					if scans := plan.scans(); slices.ContainsFunc(scans,
						func(s string) bool { return strings.HasSuffix(s, "using audit_events_pkey") }) {
						t.Errorf("generic %v: got scans %q, want none on audit_events_pkey", generic, scans)
					}
					if !tt.sorts && !plan.seeks(tt.index) {
						t.Errorf("generic %v: %s is not read in its order from an Index Cond, want the scan to start at the page and stop after it", generic, tt.index)
					}
				}
			})
		}
	})

	t.Run("Users", func(t *testing.T) {
		for _, after := range []int64{0, planRows / 2, planRows - 10} {
			assertIndexed(t, pool, "users_pkey", store.UsersAfterQuery, after, 1000)
		}
	})
}

// TestEvents_AsScan: Events, reading on an index (and for a prefix walking the distinct
// names), answers what a plain scan of the table answers, for common, rare and absent values,
// with and without the other filters and pages.
func TestEvents_AsScan(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	mustFillForPlans(t, st)
	tests := []store.EventQuery{
		{Event: "user.*"},
		{Event: "api_key.*", Limit: 500},
		{Event: "bootstrap.*"},
		{Event: "nothing.*"},
		{Event: "user.*", Before: 20001, Limit: 7},
		{Event: "user.*", ActorID: 77},
		{Event: "bootstrap.*", ActorKind: store.ActorKindOperator},
		{Event: "api_key.*", ActorKind: store.ActorKindUser, Before: 3},
		{Event: "user.created"},
		{Event: "bootstrap.claim", Limit: 500},
		{Event: "user.deleted", Before: 30000, Limit: 3},
		{Event: "user.created", ActorID: 5},
		{ActorID: 1234},
		{ActorID: 1234, Before: 20000},
		{ActorID: 999999},
		{ActorKind: store.ActorKindOperator, Limit: 500},
		{ActorKind: store.ActorKindUser, Before: 100, Limit: 200},
		{ActorKind: store.ActorKindOperator, ActorID: 3},
		{},
		{Before: 17, Limit: 500},
	}
	for _, q := range tests {
		got, err := st.Events(ctx, q)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		limit := q.Limit
		if limit == 0 {
			limit = 50
		}
		rows, err := st.Pool().Query(ctx, `SELECT id FROM audit_events
			WHERE CASE WHEN $1 LIKE '%*' THEN starts_with(event, rtrim($1, '*')) ELSE $1 = '' OR event = $1 END
				AND ($2 = 0 OR id < $2) AND ($3 = 0 OR actor_id = $3)
				AND ($4 = '' OR actor_kind = $4)
			ORDER BY id DESC LIMIT $5`, q.Event, q.Before, q.ActorID, string(q.ActorKind), limit)
		if err != nil {
			t.Fatal(err)
		}
		var want []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			want = append(want, id)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		ids := make([]int64, len(got))
		for i, e := range got {
			ids[i] = e.ID

		}
		if !slices.Equal(ids, want) {
			t.Errorf("%+v: got ids %v, want %v", q, ids, want)
		}
	}
	if n := len(mustEvents(t, st, store.EventQuery{Event: "bootstrap.*"})); n == 0 {
		t.Fatal("got no bootstrap.* event: the fixture has some, and the comparison above needs them")
	}
}

func mustEvents(tb testing.TB, st *store.Store, q store.EventQuery) []store.Event {
	tb.Helper()
	events, err := st.Events(context.Background(), q)
	if err != nil {
		tb.Fatalf("events %+v: %v", q, err)
	}
	return events
}

// TestPlans_IngestLookups holds the statements of a notification that find rows by its values
// to an index seek, with no table read whole, on the statistics of a new install: tables that
// grew by the thousands since they were last analyzed (a join planned on those once scanned
// every occurrence of the install on every notification).
func TestPlans_IngestLookups(t *testing.T) {
	// Statistics as they stand on a new install: taken while the tables were nearly empty, or
	// none taken yet.
	for _, analyze := range []string{"analyzed when empty", "never analyzed"} {
		t.Run(analyze, func(t *testing.T) { ingestLookups(t, analyze == "analyzed when empty") })
	}
}

func ingestLookups(t *testing.T, analyze bool) {
	st := mustStore(t)
	c := mustIntegration(t, st, "plans")
	for _, table := range []string{"alerts", "incidents", "incident_alerts"} {
		sql := `ALTER TABLE ` + table + ` SET (autovacuum_enabled = off)`
		if analyze {
			sql += `; ANALYZE ` + table
		}
		if _, err := st.Pool().Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	var last store.Notification
	for g := range 40 {
		for cycle := range 3 {
			var alerts []store.NotifiedAlert
			for i := range 50 {
				alerts = append(alerts, firing("Plans", fmt.Sprintf("g%02d-%02d", g, i), t0.Add(time.Duration(cycle)*time.Minute)))
			}
			last = group(fmt.Sprintf("g%02d", g), alerts...)
			mustIngest(t, st, c, last)
			for i := range alerts {
				alerts[i] = resolved(alerts[i], t0.Add(time.Hour))
			}
			mustIngest(t, st, c, group(last.GroupKey, alerts...))
		}
	}
	args := ingestLookupArgs(t, st, c, last)
	for name, lookup := range store.IngestLookups {
		t.Run(name, func(t *testing.T) {
			for _, generic := range []bool{false, true} {
				// incidents holds 120 rows here, which a scan reads faster than an index.
				plan := explain(t, st.Pool(), generic, lookup.SQL, args[name]...)
				if plan.readsPrefix("alerts_integration_fingerprint_key", "fingerprint") {
					t.Errorf("%s plan reads every alert of the integration (alerts_integration_fingerprint_key without a fingerprint)",
						map[bool]string{false: "custom", true: "generic"}[generic])
				}
				if plan.readsPrefix("alerts_incident_idx", "incident_id =") {
					t.Errorf("%s plan reads a range of alerts_incident_idx (every alert of the older incidents)",
						map[bool]string{false: "custom", true: "generic"}[generic])
				}
				scans := plan.scans()
				whole := slices.ContainsFunc(scans, func(s string) bool {
					return s == "Seq Scan on alerts" || s == "Seq Scan on incident_alerts"
				})
				if whole || !slices.ContainsFunc(scans, func(s string) bool { return strings.HasSuffix(s, " using "+lookup.Index) }) {
					t.Errorf("%s plan: got scans %q, want %s used and neither alerts nor incident_alerts read whole",
						map[bool]string{false: "custom", true: "generic"}[generic], scans, lookup.Index)
				}
			}
		})
	}
}

// TestPlans_Stats holds the statistics' promise (issue 39): each reads the counters alone,
// never incidents, incident_alerts or alerts, however many rows those hold; and the counters'
// rows are as many as the names, hours and days, not the occurrences. Retention's batches are
// found on indexes.
func TestPlans_Stats(t *testing.T) {
	st := mustStore(t)
	var integration int64
	if err := st.Pool().QueryRow(context.Background(), `INSERT INTO integrations (name) VALUES ('plans') RETURNING id`).
		Scan(&integration); err != nil {
		t.Fatal(err)
	}
	// planRows alerts of 50 names, each firing in one of planRows/10 incidents, a third resolved,
	// written in bulk (each statement is one change of the counters).
	mustExec(t, st, `INSERT INTO alerts (integration_id, fingerprint, name, status, labels, annotations, starts_at, received_at)
		SELECT $1, 'fp' || i, 'Alert' || i % 50, 'firing', '{}', '{}', now() - i * interval '7 minutes', now()
		FROM generate_series(1, $2) i`, integration, planRows)
	mustExec(t, st, `INSERT INTO incidents (integration_id, group_key, title, group_labels, status)
		SELECT $1, 'g' || i, 'title', '{}', 'triggered' FROM generate_series(1, $2) i`, integration, planRows/10)
	mustExec(t, st, `INSERT INTO incident_alerts (incident_id, alert_id, group_key, starts_at, status)
		SELECT i.id, a.id, i.group_key, a.starts_at, 'firing'
		FROM alerts a JOIN incidents i ON i.id = (a.id - 1) % ($1 / 10) + (SELECT min(id) FROM incidents)`, planRows)
	mustExec(t, st, `UPDATE incident_alerts SET status = 'resolved', ends_at = now(), resolution_source = 'alertmanager' WHERE id % 3 = 0`)
	mustExec(t, st, `UPDATE incidents SET status = 'resolved', resolved_at = now(), resolution_source = 'manual' WHERE id % 4 = 0`)
	mustExec(t, st, `ANALYZE alerts, incidents, incident_alerts, stats_shards, stats_counts`)
	assertStatsMatch(t, st, "filled")
	if n := mustCount(t, st, `SELECT count(*) FROM stats_counts`); n > 8*(50+24+7) {
		t.Fatalf("got %d rows of counts for 50 names, 24 hours and 7 days, want at most %d", n, 8*(50+24+7))
	}
	pool := st.Pool()
	// Retention finds its batches on indexes: the oldest resolutions, the alerts of no incident.
	mustExec(t, st, `UPDATE incidents SET resolved_at = now() - interval '500 days' WHERE id % 40 = 0`)
	mustExec(t, st, `UPDATE alerts a SET incident_id = CASE WHEN a.id % 100 <> 0 THEN o.incident_id END
		FROM incident_alerts o WHERE o.alert_id = a.id`)
	mustExec(t, st, `ANALYZE alerts, incidents`)
	retain := store.RetentionStatements(400*24*time.Hour, 1000)
	t.Run("retain incidents", func(t *testing.T) {
		assertIndexed(t, pool, "incidents_resolved_at_idx", retain["incidents"].SQL, retain["incidents"].Args...)
		// The firing occurrences are looked up per incident, never all read.
		for _, generic := range []bool{false, true} {
			scans := explain(t, pool, generic, retain["incidents"].SQL, retain["incidents"].Args...).scans()
			if !slices.Contains(scans, "Index Only Scan on incident_alerts using incident_alerts_incident_idx") &&
				!slices.Contains(scans, "Index Scan on incident_alerts using incident_alerts_incident_idx") {
				t.Errorf("generic %v: got scans %q, want incident_alerts_incident_idx for the firing ones", generic, scans)
			}
			if slices.ContainsFunc(scans, func(s string) bool { return strings.HasSuffix(s, "incident_alerts_expiry_idx") }) {
				t.Errorf("generic %v: got scans %q, want none of every firing occurrence", generic, scans)
			}
		}
	})
	t.Run("retain alerts", func(t *testing.T) {
		assertIndexed(t, pool, "alerts_incident_idx", retain["alerts"].SQL, retain["alerts"].Args...)
	})
	for name, s := range store.StatsStatements() {
		t.Run(name, func(t *testing.T) {
			for _, generic := range []bool{false, true} {
				scans := explain(t, pool, generic, s.SQL, s.Args...).scans()
				for _, scan := range scans {
					if !strings.Contains(scan, " on stats_shards") && !strings.Contains(scan, " on stats_counts") {
						t.Errorf("generic %v: got scans %q, want the counters' tables alone", generic, scans)
					}
				}
				if len(scans) == 0 {
					t.Errorf("generic %v: no scan in the plan: is it being read?", generic)
				}
			}
		})
	}
}

// ingestLookupArgs are the arguments of store.IngestLookups for notification n of c's
// integration: its alerts' lookups, their join, and the resolution of the newest occurrences,
// as many as it has alerts.
func ingestLookupArgs(t *testing.T, st *store.Store, c store.IntegrationCaller, n store.Notification) map[string][]any {
	t.Helper()
	fingerprints, starts, joins := []string{}, []time.Time{}, []bool{}
	for _, a := range n.Alerts {
		fingerprints, starts, joins = append(fingerprints, a.Fingerprint), append(starts, a.StartsAt), append(joins, true)
	}
	var stopIDs []int64
	if err := st.Pool().QueryRow(t.Context(), `SELECT array_agg(id) FROM (SELECT id FROM incident_alerts ORDER BY id DESC LIMIT $1) o`,
		len(n.Alerts)).Scan(&stopIDs); err != nil {
		t.Fatal(err)
	}
	return map[string][]any{
		"find occurrences":    {c.IntegrationID, n.GroupKey, fingerprints, starts},
		"join":                {c.IntegrationID, n.GroupKey, nil, fingerprints, starts, joins},
		"resolve occurrences": {stopIDs, starts},
	}
}

// TestPlans_IngestCachedPlans: a connection keeps the generic plan of each statement it
// prepared, made on the tables as they were then; here they are small when the plans are
// made, then grow by thousands of rows, unanalyzed (a new install's first minutes). In a
// notification's transaction those plans still find the rows by key, never reading a table
// whole (without its settings, resolving 50 occurrences read every one); and a notification's
// transaction runs with those settings (a trigger planted for the test records them).
func TestPlans_IngestCachedPlans(t *testing.T) {
	ctx := t.Context()
	st := mustStore(t)
	c := mustIntegration(t, st, "plans")
	for _, table := range []string{"alerts", "incidents", "incident_alerts"} {
		mustExec(t, st, `ALTER TABLE `+table+` SET (autovacuum_enabled = off)`)
	}
	notification := func(key string, alerts, cycle int, resolve bool) store.Notification {
		var out []store.NotifiedAlert
		for i := range alerts {
			a := firing("Plans", fmt.Sprintf("%s-%02d", key, i), t0.Add(time.Duration(cycle)*time.Minute))
			if resolve {
				a = resolved(a, t0.Add(time.Hour))
			}
			out = append(out, a)
		}
		return group(key, out...)
	}
	argsOf := func(n store.Notification) map[string]string {
		out := map[string]string{}
		for name, args := range ingestLookupArgs(t, st, c, n) {
			lits := make([]string, len(args))
			for i, a := range args {
				lits[i] = literal(t, a)
			}
			out[name] = "(" + strings.Join(lits, ", ") + ")"
		}
		return out
	}
	pooled, err := st.Pool().Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	conn := pooled.Hijack()
	defer conn.Close(ctx) //nolint:errcheck // closing a test connection
	exec := func(sql string) {
		t.Helper()
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%.200s: %v", sql, err)
		}
	}
	// The plans are made at the first execution, on small tables, as a notification makes them.
	small := notification("small", 3, 0, false)
	mustIngest(t, st, c, small)
	exec(`SET plan_cache_mode = force_generic_plan`)
	args := argsOf(notification(small.GroupKey, 3, 1, false)) // a later start: the join adds occurrences
	names := map[string]string{}
	for name, lookup := range store.IngestLookups {
		names[name] = fmt.Sprintf("cached_%d", len(names))
		exec("PREPARE " + names[name] + " AS " + lookup.SQL)
		exec("BEGIN")
		exec(store.IngestSettingsSQL)
		exec("EXECUTE " + names[name] + args[name])
		exec("ROLLBACK")
	}
	var last store.Notification
	for g := range 40 {
		for cycle := range 3 {
			last = notification(fmt.Sprintf("g%02d", g), 50, cycle, false)
			mustIngest(t, st, c, last)
			mustIngest(t, st, c, notification(last.GroupKey, 50, cycle, true))
		}
	}
	args = argsOf(last)
	for name := range store.IngestLookups {
		exec("BEGIN")
		exec(store.IngestSettingsSQL)
		var out []byte
		if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE "+names[name]+args[name]).Scan(&out); err != nil {
			t.Fatal(err)
		}
		exec("ROLLBACK")
		var plans []struct {
			Plan planNode `json:"Plan"`
		}
		if err := json.Unmarshal(out, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("EXPLAIN's answer: %v:\n%s", err, out)
		}
		if scans := plans[0].Plan.scans(); slices.ContainsFunc(scans, func(s string) bool {
			return s == "Seq Scan on alerts" || s == "Seq Scan on incident_alerts"
		}) {
			t.Errorf("%s: the plan cached on small tables reads one whole once they grew: %q", name, scans)
		}
	}

	mustExec(t, st, `CREATE TABLE seen_settings (enable_seqscan text, jit text)`)
	mustExec(t, st, `CREATE FUNCTION record_settings() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO seen_settings VALUES (current_setting('enable_seqscan'), current_setting('jit'));
			RETURN NULL;
		END $$`)
	mustExec(t, st, `CREATE TRIGGER record_settings AFTER INSERT ON incident_alerts FOR EACH STATEMENT EXECUTE FUNCTION record_settings()`)
	mustIngest(t, st, c, notification("recorded", 2, 0, false))
	if n := mustCount(t, st, `SELECT count(*) FROM seen_settings WHERE enable_seqscan = 'off' AND jit = 'off'`); n != 1 {
		t.Fatalf("the notification's occurrences were written with %d of 1 statements planned with its settings", n)
	}
}
