package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// tuiScheduleEntry is terdut-tui's ScheduleEntry (internal/api/types.go), field for field.
type tuiScheduleEntry struct {
	ID        int64     `json:"id"`
	UserID    int64     `json:"user_id"`
	Username  string    `json:"username"`
	Date      string    `json:"date"` // YYYY-MM-DD
	CreatedAt time.Time `json:"created_at"`
}

// mustTodayOf returns the database's UTC day, the schedule's today, as YYYY-MM-DD.
func mustTodayOf(t *testing.T, srv *apitest.Server) string {
	t.Helper()
	var d time.Time
	if err := srv.Store.Pool().QueryRow(t.Context(), `SELECT (now() AT TIME ZONE 'UTC')::date`).Scan(&d); err != nil {
		t.Fatal(err)
	}
	return d.Format(store.DateLayout)
}

// assignment is the body of POST /api/schedule.
func assignment(userID int64, replace bool, dates ...string) map[string]any {
	return map[string]any{"user_id": userID, "dates": dates, "replace": replace}
}

// scheduleCall calls the schedule as the holder of key and fails unless the status is want.
func scheduleCall(t *testing.T, srv *apitest.Server, key, method, path string, body any, want int) apitest.Response {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: method, Path: path, Bearer: key, Body: body})
	if resp.Status != want {
		t.Fatalf("%s %s %v: got %d %s, want %d", method, path, body, resp.Status, resp.Body, want)
	}
	return resp
}

// decodeEntries decodes a list of entries as terdut-tui does, and checks that no field is null
// or missing.
func decodeEntries(t *testing.T, what string, body []byte) []tuiScheduleEntry {
	t.Helper()
	var entries []tuiScheduleEntry
	strictDecode(t, what, body, &entries)
	var raw []map[string]json.RawMessage
	strictDecode(t, what, body, &raw)
	for _, e := range raw {
		nullRules(t, what, e)
		if len(e) != 5 {
			t.Errorf("%s: got fields %v, want id, user_id, username, date, created_at", what, e)
		}
	}
	return entries
}

// TestSchedule_ClientContract: every answer decodes into terdut-tui's types; today's on-call
// person gets the new incidents, with an "assigned" event that names them; deleting them
// deletes their days and unassigns their incidents, and the timeline keeps their name.
func TestSchedule_ClientContract(t *testing.T) {
	e := newIncidentEnv(t)
	alice := e.member
	today := mustTodayOf(t, e.srv)

	// Empty: [], and 404 with the contract's sentence.
	resp := scheduleCall(t, e.srv, alice.APIKey, http.MethodGet, "/api/schedule?from=2030-01-01&to=2030-12-31", nil, http.StatusOK)
	if strings.TrimSpace(string(resp.Body)) != "[]" {
		t.Fatalf("an empty schedule: got %s, want []", resp.Body)
	}
	resp = scheduleCall(t, e.srv, alice.APIKey, http.MethodGet, "/api/schedule/current", nil, http.StatusNotFound)
	var refusal struct{ Error, Code string }
	strictDecode(t, "current", resp.Body, &refusal)
	if refusal.Error != "no one is on call today" || refusal.Code != "no_on_call" {
		t.Fatalf("nobody on call: got %s", resp.Body)
	}

	// Alice takes today and a day of 2030 (as the TUI sends it, without replace): 201, the entries.
	resp = e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/schedule", Bearer: alice.APIKey,
		Body: map[string]any{"user_id": alice.User.ID, "dates": []string{"2030-01-07", today}}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("assign: got %d %s, want 201", resp.Status, resp.Body)
	}
	entries := decodeEntries(t, "assign", resp.Body)
	if len(entries) != 2 || entries[0].Date != today || entries[1].Date != "2030-01-07" || entries[1].Username != "alice" ||
		entries[1].UserID != alice.User.ID || entries[1].ID == 0 || entries[1].CreatedAt.IsZero() {
		t.Fatalf("assign: got %+v, want today's and 2030-01-07's entries of alice, in order of date", entries)
	}
	resp = scheduleCall(t, e.srv, e.admin, http.MethodGet, "/api/schedule?from=2030-01-01&to=2030-12-31", nil, http.StatusOK)
	if got := decodeEntries(t, "list", resp.Body); len(got) != 1 || got[0] != entries[1] {
		t.Fatalf("list: got %+v, want %+v", got, entries[1])
	}
	resp = scheduleCall(t, e.srv, e.admin, http.MethodGet, "/api/schedule/current", nil, http.StatusOK)
	var current tuiScheduleEntry
	strictDecode(t, "current", resp.Body, &current)
	if current != entries[0] {
		t.Fatalf("current: got %+v, want %+v", current, entries[0])
	}

	// A new incident goes to her, with an "assigned" event that names her.
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	if resp := e.deliver(t, notification(`{}:{alertname="DiskFull"}`, "firing", amAlert("a1", "firing", t0, map[string]string{"alertname": "DiskFull"}))); resp.Status != http.StatusOK {
		t.Fatalf("deliver: %d %s", resp.Status, resp.Body)
	}
	resp = scheduleCall(t, e.srv, alice.APIKey, http.MethodGet, "/api/incidents", nil, http.StatusOK)
	var queue []tuiIncident
	strictDecode(t, "queue", resp.Body, &queue)
	if len(queue) != 1 || queue[0].AssignedToID == nil || *queue[0].AssignedToID != alice.User.ID || queue[0].AssignedTo != "alice" {
		t.Fatalf("queue: got %s, want the incident assigned to alice", resp.Body)
	}
	id := queue[0].ID
	timeline := func() []tuiEvent {
		t.Helper()
		resp := scheduleCall(t, e.srv, e.admin, http.MethodGet, fmt.Sprintf("/api/incidents/%d/timeline", id), nil, http.StatusOK)
		var events []tuiEvent
		strictDecode(t, "timeline", resp.Body, &events)
		var raw []map[string]json.RawMessage
		strictDecode(t, "timeline", resp.Body, &raw)
		for _, ev := range raw {
			nullRules(t, "timeline event", ev)
		}
		return events
	}
	events := timeline()
	if len(events) != 3 || events[0].Type != "triggered" || events[0].Username != "" || events[1].Type != "assigned" ||
		events[1].UserID == nil || *events[1].UserID != alice.User.ID || events[1].Username != "alice" {
		t.Fatalf("timeline: got %+v, want triggered by the server, then assigned to alice", events)
	}

	// DELETE answers 204 and nothing else.
	resp = scheduleCall(t, e.srv, alice.APIKey, http.MethodDelete, fmt.Sprintf("/api/schedule/%d", entries[1].ID), nil, http.StatusNoContent)
	if len(bytes.TrimSpace(resp.Body)) != 0 {
		t.Fatalf("delete: a body %q with 204", resp.Body)
	}

	// Deleting alice deletes her days and unassigns her incident; the timeline keeps her name.
	scheduleCall(t, e.srv, e.admin, http.MethodDelete, fmt.Sprintf("/api/users/%d", alice.User.ID), nil, http.StatusNoContent)
	scheduleCall(t, e.srv, e.admin, http.MethodGet, "/api/schedule/current", nil, http.StatusNotFound)
	if n := count(t, e.srv, `SELECT count(*) FROM schedule`); n != 0 {
		t.Fatalf("after alice's deletion: %d days in the schedule, want none", n)
	}
	resp = scheduleCall(t, e.srv, e.admin, http.MethodGet, fmt.Sprintf("/api/incidents/%d", id), nil, http.StatusOK)
	var in tuiIncident
	strictDecode(t, "incident", resp.Body, &in)
	if in.AssignedToID != nil || in.AssignedTo != "" {
		t.Fatalf("after alice's deletion: got %s, want the incident unassigned", resp.Body)
	}
	if events := timeline(); len(events) != 3 || events[1].Type != "assigned" || events[1].Username != "alice" || events[1].UserID != nil {
		t.Fatalf("timeline after alice's deletion: got %+v, want the assigned event to name alice still", events)
	}
}

// TestSchedule_Permissions: admins assign and remove anyone's days; a member only their own,
// and takes nobody's; every change is in the audit.
func TestSchedule_Permissions(t *testing.T) {
	e := newIncidentEnv(t)
	alice, bob := e.member, apitest.MustPerson(t, e.srv.Store, "bob", store.RoleMember)
	post := func(key string, body any, want int) apitest.Response {
		t.Helper()
		return scheduleCall(t, e.srv, key, http.MethodPost, "/api/schedule", body, want)
	}
	holders := func() string {
		t.Helper()
		resp := scheduleCall(t, e.srv, e.admin, http.MethodGet, "/api/schedule?from=2030-01-01&to=2030-01-31", nil, http.StatusOK)
		var out []string
		for _, en := range decodeEntries(t, "list", resp.Body) {
			out = append(out, en.Date[8:]+"="+en.Username)
		}
		return strings.Join(out, " ")
	}

	bobs := decodeEntries(t, "bob", post(bob.APIKey, assignment(bob.User.ID, false, "2030-01-03", "2030-01-04"), http.StatusCreated).Body)
	// A member assigns nobody else, and takes nobody's day.
	wantAPIError(t, post(alice.APIKey, assignment(bob.User.ID, false, "2030-01-05"), http.StatusForbidden), http.StatusForbidden, "not_your_day")
	wantAPIError(t, post(alice.APIKey, assignment(alice.User.ID, true, "2030-01-02", "2030-01-03"), http.StatusForbidden), http.StatusForbidden, "not_your_day")
	// Without replace, a held day refuses the whole assignment, naming the days.
	resp := post(alice.APIKey, assignment(alice.User.ID, false, "2030-01-02", "2030-01-04", "2030-01-03"), http.StatusConflict)
	wantAPIError(t, resp, http.StatusConflict, "dates_held")
	if !strings.Contains(string(resp.Body), "2030-01-03 (bob), 2030-01-04 (bob)") || strings.Contains(string(resp.Body), "2030-01-02") {
		t.Fatalf("the refusal: got %s, want it to name bob's two days alone", resp.Body)
	}
	wantAPIError(t, post(e.admin, assignment(alice.User.ID, false, "2030-01-04"), http.StatusConflict), http.StatusConflict, "dates_held")
	if got := holders(); got != "03=bob 04=bob" {
		t.Fatalf("after the refusals: got %s, want bob's days alone", got)
	}
	// A member deletes only their own days.
	wantAPIError(t, scheduleCall(t, e.srv, alice.APIKey, http.MethodDelete, fmt.Sprintf("/api/schedule/%d", bobs[0].ID), nil, http.StatusForbidden),
		http.StatusForbidden, "not_your_day")
	scheduleCall(t, e.srv, alice.APIKey, http.MethodDelete, "/api/schedule/987654", nil, http.StatusNotFound)

	// An admin gives anyone any day, taking it over with replace.
	taken := decodeEntries(t, "replace", post(e.admin, assignment(alice.User.ID, true, "2030-01-04", "2030-01-05"), http.StatusCreated).Body)
	if got := holders(); got != "03=bob 04=alice 05=alice" || taken[0].ID == bobs[1].ID {
		t.Fatalf("after the admin's replace: got %s (entries %+v), want 04 alice's under a new id", got, taken)
	}
	// bob's old entry of 04 names nobody's day now.
	scheduleCall(t, e.srv, bob.APIKey, http.MethodDelete, fmt.Sprintf("/api/schedule/%d", bobs[1].ID), nil, http.StatusNotFound)
	// A member's replace over their own days, and again the same days: unchanged.
	again := decodeEntries(t, "again", post(alice.APIKey, assignment(alice.User.ID, true, "2030-01-05"), http.StatusCreated).Body)
	if again[0] != taken[1] {
		t.Fatalf("the same day again: got %+v, want %+v unchanged", again[0], taken[1])
	}
	scheduleCall(t, e.srv, alice.APIKey, http.MethodDelete, fmt.Sprintf("/api/schedule/%d", taken[1].ID), nil, http.StatusNoContent)
	scheduleCall(t, e.srv, e.admin, http.MethodDelete, fmt.Sprintf("/api/schedule/%d", bobs[0].ID), nil, http.StatusNoContent)
	if got := holders(); got != "04=alice" {
		t.Fatalf("after the deletions: got %s, want 04=alice", got)
	}

	// The audit has every change, with its actor and the person whose days they were.
	p := mustAudit(t, e.srv, e.admin, "?event=schedule.*")
	var got []string
	for _, ev := range p.Events {
		got = append(got, fmt.Sprintf("%s by %s: %s", ev.Event, ev.ActorName, ev.Detail))
	}
	want := []string{
		"schedule.removed by terdut-operator-bootstrap: day 2030-01-03 (entry " + fmt.Sprint(bobs[0].ID) + ")",
		"schedule.removed by alice: day 2030-01-05 (entry " + fmt.Sprint(taken[1].ID) + ")",
		"schedule.assigned by alice: days 2030-01-05",
		"schedule.assigned by terdut-operator-bootstrap: days 2030-01-04, 2030-01-05; taken over: 2030-01-04 (bob)",
		"schedule.assigned by bob: days 2030-01-03, 2030-01-04",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audit:\ngot  %q\nwant %q", got, want)
	}
}

// TestSchedule_BadInput: every date that is not YYYY-MM-DD, from after to, a span over 366
// days, an empty or repeated list of dates, an unknown person or field: 400 with an error
// (a member who names another person: 403), and nothing written.
func TestSchedule_BadInput(t *testing.T) {
	e := newIncidentEnv(t)
	alice := e.member
	badDays := []string{"", "today", "2030-1-07", "2030-01-7", "20300107", "2030/01/07", "07-01-2030", "2030.01.07",
		"2030-01-07T00:00:00Z", "2030-01-07 00:00", " 2030-01-07", "2030-01-07 ", "2030-01-07x", "2030-02-30", "2030-13-01",
		"2030-00-10", "2030-01-00", "2030-01-32", "0000-01-01", "+203-01-07", "-203-01-07", "02030-01-07", "2030-001-07",
		"２０３０-01-07", "2030‐01‐07", "1e3-01-07", "0x7e-01-07"}
	list := func(query string) {
		t.Helper()
		resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/schedule?" + query, Bearer: alice.APIKey})
		wantAPIError(t, resp, http.StatusBadRequest, "invalid_query")
	}
	for _, d := range badDays {
		list("from=" + url.QueryEscape(d) + "&to=2030-12-31")
		list("from=2030-01-01&to=" + url.QueryEscape(d))
	}
	for _, q := range []string{"", "from=2030-01-01", "to=2030-01-01", "from=2030-01-01&to=2030-01-02&to=2030-01-03",
		"from=2030-01-02&from=2030-01-01&to=2030-01-03", "from=2030-01-02&to=2030-01-01", "from=2030-01-01&to=2031-01-02",
		"from=2028-01-01&to=2029-01-01", "from=0001-01-01&to=9999-12-31"} {
		list(q)
	}
	// A span of 366 days, both included, is answered.
	for _, q := range []string{"from=2028-01-01&to=2028-12-31", "from=2030-01-01&to=2030-01-01", "from=0001-01-01&to=0001-01-01"} {
		scheduleCall(t, e.srv, alice.APIKey, http.MethodGet, "/api/schedule?"+q, nil, http.StatusOK)
	}

	many := make([]string, 367)
	for i := range many {
		many[i] = time.Date(2030, 1, 1+i, 0, 0, 0, 0, time.UTC).Format(store.DateLayout)
	}
	bodies := []struct {
		body any
		code string
	}{
		{`{"user_id": 0, "dates": ["2030-01-07"]}`, "invalid_user"},
		{`{"user_id": -1, "dates": ["2030-01-07"]}`, "invalid_user"},
		{`{"dates": ["2030-01-07"]}`, "invalid_user"},
		{`{"user_id": "` + fmt.Sprint(alice.User.ID) + `", "dates": ["2030-01-07"]}`, "invalid_json"},
		{`{"user_id": 987654, "dates": ["2030-01-07"]}`, "unknown_user"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `}`, "invalid_dates"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": null}`, "invalid_dates"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": []}`, "invalid_dates"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": "2030-01-07"}`, "invalid_json"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": [20300107]}`, "invalid_json"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": ["2030-01-07"], "replace": "yes"}`, "invalid_json"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": ["2030-01-07"], "date": "2030-01-08"}`, "unknown_field"},
		{`{"user_id": ` + fmt.Sprint(alice.User.ID) + `, "dates": ["2030-01-07"]} {}`, "invalid_json"},
		{assignment(alice.User.ID, false, "2030-01-07", "2030-01-08", "2030-01-07"), "invalid_dates"},
		{assignment(alice.User.ID, false, many...), "invalid_dates"},
	}
	for _, d := range badDays {
		bodies = append(bodies, struct {
			body any
			code string
		}{assignment(alice.User.ID, false, "2030-01-07", d), "invalid_dates"})
	}
	for _, key := range []string{e.admin, alice.APIKey} {
		for _, b := range bodies {
			status, code := http.StatusBadRequest, b.code
			if code == "unknown_user" && key == alice.APIKey {
				status, code = http.StatusForbidden, "not_your_day" // a member names nobody else
			}
			resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/schedule", Bearer: key, Body: b.body})
			if resp.Status != status || resp.Code() != code {
				t.Errorf("POST %v: got %d %s, want %d %s", b.body, resp.Status, resp.Body, status, code)
			}
		}
	}
	for _, path := range []string{"/api/schedule/0", "/api/schedule/x", "/api/schedule/current"} {
		wantAPIError(t, e.srv.MustDo(t, apitest.Request{Method: http.MethodDelete, Path: path, Bearer: e.admin}), http.StatusBadRequest, "invalid_id")
	}
	if n := count(t, e.srv, `SELECT count(*) FROM schedule`); n != 0 {
		t.Fatalf("after the refusals: %d days written, want none", n)
	}
	if p := mustAudit(t, e.srv, e.admin, "?event=schedule.*"); len(p.Events) != 0 {
		t.Fatalf("after the refusals: audit %v, want nothing", p.names())
	}
	// The largest assignment is taken whole.
	resp := scheduleCall(t, e.srv, alice.APIKey, http.MethodPost, "/api/schedule", assignment(alice.User.ID, false, many[:366]...), http.StatusCreated)
	if got := decodeEntries(t, "a year", resp.Body); len(got) != 366 {
		t.Fatalf("366 days: got %d entries", len(got))
	}
}
