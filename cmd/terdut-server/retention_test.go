package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// lockedBuffer is a log both jobs write at once.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// counter reads one series of a counter vector registered in reg.
func counter(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if m.GetLabel()[0].GetValue() == label {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no %s{%s} in the registry", name, label)
	return 0
}

// TestRetention_Job: two replicas' jobs at once, with small batches, delete every old resolved
// incident and its alerts, neither failing and neither counting what the other deleted; a
// replica whose database fails counts failed rounds and tries again on its retry schedule;
// --retention 0 starts nothing.
func TestRetention_Job(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustEmptyDatabase(t)
	if _, err := store.Migrate(ctx, url); err != nil {
		t.Fatal(err)
	}
	a, b := apitest.OpenStore(t, url), apitest.OpenStore(t, url)
	_, secret, err := a.CreateIntegration(ctx, store.NewIntegration{Name: "prod"})
	if err != nil {
		t.Fatal(err)
	}
	caller, err := a.AuthenticateIntegration(ctx, secret)
	if err != nil {
		t.Fatal(err)
	}
	const old = 30
	for i := range old + 1 {
		alert := store.NotifiedAlert{Fingerprint: fmt.Sprintf("f%d", i), Status: store.AlertFiring,
			Labels: map[string]string{"alertname": "Old"}, StartsAt: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
		n := store.Notification{GroupKey: fmt.Sprintf("g%d", i), Alerts: []store.NotifiedAlert{alert}}
		if _, err := a.Ingest(ctx, caller, n); err != nil {
			t.Fatal(err)
		}
		n.Alerts[0].Status, n.Alerts[0].EndsAt = store.AlertResolved, alert.StartsAt.Add(time.Hour)
		if _, err := a.Ingest(ctx, caller, n); err != nil {
			t.Fatal(err)
		}
	}
	// All but the last resolved 500 days ago, and their alerts reported then.
	mustQuery(t, url, `WITH i AS (UPDATE incidents SET triggered_at = triggered_at - interval '500 days',
			resolved_at = resolved_at - interval '500 days' WHERE group_key <> 'g30' RETURNING id)
		UPDATE alerts SET received_at = received_at - interval '500 days' WHERE incident_id IN (SELECT id FROM i)`)

	var logs lockedBuffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	regA, regB := prometheus.NewRegistry(), prometheus.NewRegistry()
	fast := retentionSchedule{interval: 20 * time.Millisecond, retry: 10 * time.Millisecond, batch: 3}
	stopA := startRetention(ctx, a, 400*24*time.Hour, fast, regA, log)
	stopB := startRetention(ctx, b, 400*24*time.Hour, fast, regB, log)
	deadline := time.Now().Add(time.Minute)
	for {
		got := mustQuery(t, url, `SELECT (SELECT count(*) FROM incidents), (SELECT count(*) FROM alerts)`)
		if len(got) == 1 && got[0] == "1 1" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("incidents and alerts left: got %v, want 1 1\n%s", got, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopA()
	stopB()
	for kind, want := range map[string]float64{"incidents": old, "occurrences": old, "alerts": old} {
		if got := counter(t, regA, "terdut_retention_deleted_total", kind) + counter(t, regB, "terdut_retention_deleted_total", kind); got != want {
			t.Errorf("deleted %s, both replicas: got %v, want %v", kind, got, want)
		}
	}
	if got := counter(t, regA, "terdut_retention_rounds_total", "error") + counter(t, regB, "terdut_retention_rounds_total", "error"); got != 0 {
		t.Errorf("failed rounds: got %v, want 0\n%s", got, logs.String())
	}
	if got := counter(t, regA, "terdut_retention_rounds_total", "ok"); got == 0 {
		t.Errorf("rounds of replica a: got none")
	}

	// A replica whose database is gone: every round fails, is counted, and is tried again.
	gone := apitest.OpenStore(t, url)
	gone.Close()
	regC := prometheus.NewRegistry()
	stopC := startRetention(ctx, gone, 400*24*time.Hour, retentionSchedule{interval: time.Hour, retry: 10 * time.Millisecond, batch: 3}, regC, log)
	deadline = time.Now().Add(time.Minute)
	for counter(t, regC, "terdut_retention_rounds_total", "error") < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("failed rounds tried again: got %v, want 3\n%s", counter(t, regC, "terdut_retention_rounds_total", "error"), logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stopC()

	regD := prometheus.NewRegistry()
	startRetention(ctx, a, 0, fast, regD, log)()
	if ok, failed := counter(t, regD, "terdut_retention_rounds_total", "ok"), counter(t, regD, "terdut_retention_rounds_total", "error"); ok+failed != 0 {
		t.Errorf("--retention 0: got %v rounds and %v failed, want none (and the series served at 0)", ok, failed)
	}
}
