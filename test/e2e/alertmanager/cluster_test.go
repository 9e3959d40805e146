package alertmanager

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestAlertmanager_HAPairOnTwoReplicas: the two members of an Alertmanager cluster each send
// to a different replica of the server, over one database, the same groups at the same time
// (their peer timeout is cut so short that gossip does not stop the second member's copy, as
// when it is slow). Exactly one incident per group, one alert row per fingerprint, one
// occurrence per alert and one event per transition, through the firing and the resolution.
func TestAlertmanager_HAPairOnTwoReplicas(t *testing.T) {
	t.Parallel()
	db := pgtest.MustDatabase(t)
	replicas := []*apitest.Server{apitest.NewServer(t, db, nil), apitest.NewServer(t, db, nil)}
	e := newEnvOn(t, replicas[1], "")
	var opts []amtest.Options
	for _, r := range replicas {
		opts = append(opts, amtest.Options{WebhookURL: webhookURL(r), CredentialsFile: e.credentials,
			RepeatInterval: 3 * time.Second, PeerTimeout: time.Millisecond})
	}
	ams := amtest.StartClusterEach(t, opts...)

	// As Prometheus does: every alert to every member, with its startsAt.
	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	names := []string{"Errors", "Latency", "Saturation"}
	var alerts []amtest.Alert
	for _, name := range names {
		for _, instance := range []string{"a", "b", "c"} {
			alerts = append(alerts, amtest.Alert{Labels: map[string]string{"alertname": name, "instance": instance}, StartsAt: startsAt})
		}
	}
	post(t, alerts, ams...)
	want := amFingerprints(t, ams[0], 9)
	if other := amFingerprints(t, ams[1], 9); !slices.Equal(other, want) {
		t.Fatalf("fingerprints: %s has %v, %s %v; want the same", ams[0].URL, want, ams[1].URL, other)
	}
	for _, name := range names {
		e.openIncident(t, name, 3)
	}
	// Both replicas took each group's first notification, and repeats came after.
	for _, r := range replicas {
		waitDeliveries(t, r, map[string]float64{}, 3)
	}
	waitFor(t, "three repeats on either replica", func() float64 {
		return deliveries(t, replicas[0])["stored"] + deliveries(t, replicas[1])["stored"]
	}, func(n float64) bool { return n >= 9 })
	assertOneOfEach(t, e, want, 3, 0)

	endsAt := time.Now().UTC().Truncate(time.Millisecond)
	for i := range alerts {
		alerts[i].EndsAt = endsAt
	}
	post(t, alerts, ams...)
	waitFor(t, "every incident resolved", func() []incident { return e.incidents(t, "") },
		func(open []incident) bool { return len(open) == 0 })
	for _, in := range e.incidents(t, "status=resolved") {
		if in.ResolutionSource != "alerts" {
			t.Errorf("incident %q: got %+v, want resolved by its alerts", in.Title, in)
		}
	}
	assertOneOfEach(t, e, want, 3, 3)
	assertEveryDeliveryStored(t, ams, replicas...)
	t.Logf("notifications stored by each replica: %v and %v", deliveries(t, replicas[0])["stored"], deliveries(t, replicas[1])["stored"])
}

// amFingerprints waits until am holds n alerts and returns their fingerprints, sorted.
func amFingerprints(t *testing.T, am *amtest.Alertmanager, n int) []string {
	t.Helper()
	var out []string
	for _, a := range amAlerts(t, am, n) {
		out = append(out, a.Fingerprint)
	}
	slices.Sort(out)
	return out
}

// assertOneOfEach checks the tables: one alert row for each of fps, one occurrence each in
// groups incidents (one a group), one triggered event an incident and one alert_added an
// alert; resolved of them resolved, with one resolved event each and one alert_resolved an
// alert.
func assertOneOfEach(t *testing.T, e *env, fps []string, groups, resolved int) {
	t.Helper()
	checks := []struct {
		what  string
		query string
		want  int
	}{
		{"alert rows", `SELECT count(*) FROM alerts`, len(fps)},
		{"fingerprints", `SELECT count(DISTINCT fingerprint) FROM alerts WHERE fingerprint = ANY($1)`, len(fps)},
		{"incidents", `SELECT count(*) FROM incidents`, groups},
		{"groups", `SELECT count(DISTINCT group_key) FROM incidents`, groups},
		{"occurrences", `SELECT count(*) FROM incident_alerts`, len(fps)},
		{"alerts with an occurrence", `SELECT count(DISTINCT alert_id) FROM incident_alerts`, len(fps)},
		{"triggered events", `SELECT count(*) FROM incident_events WHERE type = 'triggered'`, groups},
		{"incidents triggered", `SELECT count(DISTINCT incident_id) FROM incident_events WHERE type = 'triggered'`, groups},
		{"alert_added events", `SELECT count(*) FROM incident_events WHERE type = 'alert_added'`, len(fps)},
		{"alerts added", `SELECT count(DISTINCT alert_id) FROM incident_events WHERE type = 'alert_added'`, len(fps)},
		{"resolved incidents", `SELECT count(*) FROM incidents WHERE status = 'resolved'`, resolved},
		{"resolved events", `SELECT count(*) FROM incident_events WHERE type = 'resolved'`, resolved},
		{"alert_resolved events", `SELECT count(*) FROM incident_events WHERE type = 'alert_resolved'`, resolved * len(fps) / groups},
		{"alerts resolved", `SELECT count(DISTINCT alert_id) FROM incident_events WHERE type = 'alert_resolved'`, resolved * len(fps) / groups},
	}
	for _, c := range checks {
		var args []any
		if c.what == "fingerprints" {
			args = append(args, fps)
		}
		if got := e.count(t, c.query, args...); got != c.want {
			t.Errorf("%s: got %d, want %d (%s)", c.what, got, c.want, c.query)
		}
	}
	if t.Failed() {
		t.Logf("timelines: %s", timelines(t, e))
	}
}

// timelines is every incident's timeline, for a failure's message.
func timelines(t *testing.T, e *env) string {
	t.Helper()
	var out string
	for _, q := range []string{"", "status=resolved"} {
		for _, in := range e.incidents(t, q) {
			out += fmt.Sprintf("\n  %d %q: %v", in.ID, in.Title, e.timeline(t, in.ID))
		}
	}
	return out
}
