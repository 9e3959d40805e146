package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// day is 2030-01-01 plus n days.
func day(n int) time.Time { return time.Date(2030, 1, 1+n, 0, 0, 0, 0, time.UTC) }

// mustToday returns the database's UTC day, the schedule's today.
func mustToday(tb testing.TB, st *store.Store) time.Time {
	tb.Helper()
	var d time.Time
	if err := st.Pool().QueryRow(context.Background(), `SELECT (now() AT TIME ZONE 'UTC')::date`).Scan(&d); err != nil {
		tb.Fatal(err)
	}
	return d
}

func mustAssign(tb testing.TB, st *store.Store, a store.ScheduleAssignment) store.ScheduleChange {
	tb.Helper()
	c, err := st.AssignSchedule(context.Background(), a)
	if err != nil {
		tb.Fatalf("assign %v to %d: %v", a.Dates, a.UserID, err)
	}
	return c
}

// holders returns who holds each day of [from, to], as "date=username".
func holders(tb testing.TB, st *store.Store, from, to time.Time) []string {
	tb.Helper()
	entries, err := st.Schedule(context.Background(), from, to)
	if err != nil {
		tb.Fatal(err)
	}
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Date.Format(store.DateLayout)+"="+e.Username)
	}
	return out
}

func TestSchedule_Assign(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice, bob := mustUser(t, st, "alice", store.RoleMember), mustUser(t, st, "bob", store.RoleMember)

	t.Run("OK", func(t *testing.T) {
		c := mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{day(2), day(0), day(1)}})
		if len(c.Entries) != 3 || len(c.Taken) != 0 || !c.Entries[0].Date.Equal(day(0)) || c.Entries[2].Username != "alice" ||
			c.Entries[0].UserID != alice.ID || c.Entries[0].ID == 0 || c.Entries[0].CreatedAt.IsZero() {
			t.Fatalf("got %+v, want days 0-2 of alice in order of date", c)
		}
		// Again, with one more: the days held stay as they were.
		again := mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{day(1), day(3)}})
		if again.Entries[0].ID != c.Entries[1].ID || len(again.Entries) != 2 {
			t.Fatalf("again: got %+v, want day 1 unchanged (id %d) and day 3", again.Entries, c.Entries[1].ID)
		}
	})

	t.Run("ErrHeld", func(t *testing.T) {
		_, err := st.AssignSchedule(ctx, store.ScheduleAssignment{UserID: bob.ID, Dates: []time.Time{day(3), day(4), day(1)}})
		var held *store.DatesHeldError
		if !errors.As(err, &held) || len(held.Held) != 2 || held.Error() != "already on call: 2030-01-02 (alice), 2030-01-04 (alice)" {
			t.Fatalf("got %v, want the days 1 and 3 named as alice's", err)
		}
		// A member's replace takes nobody's day.
		_, err = st.AssignSchedule(ctx, store.ScheduleAssignment{UserID: bob.ID, Dates: []time.Time{day(4), day(3)}, Replace: true, Member: true})
		if !errors.Is(err, store.ErrNotYourDay) {
			t.Fatalf("a member's replace: got %v, want ErrNotYourDay", err)
		}
		// Unknown person.
		if _, err := st.AssignSchedule(ctx, store.ScheduleAssignment{UserID: 987654, Dates: []time.Time{day(9)}}); !errors.Is(err, store.ErrUnknownUser) {
			t.Fatalf("an unknown person: got %v, want ErrUnknownUser", err)
		}
		// Nothing of the refused assignments was written.
		want := "[2030-01-01=alice 2030-01-02=alice 2030-01-03=alice 2030-01-04=alice]"
		if got := holders(t, st, day(0), day(10)); fmt.Sprint(got) != want {
			t.Fatalf("after the refusals: got %v, want %s", got, want)
		}
	})

	t.Run("Replace", func(t *testing.T) {
		before := holders(t, st, day(3), day(3))
		old, err := st.Schedule(ctx, day(3), day(3))
		if err != nil || len(old) != 1 {
			t.Fatalf("day 3: %v %v", old, err)
		}
		c := mustAssign(t, st, store.ScheduleAssignment{UserID: bob.ID, Dates: []time.Time{day(3), day(4)}, Replace: true})
		if len(c.Taken) != 1 || c.Taken[0].Username != "alice" || len(c.Entries) != 2 || c.Entries[0].Username != "bob" ||
			c.Entries[0].ID == old[0].ID {
			t.Fatalf("got %+v, want day 3 taken from alice under a new id, and day 4", c)
		}
		if got := holders(t, st, day(3), day(4)); fmt.Sprint(got) != "[2030-01-04=bob 2030-01-05=bob]" {
			t.Fatalf("after the replace: got %v (before: %v)", got, before)
		}
		// The old id names nobody's day.
		if _, err := st.DeleteScheduleEntry(ctx, old[0].ID, 0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("delete the old id: got %v, want ErrNotFound", err)
		}
	})

	t.Run("Delete", func(t *testing.T) {
		entries, err := st.Schedule(ctx, day(0), day(0))
		if err != nil || len(entries) != 1 {
			t.Fatal(entries, err)
		}
		if _, err := st.DeleteScheduleEntry(ctx, entries[0].ID, bob.ID); !errors.Is(err, store.ErrNotYourDay) {
			t.Fatalf("bob deletes alice's day: got %v, want ErrNotYourDay", err)
		}
		e, err := st.DeleteScheduleEntry(ctx, entries[0].ID, alice.ID)
		if err != nil || e.Username != "alice" || !e.Date.Equal(day(0)) {
			t.Fatalf("alice deletes her day: got %+v %v", e, err)
		}
		if got := holders(t, st, day(0), day(0)); len(got) != 0 {
			t.Fatalf("after the delete: got %v, want nobody", got)
		}
	})
}

func TestSchedule_OnCall(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	if _, err := st.OnCall(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("nobody on call: got %v, want ErrNotFound", err)
	}
	alice := mustUser(t, st, "alice", store.RoleMember)
	today := mustToday(t, st)
	mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{today.AddDate(0, 0, 1)}})
	if _, err := st.OnCall(ctx); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("alice on call tomorrow: got %v, want ErrNotFound", err)
	}
	mustAssign(t, st, store.ScheduleAssignment{UserID: alice.ID, Dates: []time.Time{today}})
	if e, err := st.OnCall(ctx); err != nil || e.UserID != alice.ID || !e.Date.Equal(today) {
		t.Fatalf("alice on call today: got %+v %v", e, err)
	}
}
