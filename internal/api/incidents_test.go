package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// The types terdut-tui decodes (github.com/yeniklas/terdut-tui, internal/api/types.go), field
// for field: the answers must decode into them, and the raw JSON must follow the contract's
// omitted-versus-null rules, which these structs cannot show.
type tuiAlert struct {
	ID               int64             `json:"id"`
	Fingerprint      string            `json:"fingerprint"`
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	Labels           map[string]string `json:"labels"`
	Annotations      map[string]string `json:"annotations"`
	StartsAt         time.Time         `json:"starts_at"`
	EndsAt           *time.Time        `json:"ends_at"`
	GeneratorURL     string            `json:"generator_url"`
	ReceivedAt       time.Time         `json:"received_at"`
	ArchivedAt       *time.Time        `json:"archived_at,omitempty"`
	IncidentID       *int64            `json:"incident_id,omitempty"`
	ResolutionSource *string           `json:"resolution_source,omitempty"`
}

type tuiIncident struct {
	ID               int64             `json:"id"`
	GroupKey         string            `json:"group_key"`
	Title            string            `json:"title"`
	GroupLabels      map[string]string `json:"group_labels"`
	Status           string            `json:"status"`
	Severity         string            `json:"severity,omitempty"`
	TriggeredAt      time.Time         `json:"triggered_at"`
	AcknowledgedByID *int64            `json:"acknowledged_by_id,omitempty"`
	AcknowledgedBy   string            `json:"acknowledged_by,omitempty"`
	AcknowledgedAt   *time.Time        `json:"acknowledged_at,omitempty"`
	AssignedToID     *int64            `json:"assigned_to_id,omitempty"`
	AssignedTo       string            `json:"assigned_to,omitempty"`
	SnoozedUntil     *time.Time        `json:"snoozed_until,omitempty"`
	ResolvedAt       *time.Time        `json:"resolved_at,omitempty"`
	ResolutionSource *string           `json:"resolution_source,omitempty"`
	ArchivedAt       *time.Time        `json:"archived_at,omitempty"`
	Alerts           []tuiAlert        `json:"alerts,omitempty"`
}

type tuiEvent struct {
	ID         int64     `json:"id"`
	IncidentID int64     `json:"incident_id"`
	Type       string    `json:"type"`
	UserID     *int64    `json:"user_id,omitempty"`
	Username   string    `json:"username,omitempty"`
	AlertID    *int64    `json:"alert_id,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

// strictDecode decodes body into v refusing fields v does not have except those allowed, and
// returns the raw object(s) for the null rules.
func strictDecode(t *testing.T, what string, body []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("%s: %v in %s", what, err, body)
	}
}

// nullRules checks one JSON object: the fields in present are there (null allowed only for
// nullable ones), none is null otherwise.
func nullRules(t *testing.T, what string, obj map[string]json.RawMessage, nullable ...string) {
	t.Helper()
	for k, v := range obj {
		if string(v) == "null" && !contains(nullable, k) {
			t.Errorf("%s: %s is null; optional fields are omitted, never null", what, k)
		}
	}
	for _, k := range nullable {
		if _, ok := obj[k]; !ok {
			t.Errorf("%s: %s is missing; it is present, null when it has no value", what, k)
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// notification is Alertmanager's webhook body (version 4), with the fields v0.35 adds.
func notification(groupKey, status string, alerts ...map[string]any) map[string]any {
	return map[string]any{"version": "4", "groupKey": groupKey, "truncatedAlerts": 0, "status": status,
		"receiver": "terdut", "groupLabels": map[string]string{"alertname": "DiskFull"},
		"commonLabels": map[string]string{"alertname": "DiskFull"}, "commonAnnotations": map[string]string{},
		"externalURL": "http://alertmanager.test", "notification_reason": "first notification", "routeLabels": map[string]string{},
		"alerts": alerts}
}

func amAlert(fingerprint, status string, startsAt time.Time, labels map[string]string) map[string]any {
	ends := "0001-01-01T00:00:00Z"
	if status == "resolved" {
		ends = startsAt.Add(time.Minute).Format(time.RFC3339)
	}
	return map[string]any{"status": status, "labels": labels, "annotations": map[string]string{"summary": "disk is full"},
		"startsAt": startsAt.Format(time.RFC3339), "endsAt": ends, "generatorURL": "http://prometheus.test/graph",
		"fingerprint": fingerprint}
}

// incidentEnv is a claimed server with an integration, an admin's key and a member's.
type incidentEnv struct {
	srv          *apitest.Server
	admin        string
	member       apitest.Person
	integration  string
	integrationI int64
}

func newIncidentEnv(t *testing.T) incidentEnv {
	t.Helper()
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), nil)
	e := incidentEnv{srv: srv, admin: srv.MustClaim(t)}
	e.member = apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/integrations", Bearer: e.admin,
		Body: map[string]string{"name": "prod", "expire_after": "5h"}})
	var created struct {
		ID          int64
		ExpireAfter string `json:"expire_after"`
		Keys        []struct {
			Key  string
			Hint string
		}
	}
	if resp.Status != http.StatusCreated {
		t.Fatalf("create integration: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &created)
	if len(created.Keys) != 1 || !strings.HasPrefix(created.Keys[0].Key, store.IntegrationKeyPrefix) || created.ExpireAfter != "5h0m0s" {
		t.Fatalf("create integration: got %s", resp.Body)
	}
	e.integration, e.integrationI = created.Keys[0].Key, created.ID
	return e
}

func (e incidentEnv) deliver(t *testing.T, body any) apitest.Response {
	t.Helper()
	return e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/webhooks/alertmanager", Bearer: e.integration, Body: body})
}

func TestIncidents_ClientContract(t *testing.T) {
	e := newIncidentEnv(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	disk := map[string]string{"alertname": "DiskFull", "instance": "db1", "severity": "critical"}
	resp := e.deliver(t, notification(`{}:{alertname="DiskFull"}`, "firing", amAlert("a1", "firing", t0, disk),
		amAlert("a2", "firing", t0, map[string]string{"alertname": "DiskFull", "instance": "db2"})))
	if resp.Status != http.StatusOK {
		t.Fatalf("deliver: %d %s", resp.Status, resp.Body)
	}

	// The queue.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/incidents", Bearer: e.member.APIKey})
	var queue []tuiIncident
	strictDecode(t, "queue", resp.Body, &queue)
	if resp.Status != http.StatusOK || len(queue) != 1 || queue[0].Title != "DiskFull" || queue[0].Severity != "critical" ||
		queue[0].Status != "triggered" || queue[0].Alerts != nil {
		t.Fatalf("queue: %d %s", resp.Status, resp.Body)
	}
	var raw []map[string]json.RawMessage
	strictDecode(t, "queue", resp.Body, &raw)
	nullRules(t, "queue's incident", raw[0])
	for _, absent := range []string{"acknowledged_by_id", "assigned_to", "resolved_at", "resolution_source", "archived_at", "alerts"} {
		if _, ok := raw[0][absent]; ok {
			t.Errorf("queue's incident: %s is present on an open, unworked incident", absent)
		}
	}
	id := queue[0].ID

	// One incident, its alerts inline; the feed.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/incidents/%d", id), Bearer: e.member.APIKey})
	var one tuiIncident
	strictDecode(t, "incident", resp.Body, &one)
	var oneRaw map[string]json.RawMessage
	strictDecode(t, "incident", resp.Body, &oneRaw)
	if len(one.Alerts) != 2 || string(oneRaw["alert_count"]) != "2" || one.Alerts[0].EndsAt != nil || one.Alerts[0].ResolutionSource != nil {
		t.Fatalf("incident: %s", resp.Body)
	}
	var inline []map[string]json.RawMessage
	strictDecode(t, "alerts", oneRaw["alerts"], &inline)
	nullRules(t, "an inline firing alert", inline[0], "ends_at")

	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/alerts?limit=500", Bearer: e.member.APIKey})
	var feed []tuiAlert
	strictDecode(t, "feed", resp.Body, &feed)
	if len(feed) != 2 || feed[0].IncidentID == nil || *feed[0].IncidentID != id || feed[0].ArchivedAt != nil {
		t.Fatalf("feed: %s", resp.Body)
	}
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/alerts/%d", feed[0].ID), Bearer: e.member.APIKey})
	var alert tuiAlert
	strictDecode(t, "alert", resp.Body, &alert)
	if alert.Fingerprint != feed[0].Fingerprint || alert.Labels["alertname"] != "DiskFull" {
		t.Fatalf("alert: %s", resp.Body)
	}

	// The actions, each answering JSON (POST) or 204 (DELETE).
	act := func(method, path string, body any, want int) apitest.Response {
		t.Helper()
		resp := e.srv.MustDo(t, apitest.Request{Method: method, Path: fmt.Sprintf("/api/incidents/%d%s", id, path),
			Bearer: e.member.APIKey, Body: body})
		if resp.Status != want {
			t.Fatalf("%s %s: got %d %s, want %d", method, path, resp.Status, resp.Body, want)
		}
		if want == http.StatusNoContent && len(bytes.TrimSpace(resp.Body)) != 0 {
			t.Fatalf("%s %s: a body %q with 204", method, path, resp.Body)
		}
		return resp
	}
	var acked tuiIncident
	strictDecode(t, "acknowledge", act(http.MethodPost, "/acknowledge", nil, http.StatusOK).Body, &acked)
	if acked.Status != "acknowledged" || acked.AcknowledgedBy != "alice" || acked.AcknowledgedByID == nil {
		t.Fatalf("acknowledged: %+v", acked)
	}
	act(http.MethodDelete, "/acknowledge", nil, http.StatusNoContent)
	var assigned tuiIncident
	strictDecode(t, "assign", act(http.MethodPost, "/assign", map[string]int64{"user_id": e.member.User.ID}, http.StatusOK).Body, &assigned)
	if assigned.AssignedTo != "alice" {
		t.Fatalf("assigned: %+v", assigned)
	}
	act(http.MethodPost, "/assign", map[string]int64{"user_id": 987654}, http.StatusBadRequest)
	for _, d := range []string{"0s", "-1h", "169h", "soon", ""} {
		act(http.MethodPost, "/snooze", map[string]string{"duration": d}, http.StatusBadRequest)
	}
	act(http.MethodPost, "/snooze", map[string]string{"duration": "2h"}, http.StatusOK)
	act(http.MethodDelete, "/snooze", nil, http.StatusNoContent)
	var note tuiEvent
	strictDecode(t, "note", act(http.MethodPost, "/notes", map[string]string{"content": "  on it  "}, http.StatusCreated).Body, &note)
	if note.Type != "note" || note.Detail != "on it" || note.Username != "alice" {
		t.Fatalf("note: %+v", note)
	}
	act(http.MethodPost, "/notes", map[string]string{"content": "   "}, http.StatusBadRequest)
	act(http.MethodPost, "/notes", map[string]string{"content": strings.Repeat("é", 4001)}, http.StatusBadRequest)
	act(http.MethodPost, "/archive", nil, http.StatusConflict)
	var done tuiIncident
	strictDecode(t, "resolve", act(http.MethodPost, "/resolve", nil, http.StatusOK).Body, &done)
	if done.Status != "resolved" || done.ResolutionSource == nil || *done.ResolutionSource != "manual" {
		t.Fatalf("resolved: %+v", done)
	}
	resp = act(http.MethodPost, "/resolve", nil, http.StatusConflict)
	if !strings.Contains(string(resp.Body), "incident is resolved") {
		t.Fatalf("resolve again: %s", resp.Body)
	}
	act(http.MethodPost, "/acknowledge", nil, http.StatusConflict)
	act(http.MethodPost, "/archive", nil, http.StatusOK)

	// The archive tab, and the timeline.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/incidents?status=resolved&archived=true", Bearer: e.member.APIKey})
	strictDecode(t, "archive", resp.Body, &queue)
	if len(queue) != 1 || queue[0].ArchivedAt == nil {
		t.Fatalf("archive tab: %s", resp.Body)
	}
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: fmt.Sprintf("/api/incidents/%d/timeline", id), Bearer: e.member.APIKey})
	var timeline []tuiEvent
	strictDecode(t, "timeline", resp.Body, &timeline)
	var types []string
	for _, ev := range timeline {
		types = append(types, ev.Type)
	}
	want := "[triggered alert_added alert_added acknowledged unacknowledged assigned snoozed unsnoozed note resolved]"
	if fmt.Sprint(types) != want {
		t.Fatalf("timeline: got %v, want %s", types, want)
	}
	var timelineRaw []map[string]json.RawMessage
	strictDecode(t, "timeline", resp.Body, &timelineRaw)
	for _, ev := range timelineRaw {
		nullRules(t, "timeline event", ev)
	}
	act(http.MethodDelete, fmt.Sprintf("/notes/%d", timeline[0].ID), nil, http.StatusConflict)
	act(http.MethodDelete, fmt.Sprintf("/notes/%d", note.ID), nil, http.StatusNoContent)

	// Empty lists are [], and every error is {"error", "code"}.
	for _, path := range []string{"/api/incidents?snoozed=true", "/api/alerts?archived=true&status=firing"} {
		resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.member.APIKey})
		if resp.Status != http.StatusOK || strings.TrimSpace(string(resp.Body)) != "[]" {
			t.Errorf("%s: got %d %s, want []", path, resp.Status, resp.Body)
		}
	}
	for _, path := range []string{"/api/incidents?status=open", "/api/incidents?limit=0", "/api/incidents?limit=x",
		"/api/incidents?archived=yes", "/api/alerts?status=triggered", "/api/incidents/0", "/api/incidents/987654",
		"/api/alerts/987654"} {
		resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.member.APIKey})
		var body struct{ Error, Code string }
		if resp.Status < 400 || json.Unmarshal(resp.Body, &body) != nil || body.Error == "" || body.Code == "" {
			t.Errorf("%s: got %d %s, want an error with error and code", path, resp.Status, resp.Body)
		}
	}
	// A limit past 1,000 is clamped, not refused.
	if resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/incidents?limit=5000", Bearer: e.member.APIKey}); resp.Status != http.StatusOK {
		t.Errorf("limit=5000: got %d", resp.Status)
	}
	// The roster, for a member: whom to assign, nothing of anyone's role.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.member.APIKey})
	var roster []map[string]json.RawMessage
	strictDecode(t, "roster", resp.Body, &roster)
	if resp.Status != http.StatusOK || len(roster) != 2 {
		t.Fatalf("roster: %d %s", resp.Status, resp.Body)
	}
	for _, p := range roster {
		if len(p) != 4 || p["id"] == nil || p["username"] == nil || p["email"] == nil || p["created_at"] == nil {
			t.Fatalf("a roster entry: %v, want id, username, email and created_at alone", p)
		}
	}
}

// TestWebhook_Refusals: what Alertmanager must not send again is refused with a 4xx and an
// {"error"}, and leaves nothing stored; only an integration's key opens the route.
func TestWebhook_Refusals(t *testing.T) {
	e := newIncidentEnv(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	good := notification("g", "firing", amAlert("f1", "firing", t0, map[string]string{"alertname": "X"}))
	// A body cut off mid-stream: the sender promises more bytes than it sends and goes away.
	cutOff(t, e.srv.URL, e.integration, mustJSON(t, good))
	for _, tc := range []struct {
		what   string
		bearer string
		body   any
		header http.Header
		status int
	}{
		{"no key", "", good, nil, http.StatusUnauthorized},
		{"a person's API key", e.member.APIKey, good, nil, http.StatusUnauthorized},
		{"a wrong integration key", store.IntegrationKeyPrefix + strings.Repeat("0", 64), good, nil, http.StatusUnauthorized},
		{"not JSON", e.integration, "{", nil, http.StatusBadRequest},
		{"cut off mid-stream", e.integration, mustJSON(t, good)[:40], nil, http.StatusBadRequest},
		{"invalid UTF-8", e.integration, append([]byte(`{"version":"4","groupKey":"`), 0xff, '"', '}'), nil, http.StatusBadRequest},
		{"another version", e.integration, withField(good, "version", "3"), nil, http.StatusBadRequest},
		{"a custom payload", e.integration, map[string]any{"text": "DiskFull is firing"}, nil, http.StatusBadRequest},
		{"no groupKey", e.integration, withField(good, "groupKey", ""), nil, http.StatusBadRequest},
		{"a bad status", e.integration, notification("g", "firing", amAlert("f1", "burning", t0, nil)), nil, http.StatusBadRequest},
		{"no fingerprint", e.integration, notification("g", "firing", amAlert("", "firing", t0, nil)), nil, http.StatusBadRequest},
		{"too many labels", e.integration, notification("g", "firing", amAlert("f1", "firing", t0, manyLabels(300))), nil, http.StatusBadRequest},
		{"too large", e.integration, notification("g", "firing", amAlert("f1", "firing", t0,
			map[string]string{"alertname": "X", "blob": strings.Repeat("x", 33<<20)})), nil, http.StatusRequestEntityTooLarge},
	} {
		resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/webhooks/alertmanager", Bearer: tc.bearer, Body: tc.body, Header: tc.header})
		var body struct{ Error, Code string }
		if resp.Status != tc.status || json.Unmarshal(resp.Body, &body) != nil || body.Error == "" {
			t.Errorf("%s: got %d %s, want %d with an error", tc.what, resp.Status, resp.Body, tc.status)
		}
	}
	var alerts, incidents int
	if err := e.srv.Store.Pool().QueryRow(t.Context(), `SELECT (SELECT count(*) FROM alerts), (SELECT count(*) FROM incidents)`).
		Scan(&alerts, &incidents); err != nil || alerts != 0 || incidents != 0 {
		t.Fatalf("after the refusals: %d alerts and %d incidents stored (%v), want none", alerts, incidents, err)
	}
	// The last refusal is on the integration, for "is Alertmanager sending?".
	resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/integrations", Bearer: e.admin})
	if !strings.Contains(string(resp.Body), `"last_error":"413 `) || strings.Contains(string(resp.Body), e.integration) {
		t.Fatalf("integrations: %s", resp.Body)
	}
	// Values past their bound are cut, and the alert kept.
	long := map[string]string{"alertname": "X", "note": strings.Repeat("ü", 5000)}
	if resp := e.deliver(t, notification("g", "firing", amAlert("f2", "firing", t0, long))); resp.Status != http.StatusOK {
		t.Fatalf("a long label value: %d %s", resp.Status, resp.Body)
	}
	var stored string
	if err := e.srv.Store.Pool().QueryRow(t.Context(), `SELECT labels->>'note' FROM alerts WHERE fingerprint = 'f2'`).Scan(&stored); err != nil ||
		len(stored) > 4<<10 || !strings.HasSuffix(stored, "…") {
		t.Fatalf("the long value stored: %d bytes, %v", len(stored), err)
	}
	// A member may not manage integrations.
	if resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/integrations", Bearer: e.member.APIKey}); resp.Status != http.StatusForbidden {
		t.Fatalf("a member lists integrations: %d", resp.Status)
	}
}

// cutOff sends the webhook a request whose Content-Length promises all of body and whose
// connection ends after half of it, and waits for the server to answer or close.
func cutOff(t *testing.T, base, key string, body []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /api/webhooks/alertmanager HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n", key, len(body))
	if _, err := conn.Write(body[:len(body)/2]); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
	answer, _ := io.ReadAll(conn)
	if len(answer) > 0 && !strings.HasPrefix(string(answer), "HTTP/1.1 400") {
		t.Fatalf("a body cut off mid-stream: got %q, want 400 or no answer", answer)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func withField(m map[string]any, k string, v any) map[string]any {
	out := map[string]any{}
	for key, val := range m {
		out[key] = val
	}
	out[k] = v
	return out
}

func manyLabels(n int) map[string]string {
	m := map[string]string{"alertname": "X"}
	for i := range n {
		m[fmt.Sprintf("l%d", i)] = "v"
	}
	return m
}

// TestWebhook_SenderGoneIsCanceled holds the alerts table locked, so that a delivery waits on
// the database, and has its sender go away meanwhile (Alertmanager's timeout): the delivery is
// counted canceled, not as the server's error, and nothing is stored.
func TestWebhook_SenderGoneIsCanceled(t *testing.T) {
	e := newIncidentEnv(t)
	ctx := t.Context()
	lock, err := e.srv.Store.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Rollback(context.Background()) //nolint:errcheck // the lock ends with the test
	if _, err := lock.Exec(ctx, `LOCK TABLE alerts IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	body := mustJSON(t, notification("g", "firing", amAlert("f1", "firing", t0, map[string]string{"alertname": "X"})))
	sendCtx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sendCtx, http.MethodPost, e.srv.URL+"/api/webhooks/alertmanager", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+e.integration)
	sent := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("answered %d while the alerts table was locked", resp.StatusCode)
		}
		sent <- err
	}()
	waitFor(t, "the delivery to wait on the lock", func() bool {
		var waiting int
		err := e.srv.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_locks l
			WHERE NOT l.granted AND l.relation = 'alerts'::regclass`).Scan(&waiting)
		return err == nil && waiting > 0
	})
	cancel()
	if err := <-sent; !errors.Is(err, context.Canceled) {
		t.Fatalf("the sender: %v, want its own cancellation", err)
	}
	waitFor(t, "the delivery to be counted", func() bool {
		return metric(t, e.srv, `terdut_webhook_notifications_total{outcome="canceled"}`) == 1
	})
	if n := metric(t, e.srv, `terdut_webhook_notifications_total{outcome="error"}`); n != 0 {
		t.Errorf(`outcome="error": %v, want 0`, n)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	var alerts int
	if err := e.srv.Store.Pool().QueryRow(ctx, `SELECT count(*) FROM alerts`).Scan(&alerts); err != nil || alerts != 0 {
		t.Fatalf("%d alerts stored (%v), want none", alerts, err)
	}
}

// TestWebhook_BodyReplay: a body sent again byte for byte, just applied, is answered from the
// record of its body (the alerts it held), without being read, whether it declares its length
// (read before its key is checked: one round trip) or not (read after), and changes nothing;
// the same notification written otherwise is read and answered as a replay of its snapshot.
// The record answers the integration whose group it is only: the same bytes with another
// integration's key are read and applied, and with no live key, refused.
func TestWebhook_BodyReplay(t *testing.T) {
	e := newIncidentEnv(t)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	body := mustJSON(t, notification("g", "firing", amAlert("f1", "firing", t0, map[string]string{"alertname": "X"}),
		amAlert("f2", "firing", t0, map[string]string{"alertname": "X"})))
	// post sends body with key, with its length declared or, chunked, not.
	post := func(key string, body []byte, declared bool) (int, []byte) {
		t.Helper()
		var r io.Reader = bytes.NewReader(body)
		if !declared {
			r = io.MultiReader(r) // a reader of unknown length: sent chunked
		}
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, e.srv.URL+"/api/webhooks/alertmanager", r)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	answer := func(what, key string, body []byte, declared bool, alerts int) {
		t.Helper()
		status, b := post(key, body, declared)
		var got struct {
			Status string
			Alerts int
		}
		if status != http.StatusOK || json.Unmarshal(b, &got) != nil || got.Status != "stored" || got.Alerts != alerts {
			t.Fatalf("%s: got %d %s, want 200, stored, %d alerts", what, status, b, alerts)
		}
	}
	answer("the first delivery", e.integration, body, true, 2)
	var events int
	pool := e.srv.Store.Pool()
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM incident_events`).Scan(&events); err != nil {
		t.Fatal(err)
	}
	answer("the same body again", e.integration, body, true, 2)
	// The answer of a body's replay is what the record of the body says: a planted count shows
	// that the body was not decoded.
	if _, err := pool.Exec(t.Context(), `UPDATE notification_digests SET body_alerts = 7`); err != nil {
		t.Fatal(err)
	}
	answer("the same body, its record planted", e.integration, body, true, 7)
	answer("the same body, its length not declared", e.integration, body, false, 7)
	answer("the same notification with other spacing", e.integration, append([]byte(" "), body...), true, 2)
	var after int
	if err := pool.QueryRow(t.Context(), `SELECT count(*) FROM incident_events`).Scan(&after); err != nil || after != events {
		t.Fatalf("the replays wrote %d events (%v), want none", after-events, err)
	}

	if status, b := post(store.IntegrationKeyPrefix+strings.Repeat("0", 64), body, true); status != http.StatusUnauthorized {
		t.Fatalf("the same body with an unknown key: got %d %s, want 401", status, b)
	}
	resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/integrations", Bearer: e.admin,
		Body: map[string]string{"name": "staging"}})
	var other struct{ Keys []struct{ Key string } }
	if resp.Status != http.StatusCreated {
		t.Fatalf("create integration: %d %s", resp.Status, resp.Body)
	}
	resp.JSON(t, &other)
	answer("the same body from another integration", other.Keys[0].Key, body, true, 2)
	var incidents int
	if err := pool.QueryRow(t.Context(), `SELECT count(DISTINCT integration_id) FROM incidents`).Scan(&incidents); err != nil || incidents != 2 {
		t.Fatalf("incidents of %d integrations (%v), want 2: the other integration's body was not applied", incidents, err)
	}
}
