package alertmanager

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// waitBound bounds each wait for the server to show what Alertmanager did: generous for a busy
// 2-core machine (Alertmanager re-sends a group every few seconds here), never a measure of speed.
const waitBound = 90 * time.Second

// webhookPath is where Alertmanager delivers (docs/incidents.md).
const webhookPath = "/api/webhooks/alertmanager"

// The server's answers, as a client decodes them (docs/incidents.md).
type alert struct {
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
	IncidentID       *int64            `json:"incident_id"`
	ResolutionSource string            `json:"resolution_source"`
}

type incident struct {
	ID               int64             `json:"id"`
	GroupKey         string            `json:"group_key"`
	Title            string            `json:"title"`
	GroupLabels      map[string]string `json:"group_labels"`
	Status           string            `json:"status"`
	Severity         string            `json:"severity"`
	TriggeredAt      time.Time         `json:"triggered_at"`
	ResolvedAt       *time.Time        `json:"resolved_at"`
	ResolutionSource string            `json:"resolution_source"`
	Alerts           []alert           `json:"alerts"`      // GET /api/incidents/{id} only
	AlertCount       int               `json:"alert_count"` // GET /api/incidents/{id} only
}

// event is a timeline's event; absent ids are 0, so that events compare with ==.
type event struct {
	ID        int64     `json:"id"`
	Type      string    `json:"type"`
	UserID    int64     `json:"user_id"`
	Username  string    `json:"username"`
	AlertID   int64     `json:"alert_id"`
	Detail    string    `json:"detail"`
	CreatedAt time.Time `json:"created_at"`
}

type integrationKey struct {
	ID         int64      `json:"id"`
	Hint       string     `json:"hint"`
	LastUsedAt *time.Time `json:"last_used_at"`
	Key        string     `json:"key"` // only in the answer that made it
}

type integration struct {
	ID             int64            `json:"id"`
	Name           string           `json:"name"`
	ExpireAfter    string           `json:"expire_after"`
	LastDeliveryAt *time.Time       `json:"last_delivery_at"`
	LastError      string           `json:"last_error"`
	LastErrorAt    *time.Time       `json:"last_error_at"`
	Keys           []integrationKey `json:"keys"`
}

// env is a claimed install with one integration, whose first key is in a file for
// Alertmanager's credentials_file.
type env struct {
	srv         *apitest.Server // the replica the test reads from
	admin       string          // an admin's API key
	integration integration     // as POST /api/integrations answered it
	credentials string          // the file holding the integration's key
}

// newEnv starts a server on a fresh database, claims it and makes an integration with
// expireAfter ("": the default).
func newEnv(t *testing.T, expireAfter string) *env {
	t.Helper()
	return newEnvOn(t, apitest.NewServer(t, pgtest.MustDatabase(t), nil), expireAfter)
}

// newEnvOn is newEnv on a server the test started.
func newEnvOn(t *testing.T, srv *apitest.Server, expireAfter string) *env {
	t.Helper()
	e := &env{srv: srv, admin: srv.MustClaim(t)}
	body := map[string]string{"name": "prod"}
	if expireAfter != "" {
		body["expire_after"] = expireAfter
	}
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/integrations", Bearer: e.admin, Body: body})
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /api/integrations: got %d %s, want 201", resp.Status, resp.Body)
	}
	resp.JSON(t, &e.integration)
	if len(e.integration.Keys) != 1 || e.integration.Keys[0].Key == "" {
		t.Fatalf("POST /api/integrations: got %s, want the integration and its first key", resp.Body)
	}
	// As a person writes it: echo "$key" > file.
	e.credentials = filepath.Join(t.TempDir(), "terdut-key")
	apitest.WriteFile(t, e.credentials, e.integration.Keys[0].Key+"\n")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the server's warnings and errors:\n%s", problems(srv.Logs.String()))
		}
	})
	return e
}

// webhookURL is the webhook of server srv.
func webhookURL(srv *apitest.Server) string { return srv.URL + webhookPath }

// get GETs path with the admin's key into out, failing the test on anything but 200.
func (e *env) get(t *testing.T, path string, out any) {
	t.Helper()
	resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: e.admin})
	if resp.Status != http.StatusOK {
		t.Fatalf("GET %s: got %d %s, want 200", path, resp.Status, resp.Body)
	}
	resp.JSON(t, out)
}

// incidents is GET /api/incidents?<query>.
func (e *env) incidents(t *testing.T, query string) []incident {
	t.Helper()
	var list []incident
	e.get(t, "/api/incidents?"+query, &list)
	return list
}

// incident is GET /api/incidents/{id}: the incident with its alerts inline.
func (e *env) incident(t *testing.T, id int64) incident {
	t.Helper()
	var in incident
	e.get(t, fmt.Sprintf("/api/incidents/%d", id), &in)
	return in
}

// timeline is GET /api/incidents/{id}/timeline.
func (e *env) timeline(t *testing.T, id int64) []event {
	t.Helper()
	var events []event
	e.get(t, fmt.Sprintf("/api/incidents/%d/timeline", id), &events)
	return events
}

// alerts is the feed, GET /api/alerts, by fingerprint.
func (e *env) alerts(t *testing.T) map[string]alert {
	t.Helper()
	var list []alert
	e.get(t, "/api/alerts?limit=1000", &list)
	out := map[string]alert{}
	for _, a := range list {
		if _, dup := out[a.Fingerprint]; dup {
			t.Fatalf("GET /api/alerts: fingerprint %s twice: %+v", a.Fingerprint, list)
		}
		out[a.Fingerprint] = a
	}
	return out
}

// integrationNow is the integration as GET /api/integrations shows it.
func (e *env) integrationNow(t *testing.T) integration {
	t.Helper()
	var list []integration
	e.get(t, "/api/integrations", &list)
	for _, in := range list {
		if in.ID == e.integration.ID {
			return in
		}
	}
	t.Fatalf("GET /api/integrations: no integration %d in %+v", e.integration.ID, list)
	return integration{}
}

// openIncident waits until the group whose title is title has an open incident holding
// alerts alerts, and returns it with its alerts inline.
func (e *env) openIncident(t *testing.T, title string, alerts int) incident {
	t.Helper()
	return waitFor(t, fmt.Sprintf("an open incident %q holding %d alerts", title, alerts), func() []incident {
		var found []incident
		for _, in := range e.incidents(t, "") {
			if in.Title == title {
				found = append(found, e.incident(t, in.ID))
			}
		}
		return found
	}, func(found []incident) bool { return len(found) == 1 && found[0].AlertCount == alerts })[0]
}

// count runs a SELECT count(*) ... on the server's database.
func (e *env) count(t *testing.T, query string, args ...any) int {
	t.Helper()
	var n int
	if err := e.srv.Store.Pool().QueryRow(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// exec runs a statement on the server's database and returns how many rows it changed.
func (e *env) exec(t *testing.T, statement string, args ...any) int64 {
	t.Helper()
	tag, err := e.srv.Store.Pool().Exec(context.Background(), statement, args...)
	if err != nil {
		t.Fatalf("%s: %v", statement, err)
	}
	return tag.RowsAffected()
}

// waitFor polls read until ok holds and returns what it read, or fails t after waitBound with
// the last thing read.
func waitFor[T any](t *testing.T, what string, read func() T, ok func(T) bool) T {
	t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		v := read()
		if ok(v) {
			return v
		}
		if time.Now().After(deadline) {
			b, _ := json.Marshal(v)
			t.Fatalf("waited %v for %s; last saw %s", waitBound, what, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// types lists the events' types, in order.
func types(events []event) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = e.Type
	}
	return out
}

// problems is the WARN and ERROR lines of a server's log, at most the last 40.
func problems(log string) string {
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(len(lines)-40, 0):], "\n")
}
