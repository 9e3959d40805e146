package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// The statistics' types terdut-tui decodes (internal/api/types.go), field for field.
type tuiAlertStats struct {
	Total    int `json:"total"`
	Firing   int `json:"firing"`
	Resolved int `json:"resolved"`
}

type tuiIncidentStats struct {
	Total        int      `json:"total"`
	Triggered    int      `json:"triggered"`
	Acknowledged int      `json:"acknowledged"`
	Resolved     int      `json:"resolved"`
	MTTASeconds  *float64 `json:"mtta_seconds"`
	MTTRSeconds  *float64 `json:"mttr_seconds"`
}

type tuiTopAlert struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

type tuiHourStat struct {
	Hour  int `json:"hour"`
	Count int `json:"count"`
}

type tuiDayStat struct {
	Day     int    `json:"day"`
	DayName string `json:"day_name"`
	Count   int    `json:"count"`
}

// getStats reads a statistic as a member, decodes it into v and returns the raw body.
func (e incidentEnv) getStats(t *testing.T, path string, v any) []byte {
	t.Helper()
	resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.member.APIKey})
	if resp.Status != http.StatusOK {
		t.Fatalf("%s: got %d %s, want 200", path, resp.Status, resp.Body)
	}
	strictDecode(t, path, resp.Body, v)
	return resp.Body
}

// incidentStats reads /api/stats/incidents, checking that both mean times are present, null
// or a number.
func (e incidentEnv) incidentStats(t *testing.T) tuiIncidentStats {
	t.Helper()
	var s tuiIncidentStats
	body := e.getStats(t, "/api/stats/incidents", &s)
	var raw map[string]json.RawMessage
	strictDecode(t, "incident stats", body, &raw)
	nullRules(t, "incident stats", raw, "mtta_seconds", "mttr_seconds")
	return s
}

func TestStats_ClientContract(t *testing.T) {
	e := newIncidentEnv(t)

	// A quiet server: zeros, no mean times (null, not 0), and [] for the lists.
	var alerts tuiAlertStats
	e.getStats(t, "/api/stats/alerts", &alerts)
	if alerts != (tuiAlertStats{}) {
		t.Fatalf("quiet alert stats: got %+v", alerts)
	}
	if s := e.incidentStats(t); s != (tuiIncidentStats{}) {
		t.Fatalf("quiet incident stats: got %+v, want zeros and null mean times", s)
	}
	for _, path := range []string{"/api/stats/alerts/top", "/api/stats/alerts/top?limit=5", "/api/stats/alerts/by-hour", "/api/stats/alerts/by-day"} {
		var list []map[string]any
		if body := e.getStats(t, path, &list); strings.TrimSpace(string(body)) != "[]" {
			t.Fatalf("%s on a quiet server: got %s, want []", path, body)
		}
	}

	// Tuesday 10:00 UTC: two DiskFull and one CPU, in two incidents; one acknowledged.
	t0 := time.Date(2026, 12, 1, 10, 30, 0, 0, time.UTC)
	e.deliver(t, notification(`{}:{alertname="DiskFull"}`, "firing",
		amAlert("d1", "firing", t0, map[string]string{"alertname": "DiskFull", "instance": "db1"}),
		amAlert("d2", "firing", t0, map[string]string{"alertname": "DiskFull", "instance": "db2"})))
	cpu := notification(`{}:{alertname="CPU"}`, "firing", amAlert("c1", "firing", t0.Add(-3*time.Hour), map[string]string{"alertname": "CPU"}))
	e.deliver(t, cpu)
	var queue []tuiIncident
	strictDecode(t, "queue", e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/incidents", Bearer: e.member.APIKey}).Body, &queue)
	if len(queue) != 2 {
		t.Fatalf("queue: got %d incidents, want 2", len(queue))
	}
	act := func(method, path string) {
		t.Helper()
		resp := e.srv.MustDo(t, apitest.Request{Method: method, Path: path, Bearer: e.member.APIKey})
		if resp.Status >= 300 {
			t.Fatalf("%s %s: got %d %s", method, path, resp.Status, resp.Body)
		}
	}
	act(http.MethodPost, fmt.Sprintf("/api/incidents/%d/acknowledge", queue[0].ID))
	act(http.MethodDelete, fmt.Sprintf("/api/incidents/%d/acknowledge", queue[0].ID))
	s := e.incidentStats(t)
	if s.Total != 2 || s.Triggered != 2 || s.MTTASeconds == nil || *s.MTTASeconds < 0 || s.MTTRSeconds != nil {
		t.Fatalf("after an acknowledgement undone: got %+v, want a mean time to acknowledge and none to resolve", s)
	}
	act(http.MethodPost, fmt.Sprintf("/api/incidents/%d/resolve", queue[1].ID))
	if s := e.incidentStats(t); s.Resolved != 1 || s.Triggered != 1 || s.MTTRSeconds == nil || *s.MTTRSeconds < 0 {
		t.Fatalf("after a resolution: got %+v", s)
	}
	e.getStats(t, "/api/stats/alerts", &alerts)
	if alerts != (tuiAlertStats{Total: 3, Firing: 3}) {
		t.Fatalf("alert stats: got %+v, want 3 firing", alerts)
	}

	var top []tuiTopAlert
	e.getStats(t, "/api/stats/alerts/top", &top)
	if fmt.Sprint(top) != "[{DiskFull 2} {CPU 1}]" {
		t.Fatalf("top: got %v", top)
	}
	e.getStats(t, "/api/stats/alerts/top?limit=1", &top)
	if fmt.Sprint(top) != "[{DiskFull 2}]" {
		t.Fatalf("top, limit=1: got %v", top)
	}
	var hours []tuiHourStat
	e.getStats(t, "/api/stats/alerts/by-hour", &hours)
	if fmt.Sprint(hours) != "[{7 1} {10 2}]" {
		t.Fatalf("by hour: got %v, want 7h once and 10h twice (UTC)", hours)
	}
	var days []tuiDayStat
	e.getStats(t, "/api/stats/alerts/by-day", &days)
	if len(days) != 1 || days[0] != (tuiDayStat{Day: 2, DayName: "Tuesday", Count: 3}) {
		t.Fatalf("by day: got %+v, want Tuesday (2) three times", days)
	}

	// A limit out of range or not a number is refused with {"error", "code"}.
	for _, q := range []string{"0", "-1", "101", "x", "1.5", "", "10abc"} {
		resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/stats/alerts/top?limit=" + q, Bearer: e.member.APIKey})
		var body struct{ Error, Code string }
		if resp.Status != http.StatusBadRequest || json.Unmarshal(resp.Body, &body) != nil || body.Error == "" || body.Code == "" {
			t.Errorf("limit=%q: got %d %s, want 400 with error and code", q, resp.Status, resp.Body)
		}
	}
	// Signed in only.
	for _, path := range []string{"/api/stats/alerts", "/api/stats/incidents", "/api/stats/alerts/top", "/api/stats/alerts/by-hour", "/api/stats/alerts/by-day"} {
		if resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path}); resp.Status != http.StatusUnauthorized {
			t.Errorf("%s without a key: got %d, want 401", path, resp.Status)
		}
	}
}

// TestStats_DayNames: every ISO weekday is answered with its English name, Monday first.
func TestStats_DayNames(t *testing.T) {
	e := newIncidentEnv(t)
	monday := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var alerts []map[string]any
	for d := range 7 {
		for range d + 1 {
			alerts = append(alerts, amAlert(fmt.Sprintf("f%d-%d", d, len(alerts)), "firing", monday.AddDate(0, 0, d),
				map[string]string{"alertname": "Week", "n": fmt.Sprint(len(alerts))}))
		}
	}
	e.deliver(t, notification(`{}:{alertname="Week"}`, "firing", alerts...))
	var days []tuiDayStat
	e.getStats(t, "/api/stats/alerts/by-day", &days)
	names := []string{"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"}
	if len(days) != 7 {
		t.Fatalf("by day: got %+v, want seven days", days)
	}
	for i, d := range days {
		if len(d.DayName) < 3 { // terdut-tui shows d.DayName[:3]
			t.Fatalf("day %d: day_name %q is shorter than 3 characters", d.Day, d.DayName)
		}
		if d != (tuiDayStat{Day: i + 1, DayName: names[i], Count: i + 1}) {
			t.Errorf("day %d: got %+v, want %d %s counted %d times", i+1, d, i+1, names[i], i+1)
		}
	}
}
