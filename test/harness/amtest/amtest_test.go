package amtest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// testCtx bounds one call of the API in a test.
func testCtx(tb testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), waitBound)
	tb.Cleanup(cancel)
	return ctx
}

// waitAlerts polls GET /api/v2/alerts until ok holds, or fails tb with the last answer.
func waitAlerts(tb testing.TB, am *Alertmanager, what string, ok func([]AlertStatus) bool) []AlertStatus {
	tb.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		alerts, err := am.Alerts(testCtx(tb))
		if err == nil && ok(alerts) {
			return alerts
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s: GET /api/v2/alerts never showed %s within %v: last %+v, %v", am.URL, what, waitBound, alerts, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func byName(name string) func(AlertStatus) bool {
	return func(a AlertStatus) bool { return a.Labels["alertname"] == name }
}

// The keys of the webhook's body and of each of its alerts in Alertmanager v0.35.0 (version
// "4" of the webhook): a field Alertmanager adds or drops with an upgrade shows here first.
var (
	notificationKeys = []string{"alerts", "commonAnnotations", "commonLabels", "externalURL", "groupKey",
		"groupLabels", "notification_reason", "receiver", "routeLabels", "status", "truncatedAlerts", "version"}
	alertKeys = []string{"annotations", "endsAt", "fingerprint", "generatorURL", "labels", "startsAt", "status"}
)

func keys(tb testing.TB, body []byte) (top, alert []string) {
	tb.Helper()
	var m struct {
		Alerts []map[string]json.RawMessage `json:"alerts"`
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(body, &all); err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(body, &m); err != nil {
		tb.Fatal(err)
	}
	top = slices.Sorted(maps.Keys(all))
	if len(m.Alerts) > 0 {
		alert = slices.Sorted(maps.Keys(m.Alerts[0]))
	}
	return top, alert
}

func TestStart_FiringThenResolved(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	const token = "a-bearer-from-a-file"
	credentials := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(credentials, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	am := Start(t, Options{WebhookURL: rec.URL, CredentialsFile: credentials})

	st, err := am.Status(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st.Cluster.Status != "disabled" || st.VersionInfo.Version != "0.35.0" {
		t.Errorf("status: got cluster %q, version %q, want disabled, 0.35.0", st.Cluster.Status, st.VersionInfo.Version)
	}

	startsAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Millisecond)
	alert := Alert{
		Labels:       map[string]string{"alertname": "DiskFull", "instance": "db1", "severity": "critical"},
		Annotations:  map[string]string{"summary": "disk is full"},
		StartsAt:     startsAt,
		GeneratorURL: "http://prometheus.invalid/graph?g0.expr=up",
	}
	if err := am.PostAlerts(testCtx(t), []Alert{alert}); err != nil {
		t.Fatal(err)
	}
	shown := waitAlerts(t, am, "DiskFull", func(as []AlertStatus) bool { return slices.ContainsFunc(as, byName("DiskFull")) })
	fingerprint := shown[slices.IndexFunc(shown, byName("DiskFull"))].Fingerprint

	firing := rec.wait(t, "firing DiskFull", func(n notification) bool { return n.Status == "firing" })
	n := firing.Notice
	if n.Version != "4" || n.GroupKey != `{}:{alertname="DiskFull"}` || n.Receiver != receiverName ||
		n.TruncatedAlerts != 0 || n.ExternalURL != am.URL {
		t.Errorf("firing: got version %q, groupKey %q, receiver %q, truncatedAlerts %d, externalURL %q; want 4, %q, %q, 0, %q",
			n.Version, n.GroupKey, n.Receiver, n.TruncatedAlerts, n.ExternalURL, `{}:{alertname="DiskFull"}`, receiverName, am.URL)
	}
	if !maps.Equal(n.GroupLabels, map[string]string{"alertname": "DiskFull"}) || !maps.Equal(n.CommonLabels, alert.Labels) {
		t.Errorf("firing: got groupLabels %v, commonLabels %v, want {alertname: DiskFull}, %v", n.GroupLabels, n.CommonLabels, alert.Labels)
	}
	if n.NotificationReason != "first notification" || len(n.RouteLabels) != 0 {
		t.Errorf("firing: got notification_reason %q, routeLabels %v, want first notification, none", n.NotificationReason, n.RouteLabels)
	}
	if len(n.Alerts) != 1 {
		t.Fatalf("firing: got %d alerts, want 1: %s", len(n.Alerts), firing.Body)
	}
	a := n.Alerts[0]
	if a.Fingerprint != fingerprint || a.Status != "firing" || !a.StartsAt.Equal(startsAt) || !a.EndsAt.IsZero() ||
		a.GeneratorURL != alert.GeneratorURL || !maps.Equal(a.Labels, alert.Labels) || !maps.Equal(a.Annotations, alert.Annotations) {
		t.Errorf("firing alert: got %+v, want fingerprint %s (GET /api/v2/alerts), firing, startsAt %v, endsAt zero, %+v", a, fingerprint, startsAt, alert)
	}
	top, alertFields := keys(t, firing.Body)
	if !slices.Equal(top, notificationKeys) || !slices.Equal(alertFields, alertKeys) {
		t.Errorf("webhook fields: got %v and %v, want %v and %v", top, alertFields, notificationKeys, alertKeys)
	}

	// Resolved as Prometheus resolves: the same alert again with its end time, here just ahead.
	alert.EndsAt = time.Now().Add(2 * time.Second).UTC().Truncate(time.Millisecond)
	if err := am.PostAlerts(testCtx(t), []Alert{alert}); err != nil {
		t.Fatal(err)
	}
	resolved := rec.wait(t, "resolved DiskFull", func(n notification) bool { return n.Status == "resolved" })
	n = resolved.Notice
	if n.GroupKey != `{}:{alertname="DiskFull"}` || len(n.Alerts) != 1 || n.Alerts[0].Status != "resolved" ||
		n.Alerts[0].Fingerprint != fingerprint || !n.Alerts[0].EndsAt.Equal(alert.EndsAt) || !n.Alerts[0].StartsAt.Equal(startsAt) {
		t.Errorf("resolved: got %s, want the group's alert %s resolved with endsAt %v", resolved.Body, fingerprint, alert.EndsAt)
	}
	if n.NotificationReason != "all alerts resolved" {
		t.Errorf("resolved: got notification_reason %q, want all alerts resolved", n.NotificationReason)
	}
	if resolved.At.Before(alert.EndsAt) {
		t.Errorf("resolved: received at %v, before the alert's endsAt %v", resolved.At, alert.EndsAt)
	}
	if got := waitAlerts(t, am, "no alert", func(as []AlertStatus) bool { return len(as) == 0 }); len(got) != 0 {
		t.Errorf("after the resolution: GET /api/v2/alerts got %+v, want none (it hides resolved alerts)", got)
	}

	assertLoopbackOnly(t, am)
	for _, r := range rec.all() {
		if r.Auth != "Bearer "+token {
			t.Errorf("Authorization: got %q, want %q (the credentials file's content, trimmed)", r.Auth, "Bearer "+token)
		}
	}
}

func TestStart_MaxAlerts(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	am := Start(t, Options{WebhookURL: rec.URL, MaxAlerts: 2})
	var alerts []Alert
	for i := range 5 {
		alerts = append(alerts, Alert{Labels: map[string]string{"alertname": "Storm", "instance": fmt.Sprintf("host%d", i)}})
	}
	if err := am.PostAlerts(testCtx(t), alerts); err != nil {
		t.Fatal(err)
	}
	got := rec.wait(t, "of all five alerts", func(n notification) bool { return len(n.Alerts)+n.TruncatedAlerts == 5 })
	if got.Notice.TruncatedAlerts != 3 || len(got.Notice.Alerts) != 2 {
		t.Errorf("max_alerts 2 of 5: got %d alerts and truncatedAlerts %d, want 2 and 3", len(got.Notice.Alerts), got.Notice.TruncatedAlerts)
	}
	if rec.all()[0].Auth != "" {
		t.Errorf("without a credentials file: got Authorization %q, want none", rec.all()[0].Auth)
	}
}

func TestStartCluster(t *testing.T) {
	t.Parallel()
	rec := newRecorder(t)
	ams := StartCluster(t, 2, Options{WebhookURL: rec.URL})
	for _, am := range ams {
		st, err := am.Status(testCtx(t))
		if err != nil {
			t.Fatal(err)
		}
		var addrs []string
		for _, p := range st.Cluster.Peers {
			addrs = append(addrs, p.Address)
		}
		slices.Sort(addrs)
		want := []string{ams[0].ClusterAddr, ams[1].ClusterAddr}
		slices.Sort(want)
		if st.Cluster.Status != "ready" || !slices.Equal(addrs, want) {
			t.Errorf("%s: got cluster %q with peers %v, want ready with %v", am.URL, st.Cluster.Status, addrs, want)
		}
	}

	// Alertmanager gossips silences and what it notified, never alerts: Prometheus posts each
	// alert to every peer. Each peer gets one of its own here, and both a shared one.
	for i, am := range ams {
		own := Alert{Labels: map[string]string{"alertname": fmt.Sprintf("OnPeer%d", i)}}
		both := Alert{Labels: map[string]string{"alertname": "OnBoth"}}
		if err := am.PostAlerts(testCtx(t), []Alert{own, both}); err != nil {
			t.Fatal(err)
		}
	}
	for i, am := range ams {
		waitAlerts(t, am, "its own alert and the shared one", func(as []AlertStatus) bool {
			return len(as) == 2 && slices.ContainsFunc(as, byName(fmt.Sprintf("OnPeer%d", i))) && slices.ContainsFunc(as, byName("OnBoth"))
		})
	}
	for i, am := range ams {
		name := fmt.Sprintf("OnPeer%d", i)
		got := rec.wait(t, name, func(n notification) bool { return n.GroupLabels["alertname"] == name })
		if got.Notice.ExternalURL != am.URL {
			t.Errorf("%s: notified by %s, want %s, the only peer that has it", name, got.Notice.ExternalURL, am.URL)
		}
	}
	rec.wait(t, "OnBoth", func(n notification) bool { return n.GroupLabels["alertname"] == "OnBoth" })

	// A silence made on one peer reaches the other by gossip, and so does its expiry.
	id, err := ams[0].Silence(testCtx(t), []Matcher{{Name: "alertname", Value: "OnBoth"}}, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	waitAlerts(t, ams[1], "OnBoth silenced by "+id, func(as []AlertStatus) bool {
		i := slices.IndexFunc(as, byName("OnBoth"))
		return i >= 0 && as[i].Status.State == "suppressed" && slices.Equal(as[i].Status.SilencedBy, []string{id})
	})
	if err := ams[1].ExpireSilence(testCtx(t), id); err != nil {
		t.Fatal(err)
	}
	waitAlerts(t, ams[0], "OnBoth active again", func(as []AlertStatus) bool {
		i := slices.IndexFunc(as, byName("OnBoth"))
		return i >= 0 && as[i].Status.State == "active" && len(as[i].Status.SilencedBy) == 0
	})
	assertLoopbackOnly(t, ams...)
}
