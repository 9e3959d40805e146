package alertmanager

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// TestAlertmanager_FiringThenResolved: a group's alerts open one incident, Alertmanager's
// repeats of the unchanged group write nothing more, their resolution resolves it, and a new
// firing of one of them opens a new incident.
func TestAlertmanager_FiringThenResolved(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	am := amtest.Start(t, amtest.Options{WebhookURL: webhookURL(e.srv), CredentialsFile: e.credentials,
		GroupBy: []string{"alertname", "cluster"}, RepeatInterval: 3 * time.Second})

	startsAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	sent := map[string]amtest.Alert{}
	for instance, severity := range map[string]string{"db1": "warning", "db2": "critical"} {
		sent[instance] = amtest.Alert{
			Labels:       map[string]string{"alertname": "DiskFull", "cluster": "prod", "instance": instance, "severity": severity},
			Annotations:  map[string]string{"summary": instance + "'s disk is full"},
			StartsAt:     startsAt,
			GeneratorURL: "http://prometheus.invalid/graph?g0.expr=disk_free",
		}
	}
	post(t, slices.Collect(maps.Values(sent)), am)
	fps := fingerprints(t, am, 2, "instance")

	// One incident, as docs/incidents.md describes it, its alerts inline with Alertmanager's
	// fingerprints.
	in := e.openIncident(t, "DiskFull (cluster=prod)", 2)
	if in.GroupKey != `{}:{alertname="DiskFull", cluster="prod"}` || in.Status != "triggered" || in.Severity != "critical" ||
		!maps.Equal(in.GroupLabels, map[string]string{"alertname": "DiskFull", "cluster": "prod"}) ||
		in.ResolvedAt != nil || in.ResolutionSource != "" {
		t.Errorf("incident: got %+v, want group %q triggered, severity critical (the highest), labels alertname and cluster",
			in, `{}:{alertname="DiskFull", cluster="prod"}`)
	}
	ids := map[int64]bool{}
	for _, a := range in.Alerts {
		want := sent[a.Labels["instance"]]
		if a.Fingerprint != fps[a.Labels["instance"]] || a.Status != "firing" || !a.StartsAt.Equal(startsAt) || a.EndsAt != nil ||
			!maps.Equal(a.Labels, want.Labels) || !maps.Equal(a.Annotations, want.Annotations) || a.GeneratorURL != want.GeneratorURL ||
			a.Name != "DiskFull" || a.IncidentID == nil || *a.IncidentID != in.ID || a.ResolutionSource != "" {
			t.Errorf("inline alert: got %+v, want fingerprint %s (Alertmanager's), firing since %v, as posted: %+v",
				a, fps[a.Labels["instance"]], startsAt, want)
		}
		ids[a.ID] = true
	}
	firing := e.timeline(t, in.ID)
	if got := types(firing); !slices.Equal(got, []string{"triggered", "alert_added", "alert_added"}) {
		t.Fatalf("timeline: got %v, want triggered and an alert_added for each alert", got)
	}
	for _, ev := range firing {
		if ev.Username != "" || ev.UserID != 0 || (ev.Type == "alert_added") != ids[ev.AlertID] {
			t.Errorf("timeline: got %+v, want the server's (no user), alert_added naming one of the incident's alerts", ev)
		}
	}
	feed := e.alerts(t)
	if len(feed) != 2 || feed[fps["db1"]].Status != "firing" || feed[fps["db2"]].Status != "firing" {
		t.Errorf("GET /api/alerts: got %+v, want both fingerprints firing", feed)
	}
	delivered := e.integrationNow(t)
	if delivered.LastDeliveryAt == nil || delivered.Keys[0].LastUsedAt == nil || delivered.LastError != "" {
		t.Errorf("integration: got %+v, want a delivery with its key and no error", delivered)
	}

	// Alertmanager re-sends the unchanged group every repeat_interval: a snapshot of what is
	// already stored, which refreshes the alerts and writes no event.
	waitDeliveries(t, e.srv, deliveries(t, e.srv), 2)
	if got := e.timeline(t, in.ID); !slices.Equal(got, firing) {
		t.Errorf("timeline after repeats: got %v, want it unchanged: %v", got, firing)
	}
	repeated := e.integrationNow(t)
	if repeated.LastDeliveryAt == nil || !repeated.LastDeliveryAt.After(*delivered.LastDeliveryAt) {
		t.Errorf("last_delivery_at after repeats: got %v, want later than %v", repeated.LastDeliveryAt, delivered.LastDeliveryAt)
	}
	// received_at is written again once 15 s old (docs/incidents.md): repeats keep coming, so it
	// moves within a few of them.
	for deadline := time.Now().Add(waitBound); ; time.Sleep(250 * time.Millisecond) {
		var stale []string
		for fp, a := range e.alerts(t) {
			if !a.ReceivedAt.After(feed[fp].ReceivedAt) || a.Status != "firing" {
				stale = append(stale, fmt.Sprintf("%s: %+v", fp, a))
			}
		}
		if len(stale) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alerts after repeats: %v, want each firing and received after %v", stale, feed)
		}
	}
	if again := e.incident(t, in.ID); again.AlertCount != 2 || again.Status != "triggered" || !again.TriggeredAt.Equal(in.TriggeredAt) {
		t.Errorf("incident after repeats: got %+v, want it as it was", again)
	}

	// Prometheus resolves them: posted again with their end, which Alertmanager notifies.
	endsAt := time.Now().Add(-time.Second).UTC().Truncate(time.Millisecond)
	var resolved []amtest.Alert
	for _, a := range sent {
		a.EndsAt = endsAt
		resolved = append(resolved, a)
	}
	post(t, resolved, am)
	done := waitFor(t, "the incident resolved", func() incident { return e.incident(t, in.ID) },
		func(in incident) bool { return in.Status == "resolved" })
	if done.ResolutionSource != "alerts" || done.ResolvedAt == nil || done.AlertCount != 2 {
		t.Errorf("resolved incident: got %+v, want resolution_source alerts", done)
	}
	for _, a := range done.Alerts {
		if a.Status != "resolved" || a.EndsAt == nil || !a.EndsAt.Equal(endsAt) || a.ResolutionSource != "alertmanager" {
			t.Errorf("resolved inline alert: got %+v, want resolved by alertmanager at %v", a, endsAt)
		}
	}
	events := e.timeline(t, in.ID)
	if got := types(events); !slices.Equal(got, []string{"triggered", "alert_added", "alert_added", "alert_resolved", "alert_resolved", "resolved"}) {
		t.Errorf("timeline: got %v, want the firing's three events, an alert_resolved for each alert, then resolved", got)
	}
	for _, ev := range events[3:5] {
		if !ids[ev.AlertID] || ev.Username != "" {
			t.Errorf("alert_resolved event: got %+v, want the server's, naming one of the incident's alerts", ev)
		}
	}
	if events[3].AlertID == events[4].AlertID {
		t.Errorf("alert_resolved events: both name alert %d, want one for each alert", events[3].AlertID)
	}
	if !slices.Equal(events[:3], firing) {
		t.Errorf("timeline: got %v, want it to begin with %v", events, firing)
	}
	if last := events[len(events)-1]; last.Username != "" || last.UserID != 0 || last.AlertID != 0 {
		t.Errorf("resolved event: got %+v, want the server's, with no user and no alert", last)
	}
	if open := e.incidents(t, ""); len(open) != 0 {
		t.Errorf("GET /api/incidents: got %+v, want no open incident", open)
	}
	if list := e.incidents(t, "status=resolved"); len(list) != 1 || list[0].ID != in.ID {
		t.Errorf("GET /api/incidents?status=resolved: got %+v, want incident %d", list, in.ID)
	}
	for fp, a := range e.alerts(t) {
		if a.Status != "resolved" || a.ResolutionSource != "alertmanager" || a.EndsAt == nil || !a.EndsAt.Equal(endsAt) {
			t.Errorf("alert %s: got %+v, want resolved by alertmanager at %v", fp, a, endsAt)
		}
	}

	// db1 fires again, from a new startsAt: a new occurrence of the same alert row, in a new
	// incident, the resolved one untouched.
	again := sent["db1"]
	again.StartsAt = time.Now().UTC().Truncate(time.Millisecond)
	post(t, []amtest.Alert{again}, am)
	next := e.openIncident(t, "DiskFull (cluster=prod)", 1)
	if a := next.Alerts[0]; next.ID == in.ID || a.Fingerprint != fps["db1"] || a.Status != "firing" || !a.StartsAt.Equal(again.StartsAt) ||
		next.Severity != "warning" {
		t.Errorf("re-fired: got incident %+v, want a new one (not %d), severity warning, db1 firing since %v", next, in.ID, again.StartsAt)
	}
	if a := e.alerts(t)[fps["db1"]]; a.ID != feed[fps["db1"]].ID || a.Status != "firing" || !a.StartsAt.Equal(again.StartsAt) {
		t.Errorf("db1 in the feed: got %+v, want its row %d reused, firing since %v", a, feed[fps["db1"]].ID, again.StartsAt)
	}
	if got := e.timeline(t, in.ID); !slices.Equal(got, events) {
		t.Errorf("the resolved incident's timeline: got %v, want it unchanged", got)
	}
	assertEveryDeliveryStored(t, []*amtest.Alertmanager{am}, e.srv)
}
