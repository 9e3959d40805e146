package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// alertmanagerBody is a notification as Alertmanager writes it: its webhook message (the
// fields of v0.35, in its order) through json.Encoder, which escapes <, > and & and ends the
// body with a newline.
func alertmanagerBody(t testing.TB, alerts int, annotation string) []byte {
	starts := time.Date(2026, 12, 6, 7, 0, 0, 123456789, time.UTC)
	m := amtest.WebhookMessage{Receiver: "terdut", Status: "firing", GroupLabels: map[string]string{"alertname": "DiskFull"},
		CommonLabels: map[string]string{"alertname": "DiskFull", "job": "node"}, CommonAnnotations: map[string]string{},
		ExternalURL: "http://alertmanager.test:9093", Version: "4", GroupKey: `{}/{severity=~"warning|critical"}:{alertname="DiskFull"}`,
		TruncatedAlerts: 3, Alerts: []amtest.WebhookAlert{}}
	for i := range alerts {
		status, ends := "firing", time.Time{}
		if i%2 == 1 {
			status, ends = "resolved", starts.Add(time.Minute).In(time.FixedZone("", 3600))
		}
		m.Alerts = append(m.Alerts, amtest.WebhookAlert{Status: status, StartsAt: starts, EndsAt: ends, Fingerprint: fmt.Sprintf("%016x", i),
			Labels:       map[string]string{"alertname": "DiskFull", "job": "node", "instance": fmt.Sprintf("host-%d:9100", i), "severity": "critical"},
			Annotations:  map[string]string{"summary": fmt.Sprintf("host-%d is out of disk space", i), "description": annotation},
			GeneratorURL: "http://prometheus.test:9090/graph?g0.expr=node_filesystem_avail_bytes+%3C+5&g0.tab=1"})
	}
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(m); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// checkDecode holds decodeNotification, and its fast path when it reads the body, to
// json.Unmarshal's answer for body: the same error or none, and the same notification.
func checkDecode(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	var want amNotification
	wantErr := json.Unmarshal(body, &want)
	var quick amNotification
	if fast = (&notificationDecoder{b: body}).notification(&quick); fast {
		if wantErr != nil {
			t.Fatalf("the fast path read %q, which json.Unmarshal refuses: %v", body, wantErr)
		}
		if !reflect.DeepEqual(quick, want) {
			t.Fatalf("the fast path read %q as\n%#v\nwant\n%#v", body, quick, want)
		}
	}
	var got amNotification
	err := decodeNotification(body, &got)
	if (err == nil) != (wantErr == nil) {
		t.Fatalf("decodeNotification(%q): error %v, json.Unmarshal's %v", body, err, wantErr)
	}
	if err == nil && !reflect.DeepEqual(got, want) {
		t.Fatalf("decodeNotification(%q) =\n%#v\nwant\n%#v", body, got, want)
	}
	return fast
}

// TestDecodeNotification_FastPath: what Alertmanager sends is read by the fast path (else the
// speed it exists for is gone) and read as json.Unmarshal reads it: escapes of every kind,
// non-ASCII, times in zones, fields it adds; what the fast path does not read goes to
// json.Unmarshal and is answered the same.
func TestDecodeNotification_FastPath(t *testing.T) {
	for name, body := range map[string][]byte{
		"alertmanager":       alertmanagerBody(t, 50, "Filesystem / has less than 5% left & will fill within <4 hours>."),
		"escapes":            alertmanagerBody(t, 3, "line 1\nline 2\t\"quoted\" \\ / \x01 \u2028 é 😀 \ufffd"),
		"no alerts":          alertmanagerBody(t, 0, ""),
		"added fields":       []byte(`{"version":"4","groupKey":"g","alerts":[{"status":"firing","x":{"a":[1,true,false,"s",{"b":[]}]},"fingerprint":"f"}],"notification_reason":"first","n":-12}`),
		"surrogates":         []byte(`{"groupKey":"\ud83d\ude00 \ud83d \ude00 \ud83dx \u00e9\u0041\/","alerts":[]}`),
		"empty maps, spaces": []byte(" \t\r\n{ \"groupLabels\" : { } , \"alerts\" : [ { \"labels\" : { \"a\" : \"1\" , \"a\" : \"2\" } } ] , \"truncatedAlerts\" : -0 } \n"),
	} {
		t.Run(name, func(t *testing.T) {
			if !checkDecode(t, body) {
				t.Errorf("the fast path did not read %q", body)
			}
		})
	}
	for name, body := range map[string]string{
		"null":              `{"version":null,"alerts":[]}`,
		"null labels":       `{"groupLabels":null,"alerts":[]}`,
		"null alert":        `{"alerts":[null]}`,
		"null label value":  `{"alerts":[{"labels":{"a":null}}]}`,
		"other case":        `{"Version":"4","ALERTS":[]}`,
		"folded to a field": "{\"ver\u017fion\":\"4\",\"alerts\":[]}",
		"field twice":       `{"alerts":[{"status":"firing"}],"alerts":[{"fingerprint":"f"}]}`,
		"alert field twice": `{"alerts":[{"labels":{"a":"1"},"labels":{"b":"2"}}]}`,
		"fraction":          `{"truncatedAlerts":1.0,"alerts":[]}`,
		"exponent":          `{"truncatedAlerts":1e2,"alerts":[]}`,
		"overflow":          `{"truncatedAlerts":99999999999999999999,"alerts":[]}`,
		"leading zero":      `{"truncatedAlerts":01,"alerts":[]}`,
		"string number":     `{"truncatedAlerts":"1","alerts":[]}`,
		"number string":     `{"status":1,"alerts":[]}`,
		"bad time":          `{"alerts":[{"startsAt":"yesterday"}]}`,
		"escaped time":      `{"alerts":[{"startsAt":"2026-12-06T07:00:00\u005a"}]}`,
		"unknown fraction":  `{"x":1.5,"alerts":[]}`,
		"deep":              `{"x":` + strings.Repeat("[", maxSkipDepth+2) + strings.Repeat("]", maxSkipDepth+2) + `,"alerts":[]}`,
		"top null":          `null`,
		"top array":         `[]`,
		"trailing":          `{"alerts":[]} {}`,
		"cut":               `{"alerts":[{"status":"fir`,
		"bad escape":        `{"status":"\x","alerts":[]}`,
		"short escape":      `{"status":"\u12","alerts":[]}`,
		"control":           "{\"status\":\"a\tb\",\"alerts\":[]}",
		"invalid utf-8":     "{\"status\":\"\xff\",\"alerts\":[]}",
		"invalid utf-8 esc": "{\"status\":\"\\n\xff\",\"alerts\":[]}",
		"bom":               "\ufeff{\"alerts\":[]}",
		"trailing comma":    `{"alerts":[],}`,
		"missing colon":     `{"alerts" []}`,
		"bare word":         `{"x":nul,"alerts":[]}`,
		"empty":             ``,
	} {
		t.Run(name, func(t *testing.T) {
			if checkDecode(t, []byte(body)) {
				t.Errorf("the fast path read %q: it is json.Unmarshal's to read", body)
			}
		})
	}
}

// FuzzDecodeNotification holds decodeNotification to json.Unmarshal's answer for any body.
// `make fuzz` runs it; `make test` runs its seeds.
func FuzzDecodeNotification(f *testing.F) {
	f.Add(alertmanagerBody(f, 2, "a & b\n<c> \"d\" é"))
	f.Add([]byte(`{"groupKey":"\ud83d\ude00\ud800\u0041","truncatedAlerts":-0,"alerts":[{"labels":{"a":"1","a":"2"},"x":[{},[],"",0,true]}]}`))
	f.Add([]byte(`{"Alerts":[],"alerts":[{"startsAt":"2026-12-06T07:00:00+01:00","endsAt":"0001-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":null,"truncatedAlerts":1e1,"alerts":[null]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		checkDecode(t, body)
	})
}

// BenchmarkDecodeNotification compares the decoder with json.Unmarshal on what Alertmanager
// sends for a group of 50.
func BenchmarkDecodeNotification(b *testing.B) {
	body := alertmanagerBody(b, 50, "Filesystem / has less than 5% left & will fill within 4 hours.")
	b.Run("decodeNotification", func(b *testing.B) {
		for b.Loop() {
			var am amNotification
			if err := decodeNotification(body, &am); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		for b.Loop() {
			var am amNotification
			if err := json.Unmarshal(body, &am); err != nil {
				b.Fatal(err)
			}
		}
	})
}
