package alertmanager

import (
	"slices"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// TestAlertmanager_MaxAlertsKeepsTheGroupAlive: with max_alerts 2, Alertmanager sends two of a
// group's alerts and counts the rest in truncatedAlerts. The incident holds the alerts that
// arrived, and, since nothing says which of its alerts still fire, a truncated notification
// keeps every one alive: even one Alertmanager no longer sends, and even with its occurrence
// backdated far past expire_after.
func TestAlertmanager_MaxAlertsKeepsTheGroupAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "") // expire_after 4h30m
	am := amtest.Start(t, amtest.Options{WebhookURL: webhookURL(e.srv), CredentialsFile: e.credentials, MaxAlerts: 2,
		RepeatInterval: 3 * time.Second})

	// Started now: Alertmanager flushes a new group at once when its first alert started more
	// than group_wait ago, before the rest of the same post are in it.
	storm := func(instances ...string) []amtest.Alert {
		var out []amtest.Alert
		for _, instance := range instances {
			out = append(out, amtest.Alert{Labels: map[string]string{"alertname": "Storm", "instance": instance, "severity": "warning"},
				StartsAt: time.Now().UTC().Truncate(time.Millisecond)})
		}
		return out
	}
	post(t, storm("host1", "host2", "host3", "host4", "host5"), am)
	fps := fingerprints(t, am, 5, "instance")

	// Alertmanager orders a group's alerts by instance: host1 and host2 are sent, three are
	// left out, and stay out of the server, repeat after repeat.
	in := e.openIncident(t, "Storm", 2)
	waitDeliveries(t, e.srv, map[string]float64{}, 3)
	in = e.incident(t, in.ID)
	if got := inlineFingerprints(in); in.AlertCount != 2 || !slices.Equal(got, sorted(fps["host1"], fps["host2"])) {
		t.Fatalf("incident of a truncated group: got %d alerts %v, want 2, host1's and host2's %v (of Alertmanager's %v)",
			in.AlertCount, got, sorted(fps["host1"], fps["host2"]), fps)
	}
	if feed := e.alerts(t); len(feed) != 2 {
		t.Errorf("GET /api/alerts: got %d alerts, want the 2 that arrived: %+v", len(feed), feed)
	}

	// host0 sorts first: host0 and host1 are sent from now on, host2 is left out though it fires.
	post(t, storm("host0"), am)
	fps = fingerprints(t, am, 6, "instance")
	in = e.openIncident(t, "Storm", 3)
	if got := inlineFingerprints(in); !slices.Equal(got, sorted(fps["host0"], fps["host1"], fps["host2"])) {
		t.Fatalf("incident: got alerts %v, want host0's, host1's and host2's", got)
	}
	before := e.timeline(t, in.ID)
	if got := types(before); !slices.Equal(got, []string{"triggered", "alert_added", "alert_added", "alert_added"}) {
		t.Errorf("timeline: got %v, want triggered and an alert_added for each of the 3 alerts that arrived", got)
	}

	// Each occurrence as if not reported for 10 hours, and so the group's last notification and
	// the alerts' last reports; two notifications later, none is expired.
	if n := e.exec(t, `UPDATE incident_alerts SET last_seen_at = now() - interval '10 hours' WHERE incident_id = $1`, in.ID); n != 3 {
		t.Fatalf("backdate: %d occurrences, want 3", n)
	}
	e.exec(t, `UPDATE notification_digests SET applied_at = applied_at - interval '10 hours'`)
	e.exec(t, `UPDATE alerts SET received_at = received_at - interval '10 hours'`)
	backdated := time.Now()
	waitDeliveries(t, e.srv, deliveries(t, e.srv), 2)
	if res := expire(t, e); res.Expired != 0 || res.Resolved != 0 {
		t.Errorf("ExpireAlerts while the truncated group is sent: got %+v, want nothing expired", res)
	}
	if n := e.count(t, `SELECT count(*) FROM incident_alerts WHERE incident_id = $1 AND status = 'firing'
		AND last_seen_at > now() - interval '1 hour'`, in.ID); n != 3 {
		t.Errorf("occurrences kept alive by the truncated notifications: got %d, want all 3", n)
	}
	feed := e.alerts(t)
	if left := feed[fps["host2"]]; left.Status != "firing" || left.ReceivedAt.After(backdated) {
		t.Errorf("host2: got %+v, want firing though Alertmanager left it out of every notification since %v", left, backdated)
	}
	if sent := feed[fps["host1"]]; !sent.ReceivedAt.After(backdated) {
		t.Errorf("host1: got received_at %v, want after %v (it is in every notification)", sent.ReceivedAt, backdated)
	}
	after := e.incident(t, in.ID)
	if after.Status != "triggered" || after.AlertCount != 3 {
		t.Errorf("incident: got %+v, want open with its 3 alerts", after)
	}
	for _, a := range after.Alerts {
		if a.Status != "firing" {
			t.Errorf("inline alert %s: got %s, want firing", a.Fingerprint, a.Status)
		}
	}
	if got := e.timeline(t, in.ID); !slices.Equal(got, before) {
		t.Errorf("timeline: got %v, want it unchanged: %v", got, before)
	}
	assertEveryDeliveryStored(t, []*amtest.Alertmanager{am}, e.srv)
}

// inlineFingerprints is the fingerprints of an incident's inline alerts, sorted.
func inlineFingerprints(in incident) []string {
	var out []string
	for _, a := range in.Alerts {
		out = append(out, a.Fingerprint)
	}
	slices.Sort(out)
	return out
}

func sorted(s ...string) []string {
	slices.Sort(s)
	return s
}
