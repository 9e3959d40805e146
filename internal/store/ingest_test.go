package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// mustIntegration creates an integration and returns what its key stands for.
func mustIntegration(tb testing.TB, st *store.Store, name string) store.IntegrationCaller {
	tb.Helper()
	ctx := context.Background()
	_, secret, err := st.CreateIntegration(ctx, store.NewIntegration{Name: name})
	if err != nil {
		tb.Fatalf("create integration %s: %v", name, err)
	}
	c, err := st.AuthenticateIntegration(ctx, secret)
	if err != nil {
		tb.Fatalf("authenticate integration %s: %v", name, err)
	}
	return c
}

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// firing and resolved are alerts of a notification.
func firing(name, fingerprint string, startsAt time.Time, labels ...string) store.NotifiedAlert {
	l := map[string]string{"alertname": name}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return store.NotifiedAlert{Fingerprint: fingerprint, Status: store.AlertFiring, Labels: l,
		Annotations: map[string]string{"summary": name + " is firing"}, StartsAt: startsAt, GeneratorURL: "http://prometheus.test/graph"}
}

func resolved(a store.NotifiedAlert, endsAt time.Time) store.NotifiedAlert {
	a.Status, a.EndsAt = store.AlertResolved, endsAt
	return a
}

func group(key string, alerts ...store.NotifiedAlert) store.Notification {
	return store.Notification{GroupKey: key, GroupLabels: map[string]string{"alertname": alerts[0].Labels["alertname"]}, Alerts: alerts}
}

func mustIngest(tb testing.TB, st *store.Store, c store.IntegrationCaller, n store.Notification) store.IngestResult {
	tb.Helper()
	res, err := st.Ingest(context.Background(), c, n)
	if err != nil {
		tb.Fatalf("ingest %s: %v", n.GroupKey, err)
	}
	return res
}

// eventTypes returns an incident's timeline as its types.
func eventTypes(tb testing.TB, st *store.Store, id int64) []string {
	tb.Helper()
	events, err := st.Timeline(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	var out []string
	for _, e := range events {
		out = append(out, e.Type)
	}
	return out
}

func mustIncident(tb testing.TB, st *store.Store, id int64) store.Incident {
	tb.Helper()
	in, err := st.Incident(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

func TestIngest_Lifecycle(t *testing.T) {
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	disk := firing("DiskFull", "aaa", t0, "severity", "warning", "instance", "db1")
	disk2 := firing("DiskFull", "bbb", t0, "severity", "critical", "instance", "db2")
	n := group(`{}:{alertname="DiskFull"}`, disk, disk2)
	n.GroupLabels["cluster"] = "eu-1"

	res := mustIngest(t, st, c, n)
	if !res.Opened || res.New != 2 || res.IncidentID == 0 {
		t.Fatalf("first notification: got %+v, want an incident opened with 2 new alerts", res)
	}
	in := mustIncident(t, st, res.IncidentID)
	if in.Title != "DiskFull (cluster=eu-1)" || in.Severity != "critical" || in.Status != store.IncidentTriggered ||
		len(in.Alerts) != 2 || in.AlertCount != 2 || in.GroupLabels["cluster"] != "eu-1" {
		t.Fatalf("incident: got %+v", in)
	}
	want := []string{"triggered", "alert_added", "alert_added"}
	if got := eventTypes(t, st, in.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timeline: got %v, want %v", got, want)
	}

	// The same snapshot again, and again: nothing more; at once, answered from its digest, and
	// past the replay window (as if applied a minute ago), applied again to the same end.
	for range 3 {
		if res := mustIngest(t, st, c, n); !res.Replay || res.Opened || res.New != 0 {
			t.Fatalf("replay: got %+v, want a replay", res)
		}
	}
	mustExec(t, st, `UPDATE notification_digests SET applied_at = now() - interval '1 minute'`)
	if res := mustIngest(t, st, c, n); res.Replay || res.Opened || res.New != 0 || res.Refreshed != 2 || res.IncidentID != in.ID {
		t.Fatalf("the same snapshot a minute later: got %+v, want 2 refreshed in incident %d", res, in.ID)
	}
	if got := eventTypes(t, st, in.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timeline after replays: got %v, want %v", got, want)
	}

	// One resolves; then the other: the incident resolves itself.
	n.Alerts = []store.NotifiedAlert{resolved(disk, t0.Add(time.Minute)), disk2}
	if res := mustIngest(t, st, c, n); res.Stopped != 1 || res.Resolved {
		t.Fatalf("one resolved: got %+v", res)
	}
	n.Alerts = []store.NotifiedAlert{resolved(disk, t0.Add(time.Minute)), resolved(disk2, t0.Add(2*time.Minute))}
	if res := mustIngest(t, st, c, n); res.Stopped != 1 || !res.Resolved {
		t.Fatalf("both resolved: got %+v", res)
	}
	in = mustIncident(t, st, in.ID)
	if in.Status != store.IncidentResolved || in.ResolutionSource != store.IncidentResolvedByAlerts || in.ResolvedAt == nil {
		t.Fatalf("resolved incident: got %+v", in)
	}
	want = append(want, "alert_resolved", "alert_resolved", "resolved")
	if got := eventTypes(t, st, in.ID); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("timeline: got %v, want %v", got, want)
	}

	// A stale firing copy (an HA peer behind) reopens nothing.
	n.Alerts = []store.NotifiedAlert{disk, disk2}
	if res := mustIngest(t, st, c, n); res.Opened || res.New != 0 || res.Stale != 2 {
		t.Fatalf("stale copies: got %+v", res)
	}
	a, err := st.AlertByID(context.Background(), in.Alerts[0].ID)
	if err != nil || a.Status != store.AlertResolved || a.ResolutionSource != store.ResolvedByAlertmanager {
		t.Fatalf("the feed after a stale copy: got %+v, %v", a, err)
	}

	// A new startsAt is a new occurrence: a new incident.
	again := firing("DiskFull", "aaa", t0.Add(time.Hour), "severity", "info")
	res = mustIngest(t, st, c, group(`{}:{alertname="DiskFull"}`, again))
	if !res.Opened || res.IncidentID == in.ID {
		t.Fatalf("a new firing: got %+v, want a new incident", res)
	}
	if a, _ := st.AlertByID(context.Background(), a.ID); a.Status != store.AlertFiring || a.IncidentID == nil || *a.IncidentID != res.IncidentID {
		t.Fatalf("the feed's alert after a new firing: got %+v", a)
	}
}

func TestIngest_ManualResolveIsTerminal(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	alice := mustUser(t, st, "alice", store.RoleMember)
	a := firing("HighLatency", "ccc", t0)
	n := group("g", a)
	first := mustIngest(t, st, c, n)
	if _, err := st.Resolve(ctx, first.IncidentID, store.Worker{ID: alice.ID, Username: alice.Username}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resolve(ctx, first.IncidentID, store.Worker{ID: alice.ID}); !errors.Is(err, store.ErrIncidentResolved) {
		t.Fatalf("resolve again: got %v, want ErrIncidentResolved", err)
	}
	// Alertmanager keeps sending the alert, still firing: the incident stays closed.
	if res := mustIngest(t, st, c, n); res.Opened || res.IncidentID != 0 {
		t.Fatalf("the same firing after a manual resolve: got %+v, want nothing opened", res)
	}
	// It resolves, then fires anew: a new incident.
	mustIngest(t, st, c, group("g", resolved(a, t0.Add(time.Minute))))
	if res := mustIngest(t, st, c, group("g", firing("HighLatency", "ccc", t0.Add(time.Hour)))); !res.Opened {
		t.Fatalf("a new firing after a manual resolve: got %+v, want a new incident", res)
	}
	in := mustIncident(t, st, first.IncidentID)
	if in.ResolutionSource != store.IncidentResolvedManually {
		t.Fatalf("got resolution %q, want manual", in.ResolutionSource)
	}
}

func TestIngest_Expiry(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	silenced := firing("Silenced", "ddd", t0)
	other := firing("Silenced", "eee", t0)
	res := mustIngest(t, st, c, group("g", silenced, other))
	// Not reported for longer than expire_after: as if the last report were 5 hours ago.
	mustExec(t, st, `UPDATE incident_alerts SET last_seen_at = now() - interval '5 hours'`)
	// The truncated notification keeps every firing alert of the incident alive.
	n := group("g", other)
	n.TruncatedAlerts = 1
	mustIngest(t, st, c, n)
	if r, err := st.ExpireAlerts(ctx, 100); err != nil || r.Expired != 0 {
		t.Fatalf("after a truncated notification: expired %+v, %v, want none", r, err)
	}
	mustExec(t, st, `UPDATE incident_alerts SET last_seen_at = now() - interval '5 hours'`)
	r, err := st.ExpireAlerts(ctx, 100)
	if err != nil || r.Expired != 2 || r.Resolved != 1 {
		t.Fatalf("expiry: got %+v, %v, want 2 expired and the incident resolved", r, err)
	}
	if r, err := st.ExpireAlerts(ctx, 100); err != nil || r.Expired != 0 {
		t.Fatalf("a second round: got %+v, %v, want nothing", r, err)
	}
	in := mustIncident(t, st, res.IncidentID)
	if in.Status != store.IncidentResolved || in.Alerts[0].ResolutionSource != store.ResolvedByExpiry {
		t.Fatalf("after expiry: got %+v", in)
	}
	events := len(eventTypes(t, st, in.ID))
	// The real resolution of one corrects it, with no event.
	mustIngest(t, st, c, group("g", resolved(silenced, t0.Add(3*time.Hour))))
	in = mustIncident(t, st, res.IncidentID)
	for _, a := range in.Alerts {
		if a.Fingerprint == "ddd" && (a.ResolutionSource != store.ResolvedByAlertmanager || !a.EndsAt.Equal(t0.Add(3*time.Hour))) {
			t.Fatalf("corrected occurrence: got %+v", a)
		}
	}
	if got := len(eventTypes(t, st, in.ID)); got != events {
		t.Fatalf("a correction wrote %d events", got-events)
	}
	// The other, reported firing again (its silence ended): it fires again, in a new incident.
	again := mustIngest(t, st, c, group("g", other))
	if !again.Opened || again.New != 1 {
		t.Fatalf("an expired alert firing again: got %+v, want a new incident", again)
	}
}

func TestIngest_StormEventsBounded(t *testing.T) {
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	var alerts []store.NotifiedAlert
	for i := range 500 {
		alerts = append(alerts, firing("Storm", fmt.Sprintf("fp%04d", i), t0))
	}
	res := mustIngest(t, st, c, group("storm", alerts...))
	events, err := st.Timeline(context.Background(), res.IncidentID)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, e := range events {
		counts[e.Type]++
	}
	if counts["triggered"] != 1 || counts["alert_added"] != 200 || counts["alerts_added"] != 1 || len(events) != 202 {
		t.Fatalf("storm timeline: got %v", counts)
	}
	if last := events[len(events)-1]; last.Detail != "300 more alerts joined" {
		t.Fatalf("the summary: got %q", last.Detail)
	}
	if in := mustIncident(t, st, res.IncidentID); in.AlertCount != 500 || len(in.Alerts) != 500 {
		t.Fatalf("incident: %d alerts counted, %d inline, want 500", in.AlertCount, len(in.Alerts))
	}
}

// TestIngest_ConcurrentReplicas: the same notifications, from both members of an HA pair, on
// three replicas at once, round after round: one incident per group, one row per fingerprint,
// and each alert's event once.
func TestIngest_ConcurrentReplicas(t *testing.T) {
	dbURL := pgtest.MustDatabase(t)
	replicas := []*store.Store{mustOpen(t, dbURL), mustOpen(t, dbURL), mustOpen(t, dbURL)}
	c := mustIntegration(t, replicas[0], "prod")
	for round := range 20 {
		key := fmt.Sprintf("round-%d", round)
		var alerts []store.NotifiedAlert
		for i := range 5 {
			alerts = append(alerts, firing("Round", fmt.Sprintf("r%d-%d", round, i), t0.Add(time.Duration(round)*time.Minute)))
		}
		n := group(key, alerts...)
		var wg sync.WaitGroup
		for i := range 6 {
			wg.Go(func() {
				if _, err := replicas[i%3].Ingest(context.Background(), c, n); err != nil {
					t.Errorf("round %d: %v", round, err)
				}
			})
		}
		wg.Wait()
		var incidents, rows, added int
		if err := replicas[0].Pool().QueryRow(context.Background(), `SELECT
				(SELECT count(*) FROM incidents WHERE group_key = $1),
				(SELECT count(*) FROM alerts WHERE fingerprint LIKE $2),
				(SELECT count(*) FROM incident_events e JOIN incidents i ON i.id = e.incident_id
					WHERE i.group_key = $1 AND e.type = 'alert_added')`, key, fmt.Sprintf("r%d-%%", round)).
			Scan(&incidents, &rows, &added); err != nil {
			t.Fatal(err)
		}
		if incidents != 1 || rows != 5 || added != 5 {
			t.Fatalf("round %d: %d incidents, %d alert rows, %d alert_added events; want 1, 5, 5", round, incidents, rows, added)
		}
	}
}

// TestIngest_RacesActions: the notification that resolves a group's last alert races a person's
// resolve and acknowledge, round after round: the incident is resolved once (one "resolved"
// event), never acknowledged after, and an acknowledge either happened first or was refused.
func TestIngest_RacesActions(t *testing.T) {
	ctx := context.Background()
	dbURL := pgtest.MustDatabase(t)
	a, b := mustOpen(t, dbURL), mustOpen(t, dbURL)
	c := mustIntegration(t, a, "prod")
	alice := mustUser(t, a, "alice", store.RoleMember)
	worker := store.Worker{ID: alice.ID, Username: alice.Username}
	for round := range 25 {
		alert := firing("Race", fmt.Sprintf("race-%d", round), t0)
		key := fmt.Sprintf("race-%d", round)
		id := mustIngest(t, a, c, group(key, alert)).IncidentID
		var wg sync.WaitGroup
		var ackErr, resolveErr error
		wg.Go(func() {
			if _, err := b.Ingest(ctx, c, group(key, resolved(alert, t0.Add(time.Minute)))); err != nil {
				t.Errorf("round %d: ingest: %v", round, err)
			}
		})
		wg.Go(func() { _, resolveErr = a.Resolve(ctx, id, worker) })
		wg.Go(func() { _, ackErr = b.Acknowledge(ctx, id, worker) })
		wg.Wait()
		for _, err := range []error{ackErr, resolveErr} {
			if err != nil && !errors.Is(err, store.ErrIncidentResolved) {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		in := mustIncident(t, a, id)
		types := eventTypes(t, a, id)
		var resolvedEvents int
		for _, typ := range types {
			if typ == "resolved" {
				resolvedEvents++
			}
			if typ == "acknowledged" && resolvedEvents > 0 {
				t.Fatalf("round %d: acknowledged after resolution: %v", round, types)
			}
		}
		if in.Status != store.IncidentResolved || resolvedEvents != 1 {
			t.Fatalf("round %d: status %s with %d resolved events (%v)", round, in.Status, resolvedEvents, types)
		}
		if (resolveErr == nil) != (in.ResolutionSource == store.IncidentResolvedManually) {
			t.Fatalf("round %d: resolve answered %v, the incident says %s", round, resolveErr, in.ResolutionSource)
		}
	}
}

// TestIngest_StatementModes: a notification's life in every way the store may send statements,
// behind a transaction-mode pooler (simple protocol) above all: opened, replayed, resolved,
// expired, its incident worked.
func TestIngest_StatementModes(t *testing.T) {
	forEachStatementMode(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		st := open(t, pgtest.MustDatabase(t))
		c := mustIntegration(t, st, "prod")
		alice := mustUser(t, st, "alice", store.RoleMember)
		x, y := firing("Mode", "m1", t0, "severity", "high"), firing("Mode", "m2", t0)
		res := mustIngest(t, st, c, group("g", x, y))
		if again := mustIngest(t, st, c, group("g", x, y)); !res.Opened || !again.Replay {
			t.Fatalf("open and replay: got %+v and %+v", res, again)
		}
		if _, err := st.Acknowledge(ctx, res.IncidentID, store.Worker{ID: alice.ID, Username: alice.Username}); err != nil {
			t.Fatal(err)
		}
		mustIngest(t, st, c, group("g", resolved(x, t0.Add(time.Minute)), y))
		mustExec(t, st, `UPDATE incident_alerts SET last_seen_at = now() - interval '5 hours'`)
		if r, err := st.ExpireAlerts(ctx, 10); err != nil || r.Expired != 1 || r.Resolved != 1 {
			t.Fatalf("expiry: got %+v, %v", r, err)
		}
		in := mustIncident(t, st, res.IncidentID)
		if in.Status != store.IncidentResolved || in.Severity != "high" || len(in.Alerts) != 2 {
			t.Fatalf("incident: got %+v", in)
		}
		want := "[triggered alert_added alert_added acknowledged alert_resolved alert_resolved resolved]"
		if got := fmt.Sprint(eventTypes(t, st, in.ID)); got != want {
			t.Fatalf("timeline: got %s, want %s", got, want)
		}
	})
}

// TestIngest_TruncatedGroupHeldOpen: with max_alerts, Alertmanager leaves alerts out of a
// group's notifications, and its status is that of the alerts it sent. Every alert the server
// saw resolving does not resolve the incident while alerts are left out; a notification that
// leaves none out does, and so does the expiry once the group is no longer sent.
func TestIngest_TruncatedGroupHeldOpen(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	for _, end := range []string{"complete notification", "expiry"} {
		t.Run(end, func(t *testing.T) {
			key := "g-" + end
			seen := firing("Truncated", "t-"+end, t0)
			n := group(key, seen)
			n.Status, n.TruncatedAlerts = store.AlertFiring, 2
			res := mustIngest(t, st, c, n)
			n = group(key, resolved(seen, t0.Add(time.Minute)))
			n.Status, n.TruncatedAlerts = store.AlertResolved, 2
			if got := mustIngest(t, st, c, n); got.Resolved || got.Stopped != 1 {
				t.Fatalf("the seen alert resolved, two left out: got %+v, want the incident kept open", got)
			}
			if in := mustIncident(t, st, res.IncidentID); in.Status != store.IncidentTriggered {
				t.Fatalf("incident: got %s, want triggered while alerts the server never saw may fire", in.Status)
			}
			// Sent within the integration's expire_after: the expiry leaves it.
			if r, err := st.ExpireAlerts(ctx, 100); err != nil || r.Resolved != 0 {
				t.Fatalf("expiry while the group is sent: got %+v, %v, want nothing resolved", r, err)
			}
			switch end {
			case "complete notification":
				n.TruncatedAlerts = 0
				if got := mustIngest(t, st, c, n); !got.Resolved || got.IncidentID != res.IncidentID {
					t.Fatalf("the group's complete notification: got %+v, want incident %d resolved", got, res.IncidentID)
				}
			case "expiry":
				mustExec(t, st, `UPDATE notification_digests SET applied_at = now() - interval '5 hours' WHERE group_key = $1`, key)
				if r, err := st.ExpireAlerts(ctx, 100); err != nil || r.Resolved != 1 {
					t.Fatalf("expiry of a group no longer sent: got %+v, %v, want its incident resolved", r, err)
				}
			}
			in := mustIncident(t, st, res.IncidentID)
			types := eventTypes(t, st, res.IncidentID)
			if in.Status != store.IncidentResolved || in.ResolutionSource != store.IncidentResolvedByAlerts || types[len(types)-1] != store.EventResolved {
				t.Fatalf("incident: got %s by %s, timeline %v, want resolved by its alerts", in.Status, in.ResolutionSource, types)
			}
		})
	}
}

// TestIngest_RecordsDelivery: a notification applied and a replay answered from the group's
// digest both record the delivery on the integration and its key (what GET /api/integrations
// shows as the last delivery), once their last record is older than a second; a delivery whose
// key's authentication found both recorded within the second writes neither.
func TestIngest_RecordsDelivery(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	_, secret, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	auth := func() store.IntegrationCaller {
		t.Helper()
		c, err := st.AuthenticateIntegration(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	age := func() {
		mustExec(t, st, `UPDATE integrations SET last_delivery_at = now() - interval '10 seconds'`)
		mustExec(t, st, `UPDATE integration_keys SET last_used_at = now() - interval '10 seconds'`)
	}
	recorded := func(what string) {
		t.Helper()
		if n := mustCount(t, st, `SELECT (SELECT count(*) FROM integrations WHERE last_delivery_at > now() - interval '5 seconds')
				+ (SELECT count(*) FROM integration_keys WHERE last_used_at > now() - interval '5 seconds')`); n != 2 {
			t.Fatalf("%s: the delivery is recorded on %d of the integration and its key, want both", what, n)
		}
	}
	n := group("g", firing("CPU", "f1", t0))
	mustIngest(t, st, auth(), n)
	recorded("applied")

	age()
	if res := mustIngest(t, st, auth(), n); !res.Replay {
		t.Fatalf("the same notification again: got %+v, want a replay", res)
	}
	recorded("replayed")

	age()
	mustIngest(t, st, auth(), group("g", firing("CPU", "f1", t0), firing("CPU", "f2", t0)))
	recorded("applied again")

	// Authenticated while both were recent: the delivery writes neither.
	c := auth()
	age()
	mustIngest(t, st, c, group("g", firing("CPU", "f3", t0)))
	if n := mustCount(t, st, `SELECT (SELECT count(*) FROM integrations WHERE last_delivery_at > now() - interval '5 seconds')
			+ (SELECT count(*) FROM integration_keys WHERE last_used_at > now() - interval '5 seconds')`); n != 0 {
		t.Fatalf("a delivery authenticated within a second of the last record wrote %d of them, want none", n)
	}
}

// TestIngest_FailedWriteLeavesNothing: a notification whose writes fail part way (here a
// trigger planted for the test refuses one alert's occurrence, after the alerts' rows were
// written in the same round trip) stores nothing, not even its alerts or its digest; its
// connection, rolled back, serves the next notifications (the pool makes none: it would replace
// a connection given back inside a transaction); and the same notification, once it can be
// written, is applied whole, in every statement mode.
func TestIngest_FailedWriteLeavesNothing(t *testing.T) {
	forEachStatementMode(t, func(t *testing.T, open opener) {
		ctx := context.Background()
		st := open(t, pgtest.MustDatabase(t))
		c := mustIntegration(t, st, "prod")
		mustExec(t, st, `CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN
				IF (SELECT fingerprint FROM alerts WHERE id = NEW.alert_id) = 'boom' THEN
					RAISE EXCEPTION 'refused for the test';
				END IF;
				RETURN NEW;
			END $$`)
		mustExec(t, st, `CREATE TRIGGER refuse_boom BEFORE INSERT ON incident_alerts FOR EACH ROW EXECUTE FUNCTION refuse_boom()`)
		n := group("g", firing("Boom", "a-ok", t0), firing("Boom", "boom", t0))
		made := st.Pool().Stat().NewConnsCount()
		if _, err := st.Ingest(ctx, c, n); err == nil || !strings.Contains(err.Error(), "refused for the test") {
			t.Fatalf("ingest with a refused write: got %v, want the trigger's error", err)
		}
		if got := rowCounts(t, st); got != [4]int{} {
			t.Fatalf("after the failed notification: got %v incidents, events, occurrences and alerts, want none", got)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM notification_digests`); n != 0 {
			t.Fatalf("after the failed notification: %d digests stored, want none", n)
		}
		// More notifications than the pool has connections: each finds its connection clean.
		for i := range 12 {
			if res := mustIngest(t, st, c, group(fmt.Sprintf("other-%d", i), firing("Other", fmt.Sprintf("o%d", i), t0))); !res.Opened {
				t.Fatalf("notification %d after the failure: got %+v, want an incident opened", i, res)
			}
		}
		if now := st.Pool().Stat().NewConnsCount(); now != made {
			t.Fatalf("the pool made %d connections after the failure, want none (the failed one rolled back and used again)", now-made)
		}
		mustExec(t, st, `DROP TRIGGER refuse_boom ON incident_alerts`)
		res := mustIngest(t, st, c, n)
		if in := mustIncident(t, st, res.IncidentID); !res.Opened || res.New != 2 || len(in.Alerts) != 2 {
			t.Fatalf("the notification once it can be written: got %+v, %d alerts", res, len(in.Alerts))
		}
	})
}

// TestIngest_BodyReplay: a body sent again byte for byte is a replay, with the count of alerts
// it held, while it is its group's last applied notification, within the replay window, and
// applied as the digest the group still has; the delivery is recorded. Anything else is not:
// another body, the same after a newer notification of its group, after the window, after a
// replica of an older version changed the group's digest (it writes none of the body's
// columns), or a notification applied without its body's sum. ReplayedBody, after the key's
// authentication, and AuthenticateDelivery, with it, answer alike.
func TestIngest_BodyReplay(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	secrets := map[int64]string{}
	newIntegration := func(name string) store.IntegrationCaller {
		_, secret, err := st.CreateIntegration(ctx, store.NewIntegration{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		c, err := st.AuthenticateIntegration(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		secrets[c.IntegrationID] = secret
		return c
	}
	c, other := newIntegration("prod"), newIntegration("staging")
	sum := func(s string) []byte {
		h := sha256.Sum256([]byte(s))
		return h[:]
	}
	check := func(what, how string, alerts int, ok bool, err error, want int) {
		t.Helper()
		switch {
		case err != nil:
			t.Fatalf("%s (%s): %v", what, how, err)
		case ok != (want >= 0) || ok && alerts != want:
			t.Fatalf("%s (%s): replay %v of %d alerts; want a replay: %v, of %d", what, how, ok, alerts, want >= 0, want)
		}
	}
	byAuthentication := func(what string, c store.IntegrationCaller, body string, want int) {
		t.Helper()
		got, alerts, ok, err := st.AuthenticateDelivery(ctx, secrets[c.IntegrationID], sum(body))
		check(what, "AuthenticateDelivery", alerts, ok, err, want)
		if got.IntegrationID != c.IntegrationID || got.KeyID != c.KeyID {
			t.Fatalf("%s: AuthenticateDelivery authenticated %+v, want %+v", what, got, c)
		}
	}
	replay := func(what string, c store.IntegrationCaller, body string, want int) {
		t.Helper()
		alerts, ok, err := st.ReplayedBody(ctx, c, sum(body))
		check(what, "ReplayedBody", alerts, ok, err, want)
		byAuthentication(what, c, body, want)
	}
	withBody := func(n store.Notification, body string) store.Notification {
		n.BodySum = sum(body)
		return n
	}
	first := withBody(group("g", firing("CPU", "f1", t0), firing("CPU", "f2", t0), firing("CPU", "f1", t0)), "body 1")
	mustIngest(t, st, c, first)
	replay("the same body", c, "body 1", 3)
	replay("another body", c, "body 2", -1)
	replay("the same body from another integration", other, "body 1", -1)

	for _, how := range []func(string, store.IntegrationCaller, string, int){replay, byAuthentication} {
		mustExec(t, st, `UPDATE integrations SET last_delivery_at = now() - interval '10 seconds'`)
		mustExec(t, st, `UPDATE integration_keys SET last_used_at = now() - interval '10 seconds'`)
		how("the same body, the delivery not recorded within the second", c, "body 1", 3)
		if n := mustCount(t, st, `SELECT (SELECT count(*) FROM integrations WHERE id = $1 AND last_delivery_at > now() - interval '5 seconds')
			+ (SELECT count(*) FROM integration_keys WHERE integration_id = $1 AND last_used_at > now() - interval '5 seconds')`,
			c.IntegrationID); n != 2 {
			t.Fatalf("a body's replay recorded the delivery on %d of the integration and its key, want both", n)
		}
	}
	if _, _, _, err := st.AuthenticateDelivery(ctx, store.IntegrationKeyPrefix+strings.Repeat("0", 64), sum("body 1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("AuthenticateDelivery of an unknown key: %v, want ErrNotFound", err)
	}

	mustIngest(t, st, c, withBody(group("g", firing("CPU", "f1", t0)), "body 2"))
	replay("the first body after a newer one", c, "body 1", -1)
	replay("the newer body", c, "body 2", 1)

	mustExec(t, st, `UPDATE notification_digests SET applied_at = now() - interval '1 minute'`)
	replay("after the window", c, "body 2", -1)

	mustIngest(t, st, c, withBody(group("g", firing("CPU", "f3", t0)), "body 3"))
	replay("body 3", c, "body 3", 1)
	// A replica of an older version applies another notification of the group: digest and
	// applied_at change, the body's columns stay.
	mustExec(t, st, `UPDATE notification_digests SET digest = '\x00'::bytea, applied_at = now()`)
	replay("body 3 after an older replica's notification", c, "body 3", -1)

	// A notification applied without its body's sum leaves the body's columns, as an older
	// replica does: a snapshot with another digest ends them, the same one keeps them.
	mustIngest(t, st, c, withBody(group("g", firing("CPU", "f4", t0)), "body 4"))
	mustExec(t, st, `UPDATE notification_digests SET applied_at = now() - interval '1 minute'`)
	if res := mustIngest(t, st, c, group("g", firing("CPU", "f4", t0))); res.Replay {
		t.Fatal("the same snapshot after the window was answered as a replay")
	}
	replay("body 4 after the same snapshot applied without its body's sum", c, "body 4", 1)
	mustIngest(t, st, c, group("g", firing("CPU", "f5", t0)))
	replay("body 4 after another snapshot applied without its body's sum", c, "body 4", -1)
}

// TestIngest_AlertPointsAtNewestIncident: an alert routed into two groups points at the newest
// of their incidents, and shows its newest copy, whichever group sent which copy: a group that
// sends an older copy (a new occurrence there) opens an incident the alert then points at,
// without the older copy replacing the row's; a resolved copy for the older group leaves the
// row's firing; and a group whose incident is older does not take the alert back.
func TestIngest_AlertPointsAtNewestIncident(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	t1 := t0.Add(time.Hour)
	newer := firing("Disk", "f1", t1, "route", "a")
	older := firing("Disk", "f1", t0, "route", "b")
	first := mustIngest(t, st, c, group("a", newer)).IncidentID
	second := mustIngest(t, st, c, group("b", older))
	if !second.Opened || second.IncidentID <= first {
		t.Fatalf("the older copy in another group: %+v, want a new incident after %d", second, first)
	}
	alertIs := func(what string, incident int64, status string) {
		t.Helper()
		var id int64
		if err := st.Pool().QueryRow(ctx, `SELECT id FROM alerts WHERE fingerprint = 'f1'`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		a, err := st.AlertByID(ctx, id)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		var points int64
		if a.IncidentID != nil {
			points = *a.IncidentID
		}
		if points != incident || !a.StartsAt.Equal(t1) || a.Labels["route"] != "a" || a.Status != status {
			t.Fatalf("%s: the alert points at incident %d, starts at %v, route %s, %s; want incident %d, %v, route a, %s",
				what, points, a.StartsAt, a.Labels["route"], a.Status, incident, t1, status)
		}
	}
	alertIs("after the older copy", second.IncidentID, store.AlertFiring)
	if in := mustIncident(t, st, second.IncidentID); in.AlertCount != 1 || len(in.Alerts) != 1 || !in.Alerts[0].StartsAt.Equal(t0) {
		t.Fatalf("the second incident: %d alerts, %+v; want the occurrence of %v", in.AlertCount, in.Alerts, t0)
	}
	if res := mustIngest(t, st, c, group("b", resolved(older, t0.Add(time.Minute)))); !res.Resolved || res.Stopped != 1 {
		t.Fatalf("the older copy resolved: %+v, want its incident resolved", res)
	}
	alertIs("after the older copy's resolution", second.IncidentID, store.AlertFiring)
	// The first group's incident is older: its notification keeps the alert's newest incident.
	mustIngest(t, st, c, group("a", newer, firing("Disk", "f2", t1, "route", "a")))
	alertIs("after the first group again", second.IncidentID, store.AlertFiring)
}
