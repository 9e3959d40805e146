package alertmanager

import (
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// docsPage is the page whose receiver TestAlertmanager_DocumentedReceiver runs.
const docsPage = "../../../docs/incidents.md"

// TestAlertmanager_DocumentedReceiver runs the alertmanager.yml that docs/incidents.md's
// "Connecting Alertmanager" shows, as it is written there, with three changes: its url's host
// is the test server's (the path stays the page's), its credentials_file is a file holding the
// integration's key, and the route's waits are seconds rather than minutes. Every alert of a
// group arrives (max_alerts: 0), the key is read from the file, groups are the page's
// (alertname and cluster), and the incidents resolve themselves (send_resolved).
func TestAlertmanager_DocumentedReceiver(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "")
	config, webhook := documentedConfig(t)
	if webhook["send_resolved"] != true || webhook["max_alerts"] != 0 {
		t.Errorf("docs/incidents.md's receiver: got send_resolved %v and max_alerts %v, want true and 0 as its bullets say",
			webhook["send_resolved"], webhook["max_alerts"])
	}
	rawURL, _ := webhook["url"].(string)
	docURL, err := url.Parse(rawURL)
	if err != nil || docURL.Path != webhookPath {
		t.Fatalf("docs/incidents.md's receiver: url %v (%v), want one ending %s", webhook["url"], err, webhookPath)
	}
	webhook["url"] = e.srv.URL + docURL.Path
	auth := mapAt(t, mapAt(t, webhook, "http_config"), "authorization")
	if _, ok := auth["credentials_file"]; !ok {
		t.Fatalf("docs/incidents.md's receiver: got authorization %v, want a credentials_file", auth)
	}
	auth["credentials_file"] = e.credentials
	route := mapAt(t, config, "route")
	route["group_wait"], route["group_interval"], route["repeat_interval"] = "1s", "2s", "3s"
	file, err := yaml.Marshal(config)
	if err != nil {
		t.Fatal(err)
	}
	am := amtest.Start(t, amtest.Options{Config: file})

	startsAt := time.Now().UTC().Truncate(time.Millisecond)
	var alerts []amtest.Alert
	for _, instance := range []string{"db1", "db2", "db3", "db4", "db5"} {
		alerts = append(alerts, amtest.Alert{Labels: map[string]string{"alertname": "DiskFull", "cluster": "prod", "instance": instance},
			StartsAt: startsAt})
	}
	alerts = append(alerts, amtest.Alert{Labels: map[string]string{"alertname": "DiskFull", "cluster": "staging", "instance": "db9"},
		StartsAt: startsAt})
	post(t, alerts, am)
	fps := amFingerprints(t, am, 6)

	prod := e.openIncident(t, "DiskFull (cluster=prod)", 5)
	staging := e.openIncident(t, "DiskFull (cluster=staging)", 1)
	waitDeliveries(t, e.srv, map[string]float64{}, 4) // the two groups' first notifications, and a repeat each
	got := append(inlineFingerprints(e.incident(t, prod.ID)), inlineFingerprints(e.incident(t, staging.ID))...)
	if slices.Sort(got); !slices.Equal(got, fps) {
		t.Errorf("the incidents' alerts: got %v, want every one Alertmanager holds %v", got, fps)
	}
	in := e.integrationNow(t)
	if in.LastDeliveryAt == nil || in.Keys[0].LastUsedAt == nil || in.LastError != "" {
		t.Errorf("integration: got %+v, want deliveries with its key from the credentials file, and no error", in)
	}

	endsAt := time.Now().UTC().Truncate(time.Millisecond)
	for i := range alerts {
		alerts[i].EndsAt = endsAt
	}
	post(t, alerts, am)
	waitFor(t, "both incidents resolved", func() []incident { return e.incidents(t, "status=resolved") },
		func(list []incident) bool { return len(list) == 2 })
	if open := e.incidents(t, ""); len(open) != 0 {
		t.Errorf("GET /api/incidents: got %+v, want none open", open)
	}
	for _, id := range []int64{prod.ID, staging.ID} {
		in := e.incident(t, id)
		if in.ResolutionSource != "alerts" {
			t.Errorf("incident %q: got %+v, want resolved by its alerts", in.Title, in)
		}
		for _, a := range in.Alerts {
			if a.Status != "resolved" || a.ResolutionSource != "alertmanager" {
				t.Errorf("incident %q, alert %s: got %+v, want resolved by alertmanager", in.Title, a.Fingerprint, a)
			}
		}
	}
	assertEveryDeliveryStored(t, []*amtest.Alertmanager{am}, e.srv)
}

// documentedConfig returns the first yaml block of docs/incidents.md's "Connecting
// Alertmanager" section, decoded, and the one webhook_configs entry of the receiver its route
// names.
func documentedConfig(t *testing.T) (config, webhook map[string]any) {
	t.Helper()
	page, err := os.ReadFile(docsPage)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Connecting Alertmanager\n")
	if ok {
		section, _, _ = strings.Cut(section, "\n## ")
	}
	_, block, ok2 := strings.Cut(section, "\n```yaml\n")
	block, _, ok3 := strings.Cut(block, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatalf("%s: no ```yaml block in its section \"Connecting Alertmanager\"", docsPage)
	}
	if err := yaml.Unmarshal([]byte(block), &config); err != nil {
		t.Fatalf("%s: its alertmanager.yml: %v", docsPage, err)
	}
	name := mapAt(t, config, "route")["receiver"]
	receivers, _ := config["receivers"].([]any)
	for _, r := range receivers {
		if r, ok := r.(map[string]any); ok && r["name"] == name {
			webhooks, _ := r["webhook_configs"].([]any)
			if len(webhooks) == 1 {
				if webhook, ok := webhooks[0].(map[string]any); ok {
					return config, webhook
				}
			}
			t.Fatalf("%s: receiver %v: got webhook_configs %v, want one entry", docsPage, name, r["webhook_configs"])
		}
	}
	t.Fatalf("%s: its alertmanager.yml has no receiver %v, the one its route names", docsPage, name)
	return nil, nil
}

// mapAt is m[key] as a YAML mapping, or fails t.
func mapAt(t *testing.T, m map[string]any, key string) map[string]any {
	t.Helper()
	v, ok := m[key].(map[string]any)
	if !ok {
		t.Fatalf("%s: %q is %T, want a mapping", docsPage, key, m[key])
	}
	return v
}
