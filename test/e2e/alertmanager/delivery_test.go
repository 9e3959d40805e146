package alertmanager

// What passes between Alertmanager and the server: alerts posted to Alertmanager as Prometheus
// posts them, and the notifications the server counts.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// deliveries is terdut_webhook_notifications_total of server srv (its own registry), by outcome.
func deliveries(t *testing.T, srv *apitest.Server) map[string]float64 {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /metrics: got %d, want 200", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(string(resp.Body)))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `terdut_webhook_notifications_total{outcome="`)
		if !ok {
			continue
		}
		outcome, value, ok := strings.Cut(rest, `"} `)
		v, err := strconv.ParseFloat(value, 64)
		if !ok || err != nil {
			t.Fatalf("GET /metrics: cannot read %q", sc.Text())
		}
		out[outcome] = v
	}
	return out
}

// waitDeliveries waits until server srv has stored n more notifications than it had stored
// when from was read, and returns the count.
func waitDeliveries(t *testing.T, srv *apitest.Server, from map[string]float64, n int) map[string]float64 {
	t.Helper()
	return waitFor(t, fmt.Sprintf("%d more stored notifications than %v", n, from["stored"]),
		func() map[string]float64 { return deliveries(t, srv) },
		func(d map[string]float64) bool { return d["stored"] >= from["stored"]+float64(n) })
}

// assertEveryDeliveryStored checks that every notification the servers took was stored (no
// 401, 400, 413 or 503) and that Alertmanager logged no refused one.
func assertEveryDeliveryStored(t *testing.T, ams []*amtest.Alertmanager, servers ...*apitest.Server) {
	t.Helper()
	for _, srv := range servers {
		for outcome, n := range deliveries(t, srv) {
			if outcome != "stored" && n != 0 {
				t.Errorf("%s: %v notifications ended %q, want every one stored", srv.URL, n, outcome)
			}
		}
	}
	for _, am := range ams {
		if log := am.Log(); strings.Contains(log, "unexpected status code") {
			t.Errorf("%s: Alertmanager saw a refused notification:\n%s", am.URL, grep(log, "unexpected status code"))
		}
	}
}

// post posts alerts to each Alertmanager at once, as Prometheus posts each alert to every one.
func post(t *testing.T, alerts []amtest.Alert, ams ...*amtest.Alertmanager) {
	t.Helper()
	errs := make([]error, len(ams))
	var wg sync.WaitGroup
	for i, am := range ams {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), waitBound)
			defer cancel()
			errs[i] = am.PostAlerts(ctx, alerts)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// amAlerts waits until am holds n alerts (GET /api/v2/alerts) and returns them.
func amAlerts(t *testing.T, am *amtest.Alertmanager, n int) []amtest.AlertStatus {
	t.Helper()
	return waitFor(t, fmt.Sprintf("%d alerts in %s", n, am.URL), func() []amtest.AlertStatus {
		ctx, cancel := context.WithTimeout(context.Background(), waitBound)
		defer cancel()
		alerts, err := am.Alerts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return alerts
	}, func(as []amtest.AlertStatus) bool { return len(as) == n })
}

// fingerprints waits until am holds n alerts and returns their fingerprints (Alertmanager's,
// to compare with what the server stored) by the value of their label key.
func fingerprints(t *testing.T, am *amtest.Alertmanager, n int, key string) map[string]string {
	t.Helper()
	alerts := amAlerts(t, am, n)
	out := map[string]string{}
	for _, a := range alerts {
		out[a.Labels[key]] = a.Fingerprint
	}
	if len(out) != n {
		t.Fatalf("%s: %d alerts with %d values of %s: %+v", am.URL, n, len(out), key, alerts)
	}
	return out
}

// grep is the lines of s that contain sub.
func grep(s, sub string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}
