package store_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// statsView is every statistic at once, as the store answers them or as the reference
// computes them.
type statsView struct {
	Alerts    store.AlertStats
	Incidents store.IncidentStats
	Top       []store.Count
	ByHour    []store.Count
	ByDay     []store.Count
}

// mustStats reads every statistic from the store, the top list whole.
func mustStats(tb testing.TB, st *store.Store) statsView {
	tb.Helper()
	ctx := context.Background()
	var v statsView
	var err error
	if v.Alerts, err = st.AlertStats(ctx); err != nil {
		tb.Fatal(err)
	}
	if v.Incidents, err = st.IncidentStats(ctx); err != nil {
		tb.Fatal(err)
	}
	if v.Top, err = st.TopAlerts(ctx, 100000); err != nil {
		tb.Fatal(err)
	}
	if v.ByHour, err = st.AlertsByHour(ctx); err != nil {
		tb.Fatal(err)
	}
	if v.ByDay, err = st.AlertsByDay(ctx); err != nil {
		tb.Fatal(err)
	}
	return v
}

// mustReference computes every statistic in Go from the base rows, read plainly: what the
// counters must equal.
func mustReference(tb testing.TB, st *store.Store) statsView {
	tb.Helper()
	ctx := context.Background()
	var v statsView
	rows, err := st.Pool().Query(ctx, `SELECT o.status, o.starts_at, a.name FROM incident_alerts o JOIN alerts a ON a.id = o.alert_id`)
	if err != nil {
		tb.Fatal(err)
	}
	names, hours, days := map[string]int64{}, map[string]int64{}, map[string]int64{}
	for rows.Next() {
		var status, name string
		var startsAt time.Time
		if err := rows.Scan(&status, &startsAt, &name); err != nil {
			tb.Fatal(err)
		}
		v.Alerts.Total++
		if status == store.AlertFiring {
			v.Alerts.Firing++
		} else {
			v.Alerts.Resolved++
		}
		names[name]++
		hours[strconv.Itoa(startsAt.UTC().Hour())]++
		day := int(startsAt.UTC().Weekday())
		if day == 0 {
			day = 7
		}
		days[strconv.Itoa(day)]++
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	rows, err = st.Pool().Query(ctx, `SELECT status, triggered_at, first_acknowledged_at, resolved_at FROM incidents`)
	if err != nil {
		tb.Fatal(err)
	}
	var acks, ackMicros, resMicros int64
	for rows.Next() {
		var status string
		var triggered time.Time
		var firstAck, resolvedAt *time.Time
		if err := rows.Scan(&status, &triggered, &firstAck, &resolvedAt); err != nil {
			tb.Fatal(err)
		}
		v.Incidents.Total++
		switch status {
		case store.IncidentTriggered:
			v.Incidents.Triggered++
		case store.IncidentAcknowledged:
			v.Incidents.Acknowledged++
		case store.IncidentResolved:
			v.Incidents.Resolved++
		}
		if firstAck != nil {
			acks++
			ackMicros += firstAck.Sub(triggered).Microseconds()
		}
		if resolvedAt != nil {
			resMicros += resolvedAt.Sub(triggered).Microseconds()
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	v.Incidents.MTTA = meanMicros(ackMicros, acks)
	v.Incidents.MTTR = meanMicros(resMicros, v.Incidents.Resolved)
	v.Top = sortedCounts(names, func(a, b store.Count) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Key, b.Key))
	})
	byNumber := func(a, b store.Count) int {
		x, _ := strconv.Atoi(a.Key)
		y, _ := strconv.Atoi(b.Key)
		return x - y
	}
	v.ByHour, v.ByDay = sortedCounts(hours, byNumber), sortedCounts(days, byNumber)
	return v
}

// meanMicros is sum/n microseconds rounded half up, nil for n = 0.
func meanMicros(sum, n int64) *time.Duration {
	if n == 0 {
		return nil
	}
	d := time.Duration((2*sum+n)/(2*n)) * time.Microsecond
	return &d
}

func sortedCounts(m map[string]int64, order func(a, b store.Count) int) []store.Count {
	out := []store.Count{}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, store.Count{Key: k, Count: m[k]})
	}
	slices.SortStableFunc(out, order)
	return out
}

// assertStatsMatch fails unless the store's statistics equal the reference's.
func assertStatsMatch(tb testing.TB, st *store.Store, when string) statsView {
	tb.Helper()
	got, want := mustStats(tb, st), mustReference(tb, st)
	if !reflect.DeepEqual(got, want) {
		tb.Fatalf("%s: got statistics\n%s\nwant (the reference)\n%s", when, got, want)
	}
	return got
}

func (v statsView) String() string {
	d := func(p *time.Duration) string {
		if p == nil {
			return "nil"
		}
		return p.String()
	}
	return fmt.Sprintf("alerts %+v\nincidents total %d triggered %d acknowledged %d resolved %d mtta %s mttr %s\ntop %v\nby hour %v\nby day %v",
		v.Alerts, v.Incidents.Total, v.Incidents.Triggered, v.Incidents.Acknowledged, v.Incidents.Resolved,
		d(v.Incidents.MTTA), d(v.Incidents.MTTR), v.Top, v.ByHour, v.ByDay)
}

// TestStats_Quiet: a server with nothing counts zeros, no mean times, and empty lists (not nil:
// the API answers []).
func TestStats_Quiet(t *testing.T) {
	st := mustStore(t)
	v := assertStatsMatch(t, st, "quiet")
	if v.Incidents.MTTA != nil || v.Incidents.MTTR != nil || v.Top == nil || v.ByHour == nil || v.ByDay == nil ||
		len(v.Top)+len(v.ByHour)+len(v.ByDay) != 0 {
		t.Fatalf("quiet: got %s", v)
	}
}

// mustWorker creates a member and returns them as the timeline names them.
func mustWorker(tb testing.TB, st *store.Store, username string) store.Worker {
	tb.Helper()
	u := mustUser(tb, st, username, store.RoleMember)
	return store.Worker{ID: u.ID, Username: u.Username}
}

// spread is the start of the i-th alert of the statistics' data set: spread over hours and
// weekdays.
func spread(i int) time.Time {
	return time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * (7*time.Hour + 13*time.Minute))
}

// TestStats_AgainstReference: the counters equal a reference computed from the base rows after
// every kind of change the server makes, each through its real path: notifications that open,
// join, refresh, resolve, replay, truncate and rename; acknowledgements, unacknowledgements,
// manual resolutions, assignments, snoozes, archives; expiry and firing again after it; a
// person's deletion; a writer outside the store; and retention.
func TestStats_AgainstReference(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	a, b := mustWorker(t, st, "alice"), mustWorker(t, st, "bob")
	names := []string{"CPU", "Disk", "Mem", "Net", "Disk"}

	// Six groups of three to five alerts, spread over hours and days.
	groups := make([][]store.NotifiedAlert, 6)
	ids := make([]int64, 6)
	n := 0
	for g := range groups {
		for range 3 + g%3 {
			groups[g] = append(groups[g], firing(names[n%len(names)], fmt.Sprintf("fp%02d", n), spread(n), "severity", "warning"))
			n++
		}
		ids[g] = mustIngest(t, st, c, group(fmt.Sprintf("g%d", g), groups[g]...)).IncidentID
	}
	assertStatsMatch(t, st, "opened")
	mustIngest(t, st, c, group("g0", groups[0]...)) // a replay
	mustExec(t, st, `UPDATE incident_alerts SET last_seen_at = now() - interval '1 minute'`)
	mustIngest(t, st, c, group("g1", groups[1]...)) // a refresh
	assertStatsMatch(t, st, "replayed and refreshed")

	must := func(_ store.Incident, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(st.Acknowledge(ctx, ids[0], a))
	must(st.Acknowledge(ctx, ids[1], a))
	must(st.Acknowledge(ctx, ids[2], b))
	assertStatsMatch(t, st, "acknowledged")
	if err := st.Unacknowledge(ctx, ids[1], b); err != nil {
		t.Fatal(err)
	}
	if err := st.Unacknowledge(ctx, ids[2], b); err != nil {
		t.Fatal(err)
	}
	v := assertStatsMatch(t, st, "unacknowledged")
	if v.Incidents.Acknowledged != 1 || v.Incidents.MTTA == nil || v.Incidents.MTTR != nil {
		t.Fatalf("an unacknowledge keeps the first acknowledgement in the mean: got %s", v)
	}
	must(st.Acknowledge(ctx, ids[1], b)) // again: the first one still counts
	must(st.Assign(ctx, ids[3], b.ID))
	must(st.Snooze(ctx, ids[3], time.Hour, a))
	assertStatsMatch(t, st, "acknowledged again, assigned, snoozed")

	must(st.Resolve(ctx, ids[0], a)) // acknowledged, then resolved by hand
	must(st.Resolve(ctx, ids[3], b)) // never acknowledged
	var stopped []store.NotifiedAlert
	for _, x := range groups[4] {
		stopped = append(stopped, resolved(x, x.StartsAt.Add(time.Hour)))
	}
	mustIngest(t, st, c, group("g4", stopped...)) // every alert stopped: resolved by its alerts
	mustIngest(t, st, c, group("g5", append([]store.NotifiedAlert{resolved(groups[5][0], spread(99))}, groups[5][1:]...)...))
	v = assertStatsMatch(t, st, "resolved by hand and by the alerts")
	if v.Incidents.MTTR == nil || v.Incidents.Resolved != 3 {
		t.Fatalf("three resolved: got %s", v)
	}

	// Expiry: g5's firing alerts stop being reported; a truncated notification of g2 keeps its alive.
	mustExec(t, st, `UPDATE incident_alerts SET last_seen_at = now() - interval '5 hours' WHERE status = 'firing'`)
	truncated := group("g2", groups[2][0])
	truncated.TruncatedAlerts = len(groups[2]) - 1
	mustIngest(t, st, c, truncated)
	if r, err := st.ExpireAlerts(ctx, 100); err != nil || r.Expired == 0 || r.Resolved == 0 ||
		mustIncident(t, st, ids[5]).ResolutionSource != store.IncidentResolvedByAlerts {
		t.Fatalf("expiry: got %+v, %v, want g5's alerts expired and its incident resolved", r, err)
	}
	assertStatsMatch(t, st, "expired")
	// An expired alert reported firing again opens a new incident; a resolved one that fires
	// from a new start is a new occurrence.
	ids = append(ids, mustIngest(t, st, c, group("g5", groups[5][1])).IncidentID)
	again := groups[4][0]
	again.StartsAt = spread(50)
	mustIngest(t, st, c, group("g4", again))
	// The real end of an expired one corrects it, with no event.
	mustIngest(t, st, c, group("g5", resolved(groups[5][2], spread(60))))
	assertStatsMatch(t, st, "fired again")

	// Archives, a person's deletion (acknowledged_by_id and assigned_to_id go null), a rename
	// (only another sender than Alertmanager reuses a fingerprint for another name), a
	// resolution of what never fired, and a writer outside the store.
	must(st.Archive(ctx, ids[0]))
	must(st.Archive(ctx, ids[4]))
	if err := st.Unarchive(ctx, ids[4]); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteUser(ctx, b.ID); err != nil {
		t.Fatal(err)
	}
	renamed := groups[1][0]
	renamed.Labels = map[string]string{"alertname": "Renamed"}
	mustIngest(t, st, c, group("g1", append([]store.NotifiedAlert{renamed}, groups[1][1:]...)...))
	mustIngest(t, st, c, group("g9", resolved(firing("Never", "never", spread(7)), spread(8))))
	mustExec(t, st, `UPDATE incidents SET triggered_at = triggered_at - interval '90 minutes' WHERE id = $1`, ids[1])
	v = assertStatsMatch(t, st, "archived, a person deleted, renamed, rewritten")
	if !slices.ContainsFunc(v.Top, func(x store.Count) bool { return x.Key == "Renamed" }) ||
		slices.ContainsFunc(v.Top, func(x store.Count) bool { return x.Key == "Never" }) {
		t.Fatalf("top: got %v, want Renamed counted and Never not", v.Top)
	}
	if len(v.ByHour) < 5 || len(v.ByDay) < 5 || v.Alerts.Firing == 0 || v.Alerts.Resolved == 0 {
		t.Fatalf("the data set should spread over hours and days, firing and resolved: got %s", v)
	}

	// Retention deletes the oldest resolved incidents, their occurrences, and the alerts left
	// with none.
	for _, id := range []int64{ids[0], ids[3], ids[4]} {
		mustAge(t, st, id, 500)
	}
	if res := mustRetain(t, st, 1000); res.Incidents != 3 || res.Occurrences == 0 || res.Alerts == 0 {
		t.Fatalf("retention: got %+v, want 3 incidents with their occurrences and some alerts", res)
	}
	assertStatsMatch(t, st, "after retention")
}

// TestStats_Truncate: a truncated table counts nothing, and counting starts again from there.
func TestStats_Truncate(t *testing.T) {
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	mustIngest(t, st, c, group("g", firing("CPU", "f1", t0), firing("Disk", "f2", t0)))
	mustExec(t, st, `TRUNCATE incident_events, incident_alerts, incidents CASCADE`)
	if v := assertStatsMatch(t, st, "truncated"); v.Alerts.Total != 0 || v.Incidents.Total != 0 {
		t.Fatalf("truncated: got %s", v)
	}
	mustIngest(t, st, c, group("g", firing("CPU", "f1", t0)))
	assertStatsMatch(t, st, "after the truncation")
}

// TestStats_ConcurrentReplicas: three replicas (stores of their own pools) at once, round after
// round: notifications of groups of their own and of groups they share, acknowledgements,
// unacknowledgements and resolutions of the incidents they open, and the expiry, all racing.
// Nothing fails (no two writers of one shard deadlock over its counters), and afterwards the
// counters equal the reference.
func TestStats_ConcurrentReplicas(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustDatabase(t)
	replicas := []*store.Store{mustOpen(t, dbURL), mustOpen(t, dbURL), mustOpen(t, dbURL)}
	c := mustIntegration(t, replicas[0], "prod")
	a := mustWorker(t, replicas[0], "alice")
	names := []string{"CPU", "Disk", "Mem", "Net"}
	fail := func(round int, what string, err error) {
		if err != nil && !errors.Is(err, store.ErrIncidentResolved) {
			t.Errorf("round %d: %s: %v", round, what, err)
		}
	}
	for round := range 12 {
		// What fired last round and was not reported since expires during this one.
		mustExec(t, replicas[0], `UPDATE incident_alerts SET last_seen_at = now() - interval '5 hours' WHERE status = 'firing'`)
		var wg sync.WaitGroup
		for w := range 6 {
			st := replicas[w%3]
			wg.Go(func() {
				var own []store.NotifiedAlert
				for i := range 4 {
					n := round*100 + w*10 + i
					own = append(own, firing(names[(w+i)%len(names)], fmt.Sprintf("c%d-%d-%d", round, w, i), spread(n)))
				}
				key := fmt.Sprintf("r%d-w%d", round, w)
				res, err := st.Ingest(ctx, c, group(key, own...))
				fail(round, "ingest", err)
				shared := group(fmt.Sprintf("shared-%d", round%2), firing("Shared", fmt.Sprintf("s%d", w), spread(round+w)))
				_, err = st.Ingest(ctx, c, shared)
				fail(round, "ingest shared", err)
				_, err = st.Acknowledge(ctx, res.IncidentID, a)
				fail(round, "acknowledge", err)
				if w%2 == 0 {
					fail(round, "unacknowledge", st.Unacknowledge(ctx, res.IncidentID, a))
				}
				switch w % 3 {
				case 0:
					_, err = st.Resolve(ctx, res.IncidentID, a)
					fail(round, "resolve", err)
				case 1:
					stop := slices.Clone(own)
					for i := range stop {
						stop[i] = resolved(stop[i], stop[i].StartsAt.Add(time.Minute))
					}
					_, err = st.Ingest(ctx, c, group(key, stop...))
					fail(round, "resolve by the alerts", err)
				}
			})
		}
		for _, st := range replicas {
			wg.Go(func() {
				_, err := st.ExpireAlerts(ctx, 50)
				fail(round, "expire", err)
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	v := assertStatsMatch(t, replicas[0], "after the rounds")
	if v.Alerts.Total < 12*6*4 || v.Incidents.MTTA == nil || v.Incidents.MTTR == nil {
		t.Fatalf("the rounds should have counted: got %s", v)
	}
	var shards int
	if err := replicas[0].Pool().QueryRow(ctx, `SELECT count(*) FROM stats_shards WHERE occurrences_firing + occurrences_resolved <> 0`).Scan(&shards); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d shards counted occurrences", shards)
}

// TestStats_Backfill: an install upgraded with incidents and occurrences already stored counts
// them from the upgrade on, and keeps counting.
func TestStats_Backfill(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustEmptyDatabase(t)
	mustMigrateTo(t, mustGoose(t, url), 22) // the schema before the statistics (00023)
	st := mustOpen(t, url)
	c := mustIntegration(t, st, "prod")
	a := mustWorker(t, st, "alice")
	for g := range 4 {
		var alerts []store.NotifiedAlert
		for i := range 3 {
			alerts = append(alerts, firing(fmt.Sprintf("A%d", i), fmt.Sprintf("b%d-%d", g, i), spread(g*3+i)))
		}
		id := mustIngest(t, st, c, group(fmt.Sprintf("g%d", g), alerts...)).IncidentID
		if g%2 == 0 {
			if _, err := st.Acknowledge(ctx, id, a); err != nil {
				t.Fatal(err)
			}
		}
		if g == 0 {
			mustIngest(t, st, c, group("g0", resolved(alerts[0], spread(40)), resolved(alerts[1], spread(40)), resolved(alerts[2], spread(40))))
		}
	}
	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	v := assertStatsMatch(t, st, "upgraded")
	if v.Alerts.Total != 12 || v.Incidents.Resolved != 1 || v.Incidents.MTTA == nil {
		t.Fatalf("upgraded: got %s", v)
	}
	mustIngest(t, st, c, group("g9", firing("A0", "late", spread(3))))
	assertStatsMatch(t, st, "after the upgrade")
}
