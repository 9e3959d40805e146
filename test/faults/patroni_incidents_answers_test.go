//go:build patroni

package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
)

// outcomes is terdut_webhook_notifications_total by outcome, from --metrics-listen.
func (s *incidentServer) outcomes(t *testing.T) map[string]float64 {
	out := map[string]float64{}
	for labels, v := range scrape(t, s.metrics, "terdut_webhook_notifications_total") {
		out[strings.TrimSuffix(strings.TrimPrefix(labels, `outcome="`), `"`)] = v
	}
	return out
}

// scrape returns the samples of the metric name at url, by their labels as written.
func scrape(t *testing.T, url, name string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v", url, resp.StatusCode, err)
	}
	out := map[string]float64{}
	for line := range strings.Lines(string(body)) {
		labels, ok := strings.CutPrefix(strings.TrimSpace(line), name+"{")
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(labels, "} ")
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[labels] = v
		}
	}
	return out
}

// checkWebhookAnswers checks that the webhook answered Alertmanager only 2xx or 5xx, by three
// accounts: the server's notifications by outcome, its access log, and Alertmanager's failed
// notifications by reason. 499 is a request Alertmanager gave up on before its answer (no
// answer reached it). It logs the figures.
func checkWebhookAnswers(t *testing.T, srv *incidentServer, am *amtest.Alertmanager) {
	t.Helper()
	outcomes := srv.outcomes(t)
	for _, bad := range []string{"unauthorized", "invalid", "too_large"} {
		if outcomes[bad] > 0 {
			t.Errorf("terdut_webhook_notifications_total{outcome=%q} is %.0f, want 0", bad, outcomes[bad])
		}
	}
	statuses := map[int]int{}
	var slowest float64
	scanner := bufio.NewScanner(strings.NewReader(srv.proc.Log()))
	scanner.Buffer(nil, 1<<20)
	for scanner.Scan() {
		var line struct {
			Msg, Route string
			Status     int
			Took       float64 `json:"duration_ms"`
		}
		if json.Unmarshal(scanner.Bytes(), &line) == nil && line.Msg == "request" && line.Route == "/api/webhooks/alertmanager" {
			statuses[line.Status]++
			slowest = max(slowest, line.Took)
		}
	}
	var codes []int
	for code := range statuses {
		codes = append(codes, code)
		if code/100 == 4 && code != 499 || code/100 != 2 && code/100 != 4 && code/100 != 5 {
			t.Errorf("the webhook answered %d %d times, want only 2xx and 5xx", code, statuses[code])
		}
	}
	sort.Ints(codes)
	var parts []string
	for _, code := range codes {
		parts = append(parts, fmt.Sprintf("%d×%d", code, statuses[code]))
	}
	failed := map[string]float64{}
	for labels, v := range scrape(t, am.URL+"/metrics", "alertmanager_notifications_failed_total") {
		if strings.Contains(labels, `integration="webhook"`) && v > 0 {
			_, reason, _ := strings.Cut(labels, `reason="`)
			failed[strings.TrimSuffix(reason, `"`)] += v
		}
	}
	for _, bad := range []string{"clientError", "authError", "rateLimited"} {
		if failed[bad] > 0 {
			t.Errorf("Alertmanager counts %.0f webhook notifications failed by %s, want none", failed[bad], bad)
		}
	}
	// A 499 is Alertmanager gone before the answer (its timeout), which it sends again: counted
	// canceled, never as the server's error.
	if outcomes["canceled"] != float64(statuses[499]) || outcomes["error"] > 0 {
		t.Errorf("notifications by outcome %v against %d answers 499, want canceled = 499s and no error", outcomes, statuses[499])
	}
	t.Logf("storm: the webhook answered %s (access log; the slowest took %.1f s); notifications by outcome %v; "+
		"Alertmanager's failed notifications by reason %v; 503s: %d",
		strings.Join(parts, " "), slowest/1000, outcomes, failed, statuses[http.StatusServiceUnavailable])
}
