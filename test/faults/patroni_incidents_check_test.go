//go:build patroni

package faults

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/patronitest"
)

// stormAlertJSON and stormIncidentJSON are what the checks read of GET /api/alerts and GET
// /api/incidents (docs/incidents.md).
type stormAlertJSON struct {
	ID               int64
	Fingerprint      string
	Status           string
	Labels           map[string]string
	StartsAt         time.Time  `json:"starts_at"`
	EndsAt           *time.Time `json:"ends_at"`
	IncidentID       *int64     `json:"incident_id"`
	ResolutionSource string     `json:"resolution_source"`
}

type stormIncidentJSON struct {
	ID               int64
	GroupKey         string            `json:"group_key"`
	GroupLabels      map[string]string `json:"group_labels"`
	Status           string
	ResolutionSource string           `json:"resolution_source"`
	Alerts           []stormAlertJSON `json:"alerts"`
	AlertCount       int              `json:"alert_count"`
}

// get decodes the answer to GET path with the admin key into v; false on anything but 200.
func (s *incidentServer) get(key, path string, v any) bool {
	resp, err := s.api().Do(apitest.Request{Method: http.MethodGet, Path: path, Bearer: key})
	return err == nil && resp.Status == http.StatusOK && json.Unmarshal(resp.Body, v) == nil
}

// count is the length of the list GET path answers, -1 when it does not answer 200.
func (s *incidentServer) count(key, path string) int {
	var list []json.RawMessage
	if !s.get(key, path, &list) {
		return -1
	}
	return len(list)
}

// checkStorm checks what the server holds after the storm against Alertmanager's fingerprints
// (with their labels): each alert once, in its group's one incident, resolved as planned, its
// incident in the state docs/incidents.md says, and each timeline event written once.
func checkStorm(t *testing.T, srv *incidentServer, c *patronitest.Cluster, key string, integrationID int64, fingerprints map[string]map[string]string) {
	t.Helper()
	var alerts []stormAlertJSON
	if !srv.get(key, "/api/alerts?limit=1000", &alerts) {
		t.Fatal("GET /api/alerts did not answer 200")
	}
	seen := map[string]int{}
	byGroup := map[string][]stormAlertJSON{}
	for _, a := range alerts {
		if seen[a.Fingerprint]++; seen[a.Fingerprint] == 2 {
			t.Errorf("alert %s is listed more than once", a.Fingerprint)
		}
		labels, ok := fingerprints[a.Fingerprint]
		if !ok {
			t.Errorf("alert %s %v is not one of Alertmanager's", a.Fingerprint, a.Labels)
			continue
		}
		if fmt.Sprint(labels) != fmt.Sprint(a.Labels) {
			t.Errorf("alert %s: got labels %v, want Alertmanager's %v", a.Fingerprint, a.Labels, labels)
		}
		g, i := stormIndex(a.Labels)
		want, source := "firing", ""
		if stormResolved(g, i) {
			want, source = "resolved", "alertmanager"
		}
		if a.Status != want || a.ResolutionSource != source || (a.EndsAt != nil) != (want == "resolved") || a.IncidentID == nil {
			t.Errorf("alert %s %v: got %s (source %q, ends_at %v, incident %v), want %s (source %q) in an incident",
				a.Fingerprint, a.Labels, a.Status, a.ResolutionSource, a.EndsAt, a.IncidentID, want, source)
		}
		byGroup[a.Labels["alertname"]] = append(byGroup[a.Labels["alertname"]], a)
	}
	for fp, labels := range fingerprints {
		if seen[fp] == 0 {
			t.Errorf("Alertmanager's alert %s %v is missing", fp, labels)
		}
	}

	var incidents []stormIncidentJSON
	for _, status := range []string{"triggered", "acknowledged", "resolved"} {
		var list []stormIncidentJSON
		if !srv.get(key, "/api/incidents?limit=1000&status="+status, &list) {
			t.Fatalf("GET /api/incidents?status=%s did not answer 200", status)
		}
		incidents = append(incidents, list...)
	}
	groups := map[string]int{}
	for _, in := range incidents {
		name := in.GroupLabels["alertname"]
		if groups[name]++; groups[name] == 2 {
			t.Errorf("group %s has more than one incident", name)
		}
		g, _ := stormIndex(map[string]string{"alertname": name, "instance": "host-00"})
		want, source := "triggered", ""
		if stormResolved(g, stormPerGroup-1) {
			want, source = "resolved", "alerts"
		}
		if in.Status != want || in.ResolutionSource != source {
			t.Errorf("incident %d of %s: got %s (source %q), want %s (source %q)", in.ID, name, in.Status, in.ResolutionSource, want, source)
		}
		for _, a := range byGroup[name] {
			if a.IncidentID == nil || *a.IncidentID != in.ID {
				t.Errorf("alert %s of %s: got incident %v, want %d", a.Fingerprint, name, a.IncidentID, in.ID)
			}
		}
		checkIncidentDetail(t, srv, key, in.ID, name, byGroup[name])
	}
	if len(groups) != stormGroups || len(alerts) != stormGroups*stormPerGroup || len(fingerprints) != stormGroups*stormPerGroup {
		t.Errorf("got %d alerts in %d groups with incidents, want %d in %d (Alertmanager holds %d)",
			len(alerts), len(groups), stormGroups*stormPerGroup, stormGroups, len(fingerprints))
	}
	checkStormRows(t, c, integrationID)
}

// stormIndex is the group and instance an alert's labels name.
func stormIndex(labels map[string]string) (group, instance int) {
	group, _ = strconv.Atoi(strings.TrimPrefix(labels["alertname"], "FaultsStorm"))
	instance, _ = strconv.Atoi(strings.TrimPrefix(labels["instance"], "host-"))
	return group, instance
}

// checkIncidentDetail checks one incident's occurrences and timeline: each of its group's
// alerts once, and every event once (triggered; alert_added for each alert; alert_resolved for
// each resolved one; resolved if it resolved), however often its notifications were sent.
func checkIncidentDetail(t *testing.T, srv *incidentServer, key string, id int64, name string, alerts []stormAlertJSON) {
	t.Helper()
	var in stormIncidentJSON
	if !srv.get(key, fmt.Sprintf("/api/incidents/%d", id), &in) {
		t.Fatalf("GET /api/incidents/%d did not answer 200", id)
	}
	want := map[string]string{} // fingerprint → status
	wantEvents := map[string]int{"triggered": 1}
	resolved := 0
	for _, a := range alerts {
		want[a.Fingerprint] = a.Status
		wantEvents[fmt.Sprintf("alert_added %d", a.ID)] = 1
		if a.Status == "resolved" {
			wantEvents[fmt.Sprintf("alert_resolved %d", a.ID)] = 1
			resolved++
		}
	}
	if resolved == len(alerts) {
		wantEvents["resolved"] = 1
	}
	got := map[string]string{}
	for _, a := range in.Alerts {
		if _, dup := got[a.Fingerprint]; dup {
			t.Errorf("incident %d of %s holds alert %s twice", id, name, a.Fingerprint)
		}
		got[a.Fingerprint] = a.Status
	}
	if in.AlertCount != stormPerGroup || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("incident %d of %s: got %d alerts %v, want %d %v", id, name, in.AlertCount, got, stormPerGroup, want)
	}
	var events []struct {
		Type    string
		AlertID *int64 `json:"alert_id"`
	}
	if !srv.get(key, fmt.Sprintf("/api/incidents/%d/timeline", id), &events) {
		t.Fatalf("GET /api/incidents/%d/timeline did not answer 200", id)
	}
	gotEvents := map[string]int{}
	for _, e := range events {
		k := e.Type
		if e.AlertID != nil {
			k = fmt.Sprintf("%s %d", e.Type, *e.AlertID)
		}
		gotEvents[k]++
	}
	if fmt.Sprint(gotEvents) != fmt.Sprint(wantEvents) {
		t.Errorf("incident %d of %s: got events %v, want each once: %v", id, name, gotEvents, wantEvents)
	}
}

// checkStormRows counts the integration's rows on the leader itself, under whatever the API
// lists: one alert row per fingerprint, one occurrence per alert, one incident per group.
func checkStormRows(t *testing.T, c *patronitest.Cluster, integrationID int64) {
	t.Helper()
	ctx := t.Context()
	leader := c.Leader(ctx)
	if leader == nil {
		t.Fatal("no leader in GET /cluster")
	}
	conn, err := pgx.Connect(ctx, leader.AppURL())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []struct{ what, sql string }{
		{"alerts", `SELECT count(*), count(DISTINCT fingerprint) FROM alerts WHERE integration_id = $1`},
		{"occurrences", `SELECT count(*), count(DISTINCT o.alert_id) FROM incident_alerts o JOIN alerts a ON a.id = o.alert_id WHERE a.integration_id = $1`},
		{"incidents", `SELECT count(*), count(DISTINCT group_key) FROM incidents WHERE integration_id = $1`},
	} {
		var rows, distinct int
		if err := conn.QueryRow(ctx, q.sql, integrationID).Scan(&rows, &distinct); err != nil {
			t.Fatalf("count %s: %v", q.what, err)
		}
		want := stormGroups * stormPerGroup
		if q.what == "incidents" {
			want = stormGroups
		}
		if rows != want || distinct != want {
			t.Errorf("%s on the leader: got %d rows of %d distinct, want %d of %d", q.what, rows, distinct, want, want)
		}
	}
}
