package store

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// TestAppendJSONObject: a map encodes as encoding/json encodes it, byte for byte, whatever its
// keys and values hold (quotes, backslashes, control characters, HTML's characters, non-ASCII,
// invalid UTF-8), and nil as {}.
func TestAppendJSONObject(t *testing.T) {
	for _, m := range []map[string]string{
		{},
		{"alertname": "DiskFull", "instance": "db-1:9100", "job": "node", "severity": "critical"},
		{"summary": `disk "data" at 97% <high> & rising`, "path": `C:\data`, "tab": "a\tb\nc\x00d\x7f"},
		{"ключ": "значение", "emoji": "🔥", "bad": "\xff\xfe", "sep": "a\u2028b"},
		{"": ""},
	} {
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := appendJSONObject([]byte("x"), m); !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Errorf("appendJSONObject(%q) = %s, want %s", m, got[1:], want)
		}
	}
	if got := appendJSONObject(nil, nil); string(got) != "{}" {
		t.Errorf("appendJSONObject(nil) = %s, want {}", got)
	}
}

// TestDigestOf: the digest changes with anything the notification says, and with nothing
// else: the same instants in another zone, and the labels' order, give the same digest.
func TestDigestOf(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	base := func() Notification {
		return Notification{GroupKey: "{}:{alertname=\"Disk\"}", Status: AlertFiring, GroupLabels: map[string]string{"alertname": "Disk"},
			CommonLabels: map[string]string{"alertname": "Disk", "job": "node"},
			Alerts: []NotifiedAlert{
				{Fingerprint: "a1", Status: AlertFiring, Labels: map[string]string{"alertname": "Disk", "job": "node", "i": "1"},
					Annotations: map[string]string{"summary": "full"}, StartsAt: t0, GeneratorURL: "http://prometheus/graph"},
				{Fingerprint: "a2", Status: AlertResolved, Labels: map[string]string{"alertname": "Disk", "job": "node", "i": "2"},
					Annotations: map[string]string{"summary": "full"}, StartsAt: t0, EndsAt: t0.Add(time.Minute)},
			}}
	}
	digest := func(n Notification) []byte {
		alerts := latestCopies(n.Alerts)
		return digestOf(n, alerts, encodeAlerts(alerts, time.Now()))
	}
	want := digest(base())
	same := map[string]func(n *Notification){
		"alerts in another order": func(n *Notification) { n.Alerts[0], n.Alerts[1] = n.Alerts[1], n.Alerts[0] },
		"instants in another zone": func(n *Notification) {
			zone := time.FixedZone("CET", 3600)
			n.Alerts[0].StartsAt, n.Alerts[1].EndsAt = n.Alerts[0].StartsAt.In(zone), n.Alerts[1].EndsAt.In(zone)
		},
	}
	for what, change := range same {
		n := base()
		change(&n)
		if got := digest(n); !bytes.Equal(got, want) {
			t.Errorf("%s: the digest changed", what)
		}
	}
	none, empty := base(), base()
	none.Alerts[0].Annotations, empty.Alerts[0].Annotations = nil, map[string]string{}
	if !bytes.Equal(digest(none), digest(empty)) {
		t.Error("no annotations and empty annotations: the digests differ (both are stored as {})")
	}
	differ := map[string]func(n *Notification){
		"group key":        func(n *Notification) { n.GroupKey += "x" },
		"status":           func(n *Notification) { n.Status = AlertResolved },
		"truncated alerts": func(n *Notification) { n.TruncatedAlerts = 1 },
		"group labels":     func(n *Notification) { n.GroupLabels["alertname"] = "Disk2" },
		"common labels":    func(n *Notification) { delete(n.CommonLabels, "job") },
		"fingerprint":      func(n *Notification) { n.Alerts[0].Fingerprint = "a0" },
		"alert status":     func(n *Notification) { n.Alerts[0].Status = AlertResolved },
		"label value":      func(n *Notification) { n.Alerts[0].Labels["i"] = "3" },
		"label moved to annotations": func(n *Notification) {
			delete(n.Alerts[0].Labels, "i")
			n.Alerts[0].Annotations["i"] = "1"
		},
		"annotation":    func(n *Notification) { n.Alerts[1].Annotations["summary"] = "fuller" },
		"generator URL": func(n *Notification) { n.Alerts[0].GeneratorURL = "" },
		"startsAt":      func(n *Notification) { n.Alerts[0].StartsAt = n.Alerts[0].StartsAt.Add(time.Nanosecond) },
		"endsAt":        func(n *Notification) { n.Alerts[1].EndsAt = n.Alerts[1].EndsAt.Add(time.Second) },
		"one more alert": func(n *Notification) {
			n.Alerts = append(n.Alerts, NotifiedAlert{Fingerprint: "a3", Status: AlertFiring, StartsAt: t0})
		},
	}
	for what, change := range differ {
		n := base()
		change(&n)
		if got := digest(n); bytes.Equal(got, want) {
			t.Errorf("%s changed: the digest did not", what)
		}
	}
}
