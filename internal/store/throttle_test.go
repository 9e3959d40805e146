package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestAttempts(t *testing.T) {
	ctx := context.Background()
	limit := store.RateLimit{Max: 2, Window: time.Hour}

	t.Run("ReservedUntilReleased", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		alice := mustUser(t, st, "alice", store.RoleMember)
		_, _, first, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit)
		if err != nil {
			t.Fatal(err)
		}
		// The name in another case is looked up as typed, but throttled as the same name.
		if _, _, _, err := st.UserForSignIn(ctx, "ALICE", store.GateOn, limit); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ALICE: got %v, want %v", err, store.ErrNotFound)
		}
		var rl *store.RateLimitedError
		if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit); !errors.As(err, &rl) ||
			rl.RetryAfter < 59*time.Second || rl.RetryAfter > store.DefaultCheckLease {
			t.Fatalf("a third check: got %v, want *RateLimitedError with about the lease (%s) to wait", err, store.DefaultCheckLease)
		}
		if err := st.ReleaseAttempt(ctx, first); err != nil {
			t.Fatal(err)
		}
		if u, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit); err != nil || u.ID != alice.ID {
			t.Fatalf("after a release: got %+v, %v, want alice", u, err)
		}
		for range 2 {
			if _, _, _, err := st.UserForSignIn(ctx, "nobody", store.GateOn, limit); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("nobody: got %v, want %v", err, store.ErrNotFound)
			}
		}
		if _, _, _, err := st.UserForSignIn(ctx, "nobody", store.GateOn, limit); !errors.As(err, &rl) {
			t.Fatalf("nobody, a third time: got %v, want *RateLimitedError", err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM login_attempts WHERE octet_length(key) <> 32`); n != 0 {
			t.Fatalf("got %d keys that are not SHA-256 digests, want none", n)
		}
	})

	t.Run("FailedCountsForTheWindow", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		mustUser(t, st, "alice", store.RoleMember)
		short := store.RateLimit{Max: 2, Window: time.Hour, Lease: time.Second}
		for range 2 {
			_, _, a, err := st.UserForSignIn(ctx, "alice", store.GateOn, short)
			if err != nil {
				t.Fatal(err)
			}
			if err := st.FailedAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(1500 * time.Millisecond) // past the lease: only the failures count now
		var rl *store.RateLimitedError
		if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, short); !errors.As(err, &rl) || rl.RetryAfter < 59*time.Minute {
			t.Fatalf("after two failed guesses: got %v, want *RateLimitedError with about an hour to wait", err)
		}
	})

	// A check whose outcome is never written (the database went away after its reservation)
	// counts only for its lease, then costs nothing. The lease is long enough for any machine
	// to make the three lookups within it; its end is reached by moving the reservations back
	// in time, not by waiting.
	t.Run("UnresolvedCountsForTheLease", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		alice := mustUser(t, st, "alice", store.RoleMember)
		short := store.RateLimit{Max: 2, Window: time.Hour, Lease: time.Minute}
		for range 2 {
			if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, short); err != nil {
				t.Fatal(err)
			}
		}
		var rl *store.RateLimitedError
		if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, short); !errors.As(err, &rl) || rl.RetryAfter > time.Minute {
			t.Fatalf("while two checks run: got %v, want *RateLimitedError with at most the lease to wait", err)
		}
		if n := mustExec(t, st, `UPDATE login_attempts SET pending = ARRAY(SELECT p - interval '61 seconds' FROM unnest(pending) p)
			WHERE cardinality(pending) = 2`); n != 1 {
			t.Fatalf("reservations moved back past the lease: got %d rows, want alice's", n)
		}
		for range 2 {
			if u, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, short); err != nil || u.ID != alice.ID {
				t.Fatalf("after the lease: got %+v, %v, want alice", u, err)
			}
		}
	})

	// A lookup without a limit (tests make them; the server always has one) reserves nothing
	// and deletes no other username's count: "untouched within a zero window" would be all of them.
	t.Run("NoLimitSweepsNothing", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		mustUser(t, st, "alice", store.RoleMember)
		for _, name := range []string{"bob", "carol"} {
			_, _, a, err := st.UserForSignIn(ctx, name, store.GateOn, limit)
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s: got %v, want %v", name, err, store.ErrNotFound)
			}
			if err := st.FailedAttempt(ctx, a); err != nil {
				t.Fatal(err)
			}
		}
		mustExec(t, st, `UPDATE login_attempts SET touched_at = now() - interval '1 second'`)
		if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOff, store.RateLimit{}); err != nil {
			t.Fatal(err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM login_attempts WHERE cardinality(attempts) = 1`); n != 2 {
			t.Fatalf("failed guesses counted after a lookup without a limit: got %d usernames, want 2", n)
		}
	})

	t.Run("PasswordSessionNeedsTheCheckedHash", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		alice := mustUser(t, st, "alice", store.RoleMember)
		if err := st.SetPasswordHash(ctx, alice.ID, "hash-1", ""); err != nil {
			t.Fatal(err)
		}
		_, hash, a, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit)
		if err != nil || hash != "hash-1" {
			t.Fatalf("got %q, %v, want hash-1", hash, err)
		}
		if err := st.SetPasswordHash(ctx, alice.ID, "hash-2", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := st.CreatePasswordSession(ctx, alice.ID, hash, a, time.Hour, store.GateOn); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("with a changed password: got %v, want %v", err, store.ErrNotFound)
		}
		// The password was right when checked: its check is given back all the same.
		if n := mustCount(t, st, `SELECT count(*) FROM login_attempts WHERE cardinality(pending) > 0`); n != 0 {
			t.Fatalf("checks still reserved after a changed password refused the session: got %d, want 0", n)
		}
		if _, err := st.CreatePasswordSession(ctx, alice.ID, "hash-2", a, time.Hour, store.GateOn); err != nil {
			t.Fatalf("with the stored hash: got %v, want a session", err)
		}
		// The session released the attempt: two more checks fit in the limit.
		for range 2 {
			if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit); err != nil {
				t.Fatalf("after the session: got %v, want a check", err)
			}
		}
	})

	t.Run("ReleasedWhenTheGateClosesDuringTheCheck", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		alice := mustUser(t, st, "alice", store.RoleMember)
		if err := st.SetPasswordHash(ctx, alice.ID, "hash-1", ""); err != nil {
			t.Fatal(err)
		}
		setState := func(state string) { mustExec(t, st, `UPDATE bootstrap_state SET state = $1`, state) }
		// Each round: a right password checked while the operator resets the claim. The
		// sign-in is refused, and its check is given back, however many rounds there are.
		for round := range 2 * limit.Max {
			_, hash, a, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit)
			if err != nil {
				t.Fatalf("round %d: got %v, want a check", round, err)
			}
			setState("pending")
			if _, err := st.CreatePasswordSession(ctx, alice.ID, hash, a, time.Hour, store.GateOn); !errors.Is(err, store.ErrBootstrapPending) {
				t.Fatalf("round %d, reset during the check: got %v, want %v", round, err, store.ErrBootstrapPending)
			}
			setState("complete")
		}
		if n := mustCount(t, st, `SELECT count(*) FROM sessions`); n != 0 {
			t.Fatalf("got %d sessions, want none while the install was pending", n)
		}
		// Nothing was left reserved: the whole limit is there for the next checks.
		for range limit.Max {
			if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit); err != nil {
				t.Fatalf("after the refused sign-ins: got %v, want a check", err)
			}
		}
		var rl *store.RateLimitedError
		if _, _, _, err := st.UserForSignIn(ctx, "alice", store.GateOn, limit); !errors.As(err, &rl) {
			t.Fatalf("past the limit: got %v, want *RateLimitedError", err)
		}
	})

	t.Run("Rehash", func(t *testing.T) {
		st := mustStore(t)
		alice := mustUser(t, st, "alice", store.RoleMember)
		if err := st.SetPasswordHash(ctx, alice.ID, "cheap", ""); err != nil {
			t.Fatal(err)
		}
		sess, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOff)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.RehashPassword(ctx, alice.ID, "stale", "dear"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("from a stale hash: got %v, want %v", err, store.ErrNotFound)
		}
		if err := st.RehashPassword(ctx, alice.ID, "cheap", "dear"); err != nil {
			t.Fatal(err)
		}
		if _, h, _, err := st.UserForSignIn(ctx, alice.Username, store.GateOff, store.RateLimit{}); err != nil || h != "dear" {
			t.Fatalf("got %q, %v, want dear", h, err)
		}
		if _, err := st.AuthenticateSession(ctx, sess.Token); err != nil {
			t.Fatalf("the session after a rehash: got %v, want it kept", err)
		}
	})

	t.Run("Sweep", func(t *testing.T) {
		st := mustStore(t)
		short := store.RateLimit{Max: 2, Window: time.Millisecond}
		for _, name := range []string{"a", "b", "c"} {
			if _, _, _, err := st.UserForSignIn(ctx, name, store.GateOff, short); !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Millisecond)
		if _, _, _, err := st.UserForSignIn(ctx, "d", store.GateOff, short); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM login_attempts`); n != 1 {
			t.Fatalf("got %d rows after a window of quiet, want only the newest name's", n)
		}
	})
}
