package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestIngest_AssignsOnCall: a new incident goes to today's person, with an "assigned" event
// naming them; with nobody on call, or the setting off, it goes to nobody.
func TestIngest_AssignsOnCall(t *testing.T) {
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	alice := mustUser(t, st, "alice", store.RoleMember)

	res := mustIngest(t, st, c, group("nobody", firing("Nobody", "n1", t0)))
	if in := mustIncident(t, st, res.IncidentID); in.AssignedToID != nil {
		t.Fatalf("nobody on call: assigned to %v", *in.AssignedToID)
	}
	if got := fmt.Sprint(eventTypes(t, st, res.IncidentID)); got != "[triggered alert_added]" {
		t.Fatalf("nobody on call: timeline %s", got)
	}

	mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{mustToday(t, st)}})
	res = mustIngest(t, st, c, group("alice", firing("Alice", "a1", t0)))
	in := mustIncident(t, st, res.IncidentID)
	if in.AssignedToID == nil || *in.AssignedToID != alice.ID || in.AssignedTo != "alice" {
		t.Fatalf("alice on call: got assigned_to %v %q, want alice", in.AssignedToID, in.AssignedTo)
	}
	events, err := st.Timeline(context.Background(), in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 3 || events[0].Type != store.EventTriggered || events[0].UserID != nil || events[0].Username != "" ||
		events[1].Type != store.EventAssigned || events[1].UserID == nil || *events[1].UserID != alice.ID || events[1].Username != "alice" {
		t.Fatalf("timeline: got %+v, want triggered by the server, then assigned to alice", events)
	}
	// A notification that opens nothing assigns nothing again.
	mustIngest(t, st, c, group("alice", firing("Alice", "a1", t0), firing("Alice", "a2", t0)))
	if got := fmt.Sprint(eventTypes(t, st, in.ID)); got != "[triggered assigned alert_added alert_added]" {
		t.Fatalf("after a join: timeline %s", got)
	}

	st.SetAssignOnCall(false)
	res = mustIngest(t, st, c, group("off", firing("Off", "o1", t0)))
	if in := mustIncident(t, st, res.IncidentID); in.AssignedToID != nil {
		t.Fatalf("the setting off: assigned to %v", *in.AssignedToID)
	}
	if got := fmt.Sprint(eventTypes(t, st, res.IncidentID)); got != "[triggered alert_added]" {
		t.Fatalf("the setting off: timeline %s", got)
	}
}

// TestDeleteUser_Schedule: deleting a person deletes their days and unassigns their incidents;
// the timeline keeps the name it showed.
func TestDeleteUser_Schedule(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	c := mustIntegration(t, st, "prod")
	alice, bob := mustUser(t, st, "alice", store.RoleMember), mustUser(t, st, "bob", store.RoleMember)
	today := mustToday(t, st)
	mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{today, day(0)}})
	mustAssign(t, st, store.ScheduleAssignment{UserID: bob.ID, Dates: []time.Time{day(1)}})
	id := mustIngest(t, st, c, group("g", firing("G", "g1", t0))).IncidentID
	if _, err := st.Acknowledge(ctx, id, store.Worker{ID: alice.ID, Username: alice.Username}); err != nil {
		t.Fatal(err)
	}

	if err := st.DeleteUser(ctx, alice.ID); err != nil {
		t.Fatal(err)
	}
	if got := holders(t, st, day(0), day(1)); fmt.Sprint(got) != "[2030-01-02=bob]" {
		t.Fatalf("the schedule: got %v, want bob's day alone", got)
	}
	if _, err := st.OnCall(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("today: got %v, want nobody on call", err)
	}
	in := mustIncident(t, st, id)
	if in.AssignedToID != nil || in.AssignedTo != "" || in.AcknowledgedByID != nil {
		t.Fatalf("the incident: got %+v, want it unassigned", in)
	}
	events, err := st.Timeline(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range events {
		if e.UserID != nil {
			t.Errorf("event %s: user_id %d of a deleted person", e.Type, *e.UserID)
		}
		names = append(names, e.Type+":"+e.Username)
	}
	if fmt.Sprint(names) != "[triggered: assigned:alice alert_added: acknowledged:alice]" {
		t.Fatalf("timeline: got %v, want the names it showed", names)
	}
}

// TestSchedule_PoolerMode: behind a transaction-mode pooler the store sends its statements
// without preparing them (the simple protocol): the schedule's days and the on-call
// assignment of a new incident go through as they do prepared.
func TestSchedule_PoolerMode(t *testing.T) {
	ctx := context.Background()
	st := apitest.OpenStore(t, pgtest.MustDatabase(t), store.WithPooler(store.PoolerTransaction))
	c := mustIntegration(t, st, "prod")
	alice := mustUser(t, st, "alice", store.RoleMember)
	today := mustToday(t, st)
	ch := mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{day(0), today}})
	if len(ch.Entries) != 2 {
		t.Fatalf("assign: got %+v", ch.Entries)
	}
	if e, err := st.OnCall(ctx); err != nil || e.UserID != alice.ID || !e.Date.Equal(today) {
		t.Fatalf("on call: got %+v %v", e, err)
	}
	if got := holders(t, st, day(0), day(0)); fmt.Sprint(got) != "[2030-01-01=alice]" {
		t.Fatalf("schedule: got %v", got)
	}
	id := mustIngest(t, st, c, group("g", firing("G", "g1", t0))).IncidentID
	if in := mustIncident(t, st, id); in.AssignedTo != "alice" {
		t.Fatalf("incident: assigned to %q, want alice", in.AssignedTo)
	}
	if _, err := st.DeleteScheduleEntry(ctx, ch.Entries[0].ID, alice.ID); err != nil {
		t.Fatal(err)
	}
}
