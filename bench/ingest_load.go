package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// The ingest side's load: Alertmanager's webhook bodies (version 4, as Alertmanager 0.27-0.28
// writes them), sent by a Go loop in the bench's process to 127.0.0.1 only, each request
// bounded in time and each round in time and in count.

// amBody and amAlert are Alertmanager's webhook body and its alerts, field for field.
type (
	amBody  = amtest.WebhookMessage
	amAlert = amtest.WebhookAlert
)

// amGroup is one alert group: its labels, and the labels of each of its alerts.
type amGroup struct {
	labels map[string]string
	alerts []map[string]string
	fps    []string
}

// newGroup makes a group of n alerts named alertname, told apart from others by the group label
// value; each alert has an instance, a job and a severity, as node-exporter's alerts do.
func newGroup(alertname, group string, n int) *amGroup {
	g := &amGroup{labels: map[string]string{"alertname": alertname, "group": group}}
	severities := []string{"warning", "critical", "info"}
	for i := range n {
		l := map[string]string{"alertname": alertname, "group": group, "job": "node",
			"instance": fmt.Sprintf("host-%05d.bench.example:9100", i), "severity": severities[i%len(severities)]}
		g.alerts = append(g.alerts, l)
		g.fps = append(g.fps, fingerprint(l))
	}
	return g
}

// key is the group's groupKey as Alertmanager writes it for a route grouping by its labels.
func (g *amGroup) key() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(g.labels)) {
		parts = append(parts, fmt.Sprintf("%s=%q", k, g.labels[k]))
	}
	return "{}:{" + strings.Join(parts, ", ") + "}"
}

// body is the group's notification: every alert firing since startsAt, or every alert resolved
// a minute after it.
func (g *amGroup) body(startsAt time.Time, resolved bool) ([]byte, error) {
	status := "firing"
	var ends time.Time
	if resolved {
		status, ends = "resolved", startsAt.Add(time.Minute)
	}
	b := amBody{Receiver: "terdut", Status: status, GroupLabels: g.labels, CommonLabels: map[string]string{"job": "node"},
		CommonAnnotations: map[string]string{}, ExternalURL: "http://alertmanager.bench.example:9093",
		Version: "4", GroupKey: g.key(), Alerts: make([]amAlert, len(g.alerts))}
	for i, l := range g.alerts {
		b.Alerts[i] = amAlert{Status: status, Labels: l, StartsAt: startsAt, EndsAt: ends, Fingerprint: g.fps[i],
			Annotations: map[string]string{"summary": l["instance"] + " is out of disk space",
				"description": "Filesystem / on " + l["instance"] + " has less than 5% left and will fill within 4 hours."},
			GeneratorURL: "http://prometheus.bench.example:9090/graph?g0.expr=node_filesystem_avail_bytes&g0.tab=1"}
	}
	return json.Marshal(b)
}

// fingerprint is the labels' 64-bit FNV-1a hash in hexadecimal, as Alertmanager's are.
func fingerprint(labels map[string]string) string {
	h := fnv.New64a()
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		h.Write([]byte(k))
		h.Write([]byte{0xff})
		h.Write([]byte(labels[k]))
		h.Write([]byte{0xff})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// ingestAnswer is what both the server and the floor answer a stored notification.
type ingestAnswer struct {
	Status     string `json:"status"`
	Alerts     int    `json:"alerts"`
	IncidentID int64  `json:"incident_id"`
}

// ingestTimeout bounds one request: a storm's notification takes seconds, not minutes.
const ingestTimeout = 2 * time.Minute

// newIngestClient is the ingest side's HTTP client: keep-alive connections for every client,
// and each request bounded by ingestTimeout.
func newIngestClient() *http.Client {
	return &http.Client{Timeout: ingestTimeout,
		Transport: &http.Transport{MaxIdleConns: 16, MaxIdleConnsPerHost: 16, IdleConnTimeout: time.Minute}}
}

// send POSTs a notification to p's webhook with key, and checks that it was stored whole.
func send(ctx context.Context, hc *http.Client, p *process, key string, body []byte, alerts int) (ingestAnswer, error) {
	var a ingestAnswer
	status, b, err := call(ctx, hc, http.MethodPost, p.URL+"/api/webhooks/alertmanager", key, body)
	if err != nil {
		return a, fmt.Errorf("%s: %w", p.name, err)
	}
	if status != http.StatusOK {
		return a, fmt.Errorf("%s: webhook: got %d %s, want 200", p.name, status, b)
	}
	if err := json.Unmarshal(b, &a); err != nil || a.Status != "stored" || a.Alerts != alerts {
		return a, fmt.Errorf("%s: webhook: got %s, want stored with %d alerts", p.name, b, alerts)
	}
	return a, nil
}

// call sends one request to 127.0.0.1 with a Bearer key and returns the status and the body.
func call(ctx context.Context, hc *http.Client, method, target, key string, body []byte) (int, []byte, error) {
	if u, err := url.Parse(target); err != nil || u.Hostname() != "127.0.0.1" {
		return 0, nil, fmt.Errorf("refusing to send load to %q: 127.0.0.1 only", target)
	}
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}
