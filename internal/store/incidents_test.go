package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestIncidents_Actions(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	alice := mustUser(t, st, "alice", store.RoleMember)
	bob := mustUser(t, st, "bob", store.RoleMember)
	a := store.Worker{ID: alice.ID, Username: alice.Username}
	b := store.Worker{ID: bob.ID, Username: bob.Username}
	id := mustIngest(t, st, c, group("g", firing("CPU", "f1", t0))).IncidentID

	in, err := st.Acknowledge(ctx, id, a)
	if err != nil || in.Status != store.IncidentAcknowledged || in.AcknowledgedBy != "alice" || in.AcknowledgedAt == nil {
		t.Fatalf("acknowledge: got %+v, %v", in, err)
	}
	if again, err := st.Acknowledge(ctx, id, b); err != nil || again.AcknowledgedBy != "alice" || !again.AcknowledgedAt.Equal(*in.AcknowledgedAt) {
		t.Fatalf("acknowledge again: got %+v, %v, want it unchanged", again, err)
	}
	if err := st.Unacknowledge(ctx, id, b); err != nil {
		t.Fatal(err)
	}
	if in := mustIncident(t, st, id); in.Status != store.IncidentTriggered || in.AcknowledgedByID != nil {
		t.Fatalf("unacknowledged: got %+v", in)
	}
	if _, err := st.Assign(ctx, id, 987654); !errors.Is(err, store.ErrUnknownUser) {
		t.Fatalf("assign to nobody: got %v", err)
	}
	if in, err := st.Assign(ctx, id, bob.ID); err != nil || in.AssignedTo != "bob" {
		t.Fatalf("assign: got %+v, %v", in, err)
	}
	in, err = st.Snooze(ctx, id, 2*time.Hour, a)
	if err != nil || in.SnoozedUntil == nil || time.Until(*in.SnoozedUntil) < time.Hour {
		t.Fatalf("snooze: got %+v, %v", in, err)
	}
	if list, _ := st.Incidents(ctx, store.IncidentQuery{Limit: 100}); len(list) != 0 {
		t.Fatalf("the default queue holds a snoozed incident: %+v", list)
	}
	if list, _ := st.Incidents(ctx, store.IncidentQuery{Snoozed: true, Limit: 100}); len(list) != 1 {
		t.Fatalf("snoozed=true: got %d incidents, want 1", len(list))
	}
	if err := st.Unsnooze(ctx, id, a); err != nil {
		t.Fatal(err)
	}
	note, err := st.AddNote(ctx, id, "looking at it", a)
	if err != nil || note.Type != store.EventNote || note.Username != "alice" || note.Detail != "looking at it" {
		t.Fatalf("note: got %+v, %v", note, err)
	}
	if err := st.DeleteNote(ctx, id, note.ID, b); !errors.Is(err, store.ErrNotAuthor) {
		t.Fatalf("bob deletes alice's note: got %v", err)
	}
	events, _ := st.Timeline(ctx, id)
	if err := st.DeleteNote(ctx, id, events[0].ID, a); !errors.Is(err, store.ErrNotANote) {
		t.Fatalf("delete the triggered event: got %v", err)
	}
	other := mustIngest(t, st, c, group("h", firing("Mem", "f2", t0))).IncidentID
	if err := st.DeleteNote(ctx, other, note.ID, a); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete a note through another incident: got %v", err)
	}
	if _, err := st.Archive(ctx, id); !errors.Is(err, store.ErrIncidentOpen) {
		t.Fatalf("archive an open incident: got %v", err)
	}
	if err := st.DeleteNote(ctx, id, note.ID, a); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Resolve(ctx, id, a); err != nil {
		t.Fatal(err)
	}
	for name, act := range map[string]func() error{
		"acknowledge":   func() error { _, err := st.Acknowledge(ctx, id, a); return err },
		"unacknowledge": func() error { return st.Unacknowledge(ctx, id, a) },
		"assign":        func() error { _, err := st.Assign(ctx, id, alice.ID); return err },
		"snooze":        func() error { _, err := st.Snooze(ctx, id, time.Hour, a); return err },
		"unsnooze":      func() error { return st.Unsnooze(ctx, id, a) },
		"resolve":       func() error { _, err := st.Resolve(ctx, id, a); return err },
	} {
		if err := act(); !errors.Is(err, store.ErrIncidentResolved) {
			t.Errorf("%s a resolved incident: got %v, want ErrIncidentResolved", name, err)
		}
	}
	if _, err := st.AddNote(ctx, id, "post-mortem Tuesday", b); err != nil {
		t.Fatalf("a note on a resolved incident: %v", err)
	}
	if in, err := st.Archive(ctx, id); err != nil || in.ArchivedAt == nil {
		t.Fatalf("archive: got %+v, %v", in, err)
	}
	want := "[triggered alert_added acknowledged unacknowledged assigned snoozed unsnoozed resolved note]"
	if got := fmt.Sprint(eventTypes(t, st, id)); got != want {
		t.Fatalf("timeline: got %s, want %s", got, want)
	}
	events, _ = st.Timeline(ctx, id)
	if e := events[4]; e.Username != "bob" || *e.UserID != bob.ID {
		t.Fatalf("the assigned event names %q, want the assignee bob", e.Username)
	}
	if list, _ := st.Incidents(ctx, store.IncidentQuery{Status: store.IncidentResolved, Archived: true, Limit: 100}); len(list) != 1 || list[0].ID != id {
		t.Fatalf("the archive tab: got %+v", list)
	}
	// The alert of an archived incident, resolved, is archived in the feed; firing, it is not.
	mustIngest(t, st, c, group("g", resolved(firing("CPU", "f1", t0), t0.Add(time.Minute))))
	if list, _ := st.Alerts(ctx, store.AlertQuery{Archived: true, Limit: 100}); len(list) != 1 || list[0].ArchivedAt == nil {
		t.Fatalf("archived alerts: got %+v", list)
	}
	if list, _ := st.Alerts(ctx, store.AlertQuery{Status: store.AlertFiring, Limit: 100}); len(list) != 1 || list[0].Fingerprint != "f2" {
		t.Fatalf("firing alerts: got %+v", list)
	}
	if err := st.Unarchive(ctx, id); err != nil {
		t.Fatal(err)
	}
	if list, _ := st.Alerts(ctx, store.AlertQuery{Limit: 100}); len(list) != 2 {
		t.Fatalf("alerts after unarchiving: got %d, want 2", len(list))
	}
	if _, err := st.Incident(ctx, 987654); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such incident: got %v", err)
	}
	if _, err := st.Timeline(ctx, 987654); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("no such timeline: got %v", err)
	}
	// Every incident's timeline begins with its triggered event; one with none is still the
	// incident's, empty.
	mustExec(t, st, `DELETE FROM incident_events WHERE incident_id = $1`, other)
	if events, err := st.Timeline(ctx, other); err != nil || events == nil || len(events) != 0 {
		t.Fatalf("an incident with no event: got %v, %v, want an empty timeline", events, err)
	}
}
