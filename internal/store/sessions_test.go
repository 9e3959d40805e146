package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestSessions_Create(t *testing.T) {
	ctx := context.Background()

	t.Run("ErrBootstrapPending", func(t *testing.T) {
		st := mustStore(t)
		alice := mustUser(t, st, "alice", store.RoleMember)
		_, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOn)
		if !errors.Is(err, store.ErrBootstrapPending) {
			t.Fatalf("got %v, want %v", err, store.ErrBootstrapPending)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM sessions`); n != 0 {
			t.Fatalf("sessions: got %d, want 0", n)
		}
	})

	t.Run("GateOff", func(t *testing.T) {
		st := mustStore(t)
		alice := mustUser(t, st, "alice", store.RoleMember)
		sess, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOff)
		if err != nil {
			t.Fatalf("pending with the gate off: got %v, want nil", err)
		}
		if u, err := st.AuthenticateSession(ctx, sess.Token); err != nil || u.ID != alice.ID {
			t.Fatalf("AuthenticateSession: got %+v, %v, want alice", u, err)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil || b.State != store.StatePending {
			t.Fatalf("claim state after a sign-in: got %+v, %v, want pending", b, err)
		}
	})

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		alice := mustUser(t, st, "alice", store.RoleMember)
		sess, err := st.CreateSession(ctx, alice.ID, 90*time.Minute, store.GateOn)
		if err != nil {
			t.Fatal(err)
		}
		if len(sess.Token) != 64 || sess.UserID != alice.ID {
			t.Fatalf("got %+v, want alice's session with a 64-character token", sess)
		}
		if d := time.Until(sess.ExpiresAt); d < 89*time.Minute || d > 91*time.Minute {
			t.Fatalf("expires in: got %v, want about 90m", d)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM sessions s WHERE strpos(s::text, $1) > 0`, sess.Token); n != 0 {
			t.Fatalf("rows holding the token in clear: got %d, want 0", n)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		if _, err := st.CreateSession(ctx, 424242, time.Hour, store.GateOn); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("session for an unknown user: got %v, want %v", err, store.ErrNotFound)
		}
	})
}

func TestSessions_End(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	mustClaim(t, st)
	alice := mustUser(t, st, "alice", store.RoleMember)
	newSession := func(t *testing.T) store.Session {
		t.Helper()
		sess, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOn)
		if err != nil {
			t.Fatal(err)
		}
		return sess
	}

	t.Run("SignOut", func(t *testing.T) {
		sess, other := newSession(t), newSession(t)
		if err := st.EndSession(ctx, sess.Token); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AuthenticateSession(ctx, sess.Token); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ended session: got %v, want %v", err, store.ErrNotFound)
		}
		if _, err := st.AuthenticateSession(ctx, other.Token); err != nil {
			t.Fatalf("another session of the same user: got %v, want nil", err)
		}
		if err := st.EndSession(ctx, sess.Token); err != nil {
			t.Fatalf("ending it again: got %v, want nil", err)
		}
	})

	t.Run("Expired", func(t *testing.T) {
		sess := newSession(t)
		if n := mustExec(t, st, `UPDATE sessions SET expires_at = now() - interval '1 second'
			WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, sess.Token); n != 1 {
			t.Fatalf("sessions expired: got %d, want 1", n)
		}
		if _, err := st.AuthenticateSession(ctx, sess.Token); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired session: got %v, want %v", err, store.ErrNotFound)
		}
	})
}
