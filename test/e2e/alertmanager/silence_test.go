package alertmanager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// TestAlertmanager_SilenceThenExpiry: Alertmanager never sends a resolution for a silenced
// alert, it stops sending it. After the integration's expire_after the server resolves it
// ("expiry"); when the silence ends and Alertmanager sends it firing again, it fires again as
// docs/incidents.md's "Expiry" says: in its incident if that is still open, else in a new one;
// a real resolution that comes later corrects the expired occurrence, with no event.
func TestAlertmanager_SilenceThenExpiry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "1m") // the least expire_after
	am := amtest.Start(t, amtest.Options{WebhookURL: webhookURL(e.srv), CredentialsFile: e.credentials,
		RepeatInterval: 3 * time.Second})

	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	newAlert := func(name, instance string) amtest.Alert {
		return amtest.Alert{Labels: map[string]string{"alertname": name, "instance": instance, "severity": "warning"}, StartsAt: startsAt}
	}
	// Heartbeat is a group of its own that nobody silences: its deliveries show Alertmanager
	// sending while CPUHigh is silenced whole.
	post(t, []amtest.Alert{newAlert("CPUHigh", "web1"), newAlert("CPUHigh", "web2"), newAlert("Heartbeat", "hb")}, am)
	fps := fingerprints(t, am, 3, "instance")
	web1, web2, hb := fps["web1"], fps["web2"], fps["hb"]
	in := e.openIncident(t, "CPUHigh", 2)
	e.openIncident(t, "Heartbeat", 1)
	ids := e.alertIDs(t)

	// web1 alone is silenced: its group is still sent, without it.
	silence := silenceAlerts(t, am, []string{web1}, amtest.Matcher{Name: "alertname", Value: "CPUHigh"},
		amtest.Matcher{Name: "instance", Value: "web1"})
	assertNoLongerSent(t, e, []string{web1}, web2)
	if n := e.exec(t, `UPDATE incident_alerts SET last_seen_at = now() - interval '2 minutes'
		WHERE alert_id = $1 AND status = 'firing'`, ids[web1]); n != 1 {
		t.Fatalf("backdate web1: %d occurrences, want 1", n)
	}
	if res := expire(t, e); res.Expired != 1 || res.Resolved != 0 {
		t.Errorf("ExpireAlerts: got %+v, want web1 expired and no incident resolved", res)
	}
	feed := e.alerts(t)
	if a := feed[web1]; a.Status != "resolved" || a.ResolutionSource != "expiry" || a.EndsAt == nil {
		t.Errorf("web1 in the feed: got %+v, want resolved by expiry", a)
	}
	if a := feed[web2]; a.Status != "firing" {
		t.Errorf("web2 in the feed: got %+v, want firing", a)
	}
	expired := e.incident(t, in.ID)
	if expired.Status != "triggered" || inline(t, expired, web1).ResolutionSource != "expiry" || inline(t, expired, web2).Status != "firing" {
		t.Errorf("incident after web1 expired: got %+v, want open, web1 resolved by expiry, web2 firing", expired)
	}
	events := e.timeline(t, in.ID)
	if last := events[len(events)-1]; last.Type != "alert_resolved" || last.AlertID != ids[web1] || !strings.Contains(last.Detail, "expired") {
		t.Errorf("timeline: got %v last, want web1's alert_resolved, saying it expired", last)
	}
	if res := expire(t, e); res.Expired != 0 {
		t.Errorf("ExpireAlerts again: got %+v, want nothing: web2 is still sent", res)
	}

	// The silence ends: Alertmanager sends web1 firing again, the same occurrence (its startsAt),
	// and the incident is still open: web1 fires again in it.
	expireSilence(t, am, silence)
	back := waitFor(t, "web1 firing again in its incident", func() incident { return e.incident(t, in.ID) },
		func(in incident) bool { return inline(t, in, web1).Status == "firing" })
	if a := inline(t, back, web1); back.Status != "triggered" || back.AlertCount != 2 || !a.StartsAt.Equal(startsAt) ||
		a.EndsAt != nil || a.ResolutionSource != "" {
		t.Errorf("incident: got %+v, want open with its 2 alerts, web1 firing since %v", back, startsAt)
	}
	events = e.timeline(t, in.ID)
	if got := types(events); !slices.Equal(got, []string{"triggered", "alert_added", "alert_added", "alert_resolved", "alert_added"}) {
		t.Errorf("timeline: got %v, want web1's alert_resolved (expired) then alert_added (firing again)", got)
	}
	if last := events[len(events)-1]; last.AlertID != ids[web1] || !strings.Contains(last.Detail, "again") {
		t.Errorf("timeline: got %+v last, want web1's alert_added, firing again after it expired", last)
	}
	if a := e.alerts(t)[web1]; a.Status != "firing" || a.ResolutionSource != "" || a.EndsAt != nil || a.IncidentID == nil || *a.IncidentID != in.ID {
		t.Errorf("web1 in the feed: got %+v, want firing in incident %d", a, in.ID)
	}

	// The whole group is silenced: both expire and the incident resolves. Meanwhile web2 really
	// ends; when the silence ends, Alertmanager sends web1 firing, which fires again in a new
	// incident (the resolved one stays resolved), and web2's real resolution, which corrects its
	// expired occurrence with no event.
	silence = silenceAlerts(t, am, []string{web1, web2}, amtest.Matcher{Name: "alertname", Value: "CPUHigh"})
	assertNoLongerSent(t, e, []string{web1, web2}, hb)
	if n := e.exec(t, `UPDATE incident_alerts SET last_seen_at = now() - interval '2 minutes'
		WHERE incident_id = $1 AND status = 'firing'`, in.ID); n != 2 {
		t.Fatalf("backdate CPUHigh: %d occurrences, want 2", n)
	}
	if res := expire(t, e); res.Expired != 2 || res.Resolved != 1 {
		t.Errorf("ExpireAlerts: got %+v, want 2 expired and their incident resolved", res)
	}
	quiet := e.incident(t, in.ID)
	if quiet.Status != "resolved" || quiet.ResolutionSource != "alerts" || quiet.ResolvedAt == nil {
		t.Errorf("incident: got %+v, want resolved (resolution_source alerts: every alert stopped)", quiet)
	}
	for _, a := range quiet.Alerts {
		if a.Status != "resolved" || a.ResolutionSource != "expiry" {
			t.Errorf("inline alert %s: got %+v, want resolved by expiry", a.Fingerprint, a)
		}
	}
	events = e.timeline(t, in.ID)
	if got := types(events[5:]); !slices.Equal(got, []string{"alert_resolved", "alert_resolved", "resolved"}) {
		t.Errorf("timeline: got %v, want two alert_resolved (expired) and resolved", types(events))
	}
	if open := e.incidents(t, ""); len(open) != 1 || open[0].Title != "Heartbeat" {
		t.Errorf("GET /api/incidents: got %+v, want Heartbeat's alone", open)
	}

	endsAt := time.Now().UTC().Truncate(time.Millisecond)
	ended := newAlert("CPUHigh", "web2")
	ended.EndsAt = endsAt
	post(t, []amtest.Alert{ended}, am)
	expireSilence(t, am, silence)
	next := waitFor(t, "web1 firing again in a new incident", func() []incident {
		var found []incident
		for _, o := range e.incidents(t, "") {
			if o.Title == "CPUHigh" {
				found = append(found, e.incident(t, o.ID))
			}
		}
		return found
	}, func(found []incident) bool { return len(found) == 1 && found[0].AlertCount == 1 })[0]
	if next.ID == in.ID || next.Status != "triggered" || inline(t, next, web1).Status != "firing" {
		t.Errorf("new incident: got %+v, want one other than %d, triggered, web1 firing", next, in.ID)
	}
	if got := types(e.timeline(t, next.ID)); !slices.Equal(got, []string{"triggered", "alert_added"}) {
		t.Errorf("new incident's timeline: got %v, want triggered and web1's alert_added", got)
	}
	if a := e.alerts(t)[web1]; a.Status != "firing" || a.IncidentID == nil || *a.IncidentID != next.ID {
		t.Errorf("web1 in the feed: got %+v, want firing in incident %d", a, next.ID)
	}
	corrected := waitFor(t, "web2's real resolution", func() alert { return e.alerts(t)[web2] },
		func(a alert) bool { return a.ResolutionSource == "alertmanager" })
	if corrected.Status != "resolved" || corrected.EndsAt == nil || !corrected.EndsAt.Equal(endsAt) || *corrected.IncidentID != in.ID {
		t.Errorf("web2 in the feed: got %+v, want resolved by alertmanager at %v, in incident %d", corrected, endsAt, in.ID)
	}
	old := e.incident(t, in.ID)
	if a := inline(t, old, web2); a.ResolutionSource != "alertmanager" || a.EndsAt == nil || !a.EndsAt.Equal(endsAt) {
		t.Errorf("web2 in the expired incident: got %+v, want its expiry corrected: resolved by alertmanager at %v", a, endsAt)
	}
	if a := inline(t, old, web1); a.Status != "resolved" || a.ResolutionSource != "expiry" {
		t.Errorf("web1 in the expired incident: got %+v, want its occurrence there resolved by expiry", a)
	}
	if old.Status != "resolved" || !slices.Equal(e.timeline(t, in.ID), events) {
		t.Errorf("the expired incident: got %+v, want it resolved, its timeline unchanged by the correction", old)
	}
	assertEveryDeliveryStored(t, []*amtest.Alertmanager{am}, e.srv)
}

// alertIDs is the server's alert id of each fingerprint.
func (e *env) alertIDs(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for fp, a := range e.alerts(t) {
		out[fp] = a.ID
	}
	return out
}

// inline is the incident's inline alert of fingerprint fp.
func inline(t *testing.T, in incident, fp string) alert {
	t.Helper()
	for _, a := range in.Alerts {
		if a.Fingerprint == fp {
			return a
		}
	}
	t.Fatalf("incident %d holds no alert %s: %+v", in.ID, fp, in.Alerts)
	return alert{}
}

// silenceAlerts silences what matchers match for an hour and waits until Alertmanager shows
// the alerts fps suppressed by it.
func silenceAlerts(t *testing.T, am *amtest.Alertmanager, fps []string, matchers ...amtest.Matcher) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	id, err := am.Silence(ctx, matchers, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, fmt.Sprintf("%v silenced by %s", fps, id), func() []amtest.AlertStatus {
		alerts, err := am.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return alerts
	}, func(alerts []amtest.AlertStatus) bool {
		silenced := 0
		for _, a := range alerts {
			if slices.Contains(fps, a.Fingerprint) && a.Status.State == "suppressed" && slices.Contains(a.Status.SilencedBy, id) {
				silenced++
			}
		}
		return silenced == len(fps)
	})
	return id
}

func expireSilence(t *testing.T, am *amtest.Alertmanager, id string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	defer cancel()
	if err := am.ExpireSilence(ctx, id); err != nil {
		t.Fatal(err)
	}
}

// assertNoLongerSent checks that Alertmanager stops sending the silenced alerts: over three
// notifications that refresh witness (an alert still sent), their received_at holds still
// from the first on (a notification flushed as the silence came may still carry them).
func assertNoLongerSent(t *testing.T, e *env, silenced []string, witness string) {
	t.Helper()
	seen := e.waitReceived(t, witness, time.Now())
	frozen := e.alerts(t)
	seen = e.waitReceived(t, witness, seen)
	e.waitReceived(t, witness, seen)
	now := e.alerts(t)
	for _, fp := range silenced {
		if !now[fp].ReceivedAt.Equal(frozen[fp].ReceivedAt) || now[fp].Status != "firing" {
			t.Errorf("silenced alert %s: got %+v, want it firing and no longer received since %v", fp, now[fp], frozen[fp].ReceivedAt)
		}
	}
}

// waitReceived waits until the server received alert fp after after, and returns when.
func (e *env) waitReceived(t *testing.T, fp string, after time.Time) time.Time {
	t.Helper()
	return waitFor(t, fmt.Sprintf("alert %s received after %v", fp, after), func() alert { return e.alerts(t)[fp] },
		func(a alert) bool { return a.ReceivedAt.After(after) }).ReceivedAt
}

// expire runs one round of the expiry, as each replica does every --alert-expiry-interval.
func expire(t *testing.T, e *env) store.ExpiryResult {
	t.Helper()
	res, err := e.srv.Store.ExpireAlerts(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return res
}
