package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

const retention = 400 * 24 * time.Hour

// mustAge moves an incident, and the alerts of its occurrences, days into the past: its
// times (so that its mean times stay) and the alerts' last report.
func mustAge(tb testing.TB, st *store.Store, incidentID int64, days int) {
	tb.Helper()
	mustExec(tb, st, `UPDATE incidents SET triggered_at = triggered_at - $2 * interval '1 day',
		first_acknowledged_at = first_acknowledged_at - $2 * interval '1 day',
		acknowledged_at = acknowledged_at - $2 * interval '1 day', resolved_at = resolved_at - $2 * interval '1 day'
		WHERE id = $1`, incidentID, days)
	mustExec(tb, st, `UPDATE alerts SET received_at = received_at - $2 * interval '1 day'
		WHERE id IN (SELECT alert_id FROM incident_alerts WHERE incident_id = $1)`, incidentID, days)
}

// mustRetain runs one round of retention.
func mustRetain(tb testing.TB, st *store.Store, batch int) store.RetentionResult {
	tb.Helper()
	res, err := st.Retain(context.Background(), retention, batch)
	if err != nil {
		tb.Fatalf("retain: %v", err)
	}
	return res
}

// rowCounts counts the rows of the incident domain's tables.
func rowCounts(tb testing.TB, st *store.Store) [4]int {
	tb.Helper()
	return [4]int{mustCount(tb, st, `SELECT count(*) FROM incidents`), mustCount(tb, st, `SELECT count(*) FROM incident_events`),
		mustCount(tb, st, `SELECT count(*) FROM incident_alerts`), mustCount(tb, st, `SELECT count(*) FROM alerts`)}
}

// TestRetain_Exact: a round deletes exactly what is older than the setting: resolved
// incidents (archived or not) with their events and occurrences, and the alerts left with no
// occurrence that were not reported since; it keeps open incidents however old, recent
// resolutions, resolved incidents an alert still fires in, and alerts that still have an
// occurrence or were reported lately. The statistics follow.
func TestRetain_Exact(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	a := mustWorker(t, st, "alice")
	open := func(key string, alerts ...store.NotifiedAlert) int64 {
		t.Helper()
		return mustIngest(t, st, c, group(key, alerts...)).IncidentID
	}
	stop := func(key string, alerts ...store.NotifiedAlert) {
		t.Helper()
		var rs []store.NotifiedAlert
		for _, x := range alerts {
			rs = append(rs, resolved(x, x.StartsAt.Add(time.Minute)))
		}
		mustIngest(t, st, c, group(key, rs...))
	}

	// Old and resolved by its alerts, acknowledged first: deleted, with its two alerts.
	x1, x2 := firing("Old", "x1", spread(1)), firing("Old", "x2", spread(2))
	oldByAlerts := open("old", x1, x2)
	if _, err := st.Acknowledge(ctx, oldByAlerts, a); err != nil {
		t.Fatal(err)
	}
	stop("old", x1, x2)
	// Old, resolved by hand once its alert stopped, archived: deleted; its alert fired again
	// since in a recent incident, so the alert stays.
	y := firing("Again", "y", spread(3))
	oldArchived := open("again", y)
	stop("again", y)
	if _, err := st.Resolve(ctx, oldArchived, a); err == nil {
		t.Fatal("resolved twice")
	}
	if _, err := st.Archive(ctx, oldArchived); err != nil {
		t.Fatal(err)
	}
	mustAge(t, st, oldByAlerts, 500)
	mustAge(t, st, oldArchived, 450)
	y.StartsAt = spread(30)
	recentAgain := open("again", y)
	// Old and open: kept. Old, resolved by hand while its alert fires: kept.
	oldOpen := open("open", firing("Open", "z", spread(4)))
	mustAge(t, st, oldOpen, 500)
	w := firing("Manual", "w", spread(5))
	oldManual := open("manual", w)
	if _, err := st.Resolve(ctx, oldManual, a); err != nil {
		t.Fatal(err)
	}
	mustAge(t, st, oldManual, 500)
	// Recent and resolved: kept.
	v := firing("Recent", "v", spread(6))
	recent := open("recent", v)
	stop("recent", v)
	// A resolution of what never fired, reported long ago: an alert with no occurrence, deleted;
	// the same, reported lately: kept.
	mustIngest(t, st, c, group("never", resolved(firing("Never", "n1", spread(7)), spread(8))))
	mustIngest(t, st, c, group("never2", resolved(firing("Never", "n2", spread(7)), spread(8))))
	mustExec(t, st, `UPDATE alerts SET received_at = now() - interval '401 days' WHERE fingerprint = 'n1'`)
	assertStatsMatch(t, st, "before retention")

	wantEvents := mustCount(t, st, `SELECT count(*) FROM incident_events WHERE incident_id = ANY($1)`, []int64{oldByAlerts, oldArchived})
	before := rowCounts(t, st)
	res := mustRetain(t, st, 1000)
	want := store.RetentionResult{Incidents: 2, Events: int64(wantEvents), Occurrences: 3, Alerts: 3}
	if res != want {
		t.Fatalf("retain: got %+v, want %+v", res, want)
	}
	after := rowCounts(t, st)
	if diff := [4]int{before[0] - after[0], before[1] - after[1], before[2] - after[2], before[3] - after[3]}; diff != [4]int{2, wantEvents, 3, 3} {
		t.Fatalf("rows deleted (incidents, events, occurrences, alerts): got %v, want [2 %d 3 3]", diff, wantEvents)
	}
	for _, id := range []int64{oldByAlerts, oldArchived} {
		if _, err := st.Incident(ctx, id); err == nil {
			t.Errorf("incident %d: still there", id)
		}
	}
	for _, id := range []int64{recentAgain, oldOpen, oldManual, recent} {
		mustIncident(t, st, id)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM alerts WHERE fingerprint IN ('x1', 'x2', 'n1')`); n != 0 {
		t.Errorf("got %d of the old alerts with no occurrence left, want none", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM alerts WHERE fingerprint IN ('y', 'z', 'w', 'v', 'n2')`); n != 5 {
		t.Errorf("got %d of the alerts kept, want 5", n)
	}
	assertStatsMatch(t, st, "after retention")
	if res := mustRetain(t, st, 1000); res != (store.RetentionResult{}) {
		t.Fatalf("a second round: got %+v, want nothing", res)
	}
}

// TestRetain_Batches: a round deletes at most its batch of incidents holding at most ten times
// the batch in occurrences (a larger one goes alone), and its batch of alerts; it says when
// there may be more.
func TestRetain_Batches(t *testing.T) {
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	for i := range 7 {
		alerts := []store.NotifiedAlert{firing("Small", fmt.Sprintf("s%d", i), spread(i))}
		if i >= 5 { // the last two: 25 occurrences each
			alerts = nil
			for j := range 25 {
				alerts = append(alerts, firing("Large", fmt.Sprintf("l%d-%d", i, j), spread(i)))
			}
		}
		key := fmt.Sprintf("g%d", i)
		id := mustIngest(t, st, c, group(key, alerts...)).IncidentID
		for k := range alerts {
			alerts[k] = resolved(alerts[k], alerts[k].StartsAt.Add(time.Minute))
		}
		mustIngest(t, st, c, group(key, alerts...))
		mustAge(t, st, id, 410-i) // the small ones resolved first
	}
	for i, want := range []struct{ incidents, occurrences int64 }{{2, 2}, {2, 2}, {1, 1}, {1, 25}, {1, 25}} {
		res := mustRetain(t, st, 2)
		if res.Incidents != want.incidents || res.Occurrences != want.occurrences || res.Alerts > 2 || !res.More {
			t.Fatalf("round %d: got %+v, want %d incidents, %d occurrences, at most 2 alerts, and more", i, res, want.incidents, want.occurrences)
		}
		assertStatsMatch(t, st, fmt.Sprintf("round %d", i))
	}
	// The alerts left with no occurrence go two a round, until a round finds fewer.
	for round := 0; ; round++ {
		res := mustRetain(t, st, 2)
		if res.Incidents != 0 || res.Alerts > 2 || round > 30 {
			t.Fatalf("round %d of the alerts: got %+v", round, res)
		}
		if !res.More {
			break
		}
	}
	if rows := rowCounts(t, st); rows != [4]int{} {
		t.Fatalf("rows left (incidents, events, occurrences, alerts): got %v, want none", rows)
	}
	assertStatsMatch(t, st, "all deleted")
}

// TestRetain_Replicas: two replicas run rounds at once, round after round, while
// notifications keep arriving (some re-firing the old alerts being deleted): neither fails,
// together they delete each old incident once (no round counts what the other deleted), and
// the counters equal the reference afterwards.
func TestRetain_Replicas(t *testing.T) {
	ctx := context.Background()
	replicas := mustReplicas(t, 2)
	st := replicas[0]
	c := mustIntegration(t, st, "prod")
	const old = 60
	var wantOccurrences int64
	for i := range old {
		var alerts []store.NotifiedAlert
		for j := range 1 + i%4 {
			alerts = append(alerts, firing("Old", fmt.Sprintf("o%d-%d", i, j), spread(i+j)))
		}
		wantOccurrences += int64(len(alerts))
		key := fmt.Sprintf("g%d", i)
		id := mustIngest(t, st, c, group(key, alerts...)).IncidentID
		for k := range alerts {
			alerts[k] = resolved(alerts[k], alerts[k].StartsAt.Add(time.Minute))
		}
		mustIngest(t, st, c, group(key, alerts...))
		mustAge(t, st, id, 500)
	}
	wantEvents := int64(mustCount(t, st, `SELECT count(*) FROM incident_events`))

	var mu sync.Mutex
	var total store.RetentionResult
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			for {
				res, err := r.Retain(ctx, retention, 5)
				if err != nil {
					t.Errorf("retain: %v", err)
					return
				}
				mu.Lock()
				total.Incidents += res.Incidents
				total.Events += res.Events
				total.Occurrences += res.Occurrences
				total.Alerts += res.Alerts
				mu.Unlock()
				if !res.More {
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range old {
			// An old alert firing again, from a new start, in its group: a new incident.
			a := firing("Old", fmt.Sprintf("o%d-0", i), spread(1000+i))
			if _, err := replicas[i%2].Ingest(ctx, c, group(fmt.Sprintf("g%d", i), a)); err != nil {
				t.Errorf("ingest: %v", err)
			}
		}
	})
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	// What the rounds skipped while a notification held it goes in the next.
	for {
		res := mustRetain(t, st, 5)
		total.Incidents += res.Incidents
		total.Events += res.Events
		total.Occurrences += res.Occurrences
		total.Alerts += res.Alerts
		if !res.More {
			break
		}
	}
	if total.Incidents != old || total.Occurrences != wantOccurrences || total.Events != wantEvents {
		t.Fatalf("deleted in all: got %+v, want %d incidents, %d occurrences, %d events", total, old, wantOccurrences, wantEvents)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM incidents`); n != old {
		t.Fatalf("got %d incidents left, want the %d opened by the alerts that fired again", n, old)
	}
	// Each old alert that fired again has a row (kept, or made again if it went first); the
	// others went.
	if n := mustCount(t, st, `SELECT count(*) FROM alerts`); n != old || total.Alerts < wantOccurrences-old {
		t.Fatalf("got %d alerts left, %d deleted, want the %d that fired again left, at least %d deleted", n, total.Alerts, old, wantOccurrences-old)
	}
	assertStatsMatch(t, st, "after the rounds")
}

// mustReplicas opens n stores of their own pools on one new database: replicas of the server.
func mustReplicas(tb testing.TB, n int) []*store.Store {
	tb.Helper()
	dbURL := pgtest.MustDatabase(tb)
	replicas := make([]*store.Store, n)
	for i := range replicas {
		replicas[i] = mustOpen(tb, dbURL)
	}
	return replicas
}

// TestRetain_ScheduleDays: the schedule's days that ended longer ago than the retention are
// deleted, in batches; today's, recent and future days stay.
func TestRetain_ScheduleDays(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	a := mustWorker(t, st, "alice")
	today := time.Now().UTC().Truncate(24 * time.Hour)
	var days []time.Time
	for _, ago := range []int{900, 500, 402, 401, 399, 30, 0, -7} {
		days = append(days, today.AddDate(0, 0, -ago))
	}
	if _, err := st.AssignSchedule(ctx, store.ScheduleAssignment{UserID: a.ID, Dates: days}); err != nil {
		t.Fatal(err)
	}
	keep := 400 * 24 * time.Hour
	var deleted int64
	for round := 0; ; round++ {
		res, err := st.Retain(ctx, keep, 2)
		if err != nil {
			t.Fatal(err)
		}
		deleted += res.Days
		if !res.More {
			break
		}
		if round > 10 {
			t.Fatal("rounds never ended")
		}
	}
	left, err := st.Schedule(ctx, today.AddDate(0, 0, -366), today.AddDate(0, 0, 7))
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range left {
		kept = append(kept, e.Date.Format(time.DateOnly))
	}
	want := []string{today.AddDate(0, 0, -30).Format(time.DateOnly), today.Format(time.DateOnly), today.AddDate(0, 0, 7).Format(time.DateOnly)}
	if deleted != 4 || mustCount(t, st, `SELECT count(*) FROM schedule`) != 4 || !slices.Equal(kept[len(kept)-3:], want) {
		t.Fatalf("deleted %d days, kept %v (of %d), want the 4 older than 400 days gone and 399, 30, 0 and -7 kept", deleted, kept,
			mustCount(t, st, `SELECT count(*) FROM schedule`))
	}
}

// TestRetain_NotesRace: people add notes to old resolved incidents while two replicas' rounds
// delete them, round after round. Each note either lands on an incident that is still there or
// is refused as not found once it went, and no event or occurrence is ever left without its
// incident: the writers hold the incident they write into (the timeline's rows have no foreign
// key to check it row by row).
func TestRetain_NotesRace(t *testing.T) {
	ctx := context.Background()
	replicas := mustReplicas(t, 2)
	st := replicas[0]
	c := mustIntegration(t, st, "prod")
	w := mustWorker(t, st, "alice")
	const rounds = 40
	for round := range rounds {
		key := fmt.Sprintf("g%d", round)
		a := firing("Old", fmt.Sprintf("n%d", round), spread(round))
		id := mustIngest(t, st, c, group(key, a)).IncidentID
		mustIngest(t, st, c, group(key, resolved(a, a.StartsAt.Add(time.Minute))))
		mustAge(t, st, id, 500)

		var noted atomic.Bool
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, r := range replicas {
			wg.Go(func() {
				<-start
				if _, err := r.Retain(ctx, retention, 5); err != nil {
					t.Errorf("round %d: retain: %v", round, err)
				}
			})
		}
		for k := range 3 {
			wg.Go(func() {
				<-start
				_, err := replicas[k%2].AddNote(ctx, id, fmt.Sprintf("note %d", k), w)
				switch {
				case err == nil:
					noted.Store(true)
				case !errors.Is(err, store.ErrNotFound):
					t.Errorf("round %d: add note: %v", round, err)
				}
			})
		}
		close(start)
		wg.Wait()
		mustRetain(t, st, 5) // what a note held the rounds off goes now, with its notes
		if n := mustCount(t, st, `SELECT count(*) FROM incidents WHERE id = $1`, id); n != 0 {
			t.Fatalf("round %d: the old incident is still there after the rounds", round)
		}
		orphans := mustCount(t, st, `SELECT (SELECT count(*) FROM incident_events e WHERE NOT EXISTS
				(SELECT 1 FROM incidents i WHERE i.id = e.incident_id))
			+ (SELECT count(*) FROM incident_alerts o WHERE NOT EXISTS (SELECT 1 FROM incidents i WHERE i.id = o.incident_id))`)
		if orphans != 0 {
			t.Fatalf("round %d (a note landed: %v): %d events or occurrences are left without their incident", round, noted.Load(), orphans)
		}
	}
	assertStatsMatch(t, st, "after the rounds")
}
