package store_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// mustEvent appends an event done by the user actorID to targetID.
func mustEvent(tb testing.TB, st *store.Store, event string, actorID, targetID int64) {
	tb.Helper()
	err := st.AppendEvent(context.Background(), store.Event{Event: event, ActorKind: store.ActorKindUser,
		ActorID: actorID, ActorName: "someone", TargetID: targetID, RemoteAddr: "192.0.2.7", RequestID: "req-1"})
	if err != nil {
		tb.Fatalf("append %s: %v", event, err)
	}
}

// mustBackdate makes every audit event with this detail as old as age. The insert trigger
// stamps rows with now(), so the test, as the table's owner, turns it off for the update, and
// the update trigger with it.
func mustBackdate(tb testing.TB, st *store.Store, event string, age time.Duration) {
	tb.Helper()
	mustExec(tb, st, `ALTER TABLE audit_events DISABLE TRIGGER USER`)
	defer mustExec(tb, st, `ALTER TABLE audit_events ENABLE TRIGGER USER`)
	mustExec(tb, st, `UPDATE audit_events SET at = now() - $2::interval WHERE event = $1`, event, age)
}

// TestEvents_AppendOnly: no statement updates, deletes or truncates audit events, and an
// insert cannot backdate one; a delete naming a retention removes only rows older than it,
// never a row younger than a day.
func TestEvents_AppendOnly(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	mustEvent(t, st, "user.created", 1, 2)
	mustEvent(t, st, "user.deleted", 1, 2)
	mustBackdate(t, st, "user.deleted", 3*24*time.Hour)

	refused := func(name, sql string) {
		t.Helper()
		tx, err := st.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck
		if _, err := tx.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: got %v, want the append-only refusal", name, err)
		}
	}
	refused("UPDATE", `UPDATE audit_events SET detail = 'rewritten'`)
	refused("DELETE", `DELETE FROM audit_events`)
	refused("DELETE of an old row", `DELETE FROM audit_events WHERE event = 'user.deleted'`)
	refused("TRUNCATE", `TRUNCATE audit_events`)
	refused("DELETE under a retention shorter than a day",
		`SELECT set_config('terdut.audit_retention', '1 second', true); DELETE FROM audit_events`)
	refused("DELETE of a row younger than the retention",
		`SELECT set_config('terdut.audit_retention', '2 days', true); DELETE FROM audit_events WHERE event = 'user.created'`)
	if n := mustCount(t, st, `SELECT count(*) FROM audit_events WHERE event LIKE 'user.%'`); n != 2 {
		t.Fatalf("events after the refusals: got %d, want 2", n)
	}

	// Inside the retention's own transaction, only the old row goes.
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT set_config('terdut.audit_retention', '2 days', true)`); err != nil {
		t.Fatal(err)
	}
	if tag, err := tx.Exec(ctx, `DELETE FROM audit_events WHERE event = 'user.deleted'`); err != nil || tag.RowsAffected() != 1 {
		t.Fatalf("delete past the retention: got %v, %v, want 1 row deleted", tag, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// An insert that names its own time gets now() instead.
	mustExec(t, st, `INSERT INTO audit_events (at, event, actor_kind) VALUES (now() - interval '400 days', 'user.deleted', 'cli')`)
	if n := mustCount(t, st, `SELECT count(*) FROM audit_events WHERE at < now() - interval '1 minute'`); n != 0 {
		t.Fatalf("backdated inserts: got %d, want 0 (the trigger stamps now())", n)
	}
}

// TestSweepEvents: the sweep deletes exactly the events older than the retention, through the
// trigger's one exception; retention 0 keeps them all.
func TestSweepEvents(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	for range 3 {
		mustEvent(t, st, "api_key.created", 1, 1)
	}
	mustEvent(t, st, "api_key.revoked", 1, 1)
	mustEvent(t, st, "user.created", 1, 2)
	mustBackdate(t, st, "api_key.created", 400*24*time.Hour)
	mustBackdate(t, st, "api_key.revoked", 364*24*time.Hour)

	if n, err := st.SweepEvents(ctx, 0); err != nil || n != 0 {
		t.Fatalf("retention 0: got %d, %v, want nothing deleted", n, err)
	}
	n, err := st.SweepEvents(ctx, 365*24*time.Hour)
	if err != nil || n != 3 {
		t.Fatalf("retention 365 days: got %d, %v, want the 3 events of 400 days ago deleted", n, err)
	}
	if got := mustCount(t, st, `SELECT count(*) FROM audit_events WHERE event IN ('api_key.revoked', 'user.created')`); got != 2 {
		t.Fatalf("events within the retention: got %d, want both kept", got)
	}
}

// TestEvents_Query: newest first, a page at a time, filtered by actor and event; claims and
// resets are there too, beside the principal's actions.
func TestEvents_Query(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	claim := mustClaim(t, st)
	p := claim.Principal.ID
	mustEvent(t, st, "user.created", p, 10)
	mustEvent(t, st, "api_key.created", p, 10)
	mustEvent(t, st, "user.created", 42, 11)
	if _, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI, RemoteAddr: "local"}, store.RateLimit{}); err != nil {
		t.Fatal(err)
	}

	names := func(q store.EventQuery) []string {
		t.Helper()
		events, err := st.Events(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range events {
			out = append(out, e.Event)
		}
		return out
	}
	want := func(got []string, want ...string) {
		t.Helper()
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("got %v, want %v", got, want)
		}
	}
	// The migration's backfill of an empty install, the claim, three actions, the reset.
	want(names(store.EventQuery{}), "bootstrap.reset", "user.created", "api_key.created", "user.created",
		"bootstrap.claim", "bootstrap.backfill")
	want(names(store.EventQuery{ActorID: p}), "api_key.created", "user.created")
	want(names(store.EventQuery{Event: "user.created"}), "user.created", "user.created")
	want(names(store.EventQuery{Event: "bootstrap.*"}), "bootstrap.reset", "bootstrap.claim", "bootstrap.backfill")
	want(names(store.EventQuery{ActorKind: store.ActorKindCLI}), "bootstrap.reset")

	first, err := st.Events(ctx, store.EventQuery{Limit: 2})
	if err != nil || len(first) != 2 {
		t.Fatalf("first page: got %d events, %v, want 2", len(first), err)
	}
	want(names(store.EventQuery{Limit: 2, Before: first[1].ID}), "api_key.created", "user.created")

	// The claim's row names its operator, its address and the principal it made.
	claims, err := st.Events(ctx, store.EventQuery{Event: "bootstrap.claim"})
	if err != nil || len(claims) != 1 {
		t.Fatalf("claims: got %v, %v, want one", claims, err)
	}
	c := claims[0]
	if c.ActorKind != store.ActorKindOperator || c.RemoteAddr != "192.0.2.1" || c.TargetID != p ||
		c.TargetName != store.PrincipalUsername || !strings.Contains(c.Detail, "generation 1") {
		t.Errorf("claim event: got %+v, want the operator from 192.0.2.1 claiming principal %d at generation 1", c, p)
	}
}
