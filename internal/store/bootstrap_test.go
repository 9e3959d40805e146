package store_test

import (
	"context"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

var cli = store.AuditInfo{Actor: store.ActorCLI}

func TestBootstrap_Claim(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		res := mustClaim(t, st)
		p := res.Principal
		if p.Username != store.PrincipalUsername || p.Email != store.PrincipalEmail || p.Role != store.RoleAdmin ||
			p.Kind != store.KindService || p.HasPassword || p.OIDCSubject != "" {
			t.Fatalf("principal: got %+v, want an admin machine user %s with no password or OIDC identity", p, store.PrincipalUsername)
		}
		if res.Generation != 1 || res.Key.UserID != p.ID || len(res.Secret) != 64 {
			t.Fatalf("claim: got generation %d, key of user %d, secret of %d characters; want 1, %d, 64",
				res.Generation, res.Key.UserID, len(res.Secret), p.ID)
		}
		u, err := st.AuthenticateAPIKey(ctx, res.Secret)
		if err != nil || u.ID != p.ID {
			t.Fatalf("authenticate with the claim's key: got %+v, %v, want user %d", u, err, p.ID)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StateComplete || b.Generation != 1 || b.PrincipalID == nil || *b.PrincipalID != p.ID || b.LastClaimAt == nil {
			t.Fatalf("state: got %+v, want complete, generation 1, principal %d", b, p.ID)
		}
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := audit[len(audit)-1]
		if last.Action != "claim" || last.Actor != store.ActorOperator || last.RemoteAddr != "192.0.2.1" ||
			last.Generation != 1 || last.State != store.StateComplete {
			t.Fatalf("audit: got %+v, want a claim by the operator from 192.0.2.1 at generation 1", last)
		}
	})

	t.Run("ErrAlreadyClaimed", func(t *testing.T) {
		st := mustStore(t)
		first := mustClaim(t, st)
		_, err := st.Claim(ctx, cli)
		if !errors.Is(err, store.ErrAlreadyClaimed) {
			t.Fatalf("second claim: got %v, want %v", err, store.ErrAlreadyClaimed)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.Generation != 1 {
			t.Fatalf("generation after a refused claim: got %d, want 1", b.Generation)
		}
		if _, err := st.AuthenticateAPIKey(ctx, first.Secret); err != nil {
			t.Fatalf("first claim's key after a refused claim: got %v, want nil", err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys`); n != 1 {
			t.Fatalf("API keys: got %d, want 1", n)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM bootstrap_audit WHERE action = 'claim'`); n != 1 {
			t.Fatalf("claim audit rows: got %d, want 1", n)
		}
	})

	t.Run("ClaimResetClaim", func(t *testing.T) {
		st := mustStore(t)
		first := mustClaim(t, st)
		if _, err := st.Reset(ctx, cli, store.RateLimit{}); err != nil {
			t.Fatal(err)
		}
		second := mustClaim(t, st)
		if second.Principal.ID != first.Principal.ID {
			t.Fatalf("principal of the second claim: got %d, want %d (reused)", second.Principal.ID, first.Principal.ID)
		}
		if second.Generation != 2 {
			t.Fatalf("generation: got %d, want 2", second.Generation)
		}
		if _, err := st.AuthenticateAPIKey(ctx, first.Secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("old key: got %v, want %v", err, store.ErrNotFound)
		}
		if _, err := st.AuthenticateAPIKey(ctx, second.Secret); err != nil {
			t.Fatalf("new key: got %v, want nil", err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users WHERE username = $1`, store.PrincipalUsername); n != 1 {
			t.Fatalf("principals: got %d, want 1", n)
		}
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, a := range audit {
			got = append(got, a.Action)
		}
		if want := []string{"backfill", "claim", "reset", "claim"}; !reflect.DeepEqual(got, want) {
			t.Fatalf("audit: got %v, want %v", got, want)
		}
	})

	t.Run("PrincipalDeletedOutsideTheAPI", func(t *testing.T) {
		// principal_id is ON DELETE SET NULL: a principal removed by hand is recreated.
		st := mustStore(t)
		first := mustClaim(t, st)
		if _, err := st.Reset(ctx, cli, store.RateLimit{}); err != nil {
			t.Fatal(err)
		}
		mustExec(t, st, `DELETE FROM users WHERE id = $1`, first.Principal.ID)
		second := mustClaim(t, st)
		if second.Principal.ID == first.Principal.ID || second.Principal.Kind != store.KindService {
			t.Fatalf("principal: got %+v, want a new machine user", second.Principal)
		}
	})
}

// userData is everything stored about a set of users, for before/after comparisons.
type userData struct {
	Users, Keys, Sessions [][]any
}

func snapshotOthers(tb testing.TB, st *store.Store, principalID int64) userData {
	tb.Helper()
	rows := func(sql string) [][]any {
		r, err := st.Pool().Query(context.Background(), sql, principalID)
		if err != nil {
			tb.Fatal(err)
		}
		defer r.Close()
		var out [][]any
		for r.Next() {
			v, err := r.Values()
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, v)
		}
		if err := r.Err(); err != nil {
			tb.Fatal(err)
		}
		return out
	}
	return userData{
		Users:    rows(`SELECT * FROM users WHERE id <> $1 ORDER BY id`),
		Keys:     rows(`SELECT * FROM api_keys WHERE user_id <> $1 ORDER BY id`),
		Sessions: rows(`SELECT * FROM sessions WHERE user_id <> $1 ORDER BY id`),
	}
}

func TestBootstrap_Reset(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		claim := mustClaim(t, st)
		pid := claim.Principal.ID
		if _, err := st.CreateSession(ctx, pid, time.Hour, store.GateOn); err != nil {
			t.Fatal(err)
		}
		// Other people, with keys (one already revoked), sessions and passwords.
		var secrets []string
		for _, name := range []string{"alice", "bob"} {
			u := mustUser(t, st, name, store.RoleAdmin)
			if err := st.SetPasswordHash(ctx, u.ID, "hash-of-"+name, ""); err != nil {
				t.Fatal(err)
			}
			_, secret := mustKey(t, st, u.ID)
			secrets = append(secrets, secret)
			revoked, _ := mustKey(t, st, u.ID)
			if err := st.RevokeAPIKey(ctx, u.ID, revoked.ID); err != nil {
				t.Fatal(err)
			}
			if _, err := st.CreateSession(ctx, u.ID, time.Hour, store.GateOn); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshotOthers(t, st, pid)

		res, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorOperator, RemoteAddr: "192.0.2.9"}, store.RateLimit{})
		if err != nil {
			t.Fatal(err)
		}
		if res.Generation != 1 || res.RevokedAPIKeys != 1 || res.RevokedSessions != 1 {
			t.Fatalf("reset: got %+v, want generation 1, 1 key and 1 session revoked", res)
		}
		if after := snapshotOthers(t, st, pid); !reflect.DeepEqual(after, before) {
			t.Fatalf("other users' data after reset:\ngot  %v\nwant %v", after, before)
		}
		for _, s := range secrets {
			if _, err := st.AuthenticateAPIKey(ctx, s); err != nil {
				t.Fatalf("another user's key after reset: got %v, want nil", err)
			}
		}
		if _, err := st.AuthenticateAPIKey(ctx, claim.Secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("principal's key after reset: got %v, want %v", err, store.ErrNotFound)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL`, pid); n != 0 {
			t.Fatalf("principal's live sessions: got %d, want 0", n)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users WHERE id = $1`, pid); n != 1 {
			t.Fatalf("principal rows: got %d, want 1 (kept for the next claim)", n)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != store.StatePending || b.Generation != 1 || b.LastResetAt == nil {
			t.Fatalf("state: got %+v, want pending at generation 1 with a reset time", b)
		}
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := audit[len(audit)-1]
		if last.Action != "reset" || last.Actor != store.ActorOperator || last.RemoteAddr != "192.0.2.9" || last.State != store.StatePending {
			t.Fatalf("audit: got %+v, want a reset by the operator from 192.0.2.9", last)
		}
	})

	t.Run("Pending", func(t *testing.T) {
		st := mustStore(t)
		alice := mustUser(t, st, "alice", store.RoleMember)
		mustKey(t, st, alice.ID)
		for i := range 2 {
			res, err := st.Reset(ctx, cli, store.RateLimit{})
			if err != nil || res.RevokedAPIKeys != 0 || res.RevokedSessions != 0 || res.Generation != 0 {
				t.Fatalf("reset %d while pending: got %+v, %v, want nothing revoked at generation 0", i, res, err)
			}
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE revoked_at IS NULL`); n != 1 {
			t.Fatalf("live keys: got %d, want 1", n)
		}
	})

	t.Run("RateLimited", func(t *testing.T) {
		st := mustStore(t)
		limit := store.RateLimit{Max: 2, Window: time.Hour}
		for i := range limit.Max {
			if _, err := st.Reset(ctx, cli, limit); err != nil {
				t.Fatalf("reset %d: got %v, want nil", i, err)
			}
		}
		_, err := st.Reset(ctx, cli, limit)
		var rl *store.RateLimitedError
		if !errors.As(err, &rl) {
			t.Fatalf("reset past the limit: got %v, want *store.RateLimitedError", err)
		}
		if rl.RetryAfter <= 0 || rl.RetryAfter > limit.Window {
			t.Fatalf("RetryAfter: got %v, want in (0, %v]", rl.RetryAfter, limit.Window)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM bootstrap_audit WHERE action = 'reset'`); n != limit.Max {
			t.Fatalf("reset audit rows: got %d, want %d (the refused one leaves none)", n, limit.Max)
		}
		// Resets older than the window no longer count. (The audit is append-only, so move
		// the clock instead: the window is measured from now().)
		if _, err := st.Reset(ctx, cli, store.RateLimit{Max: 2, Window: time.Nanosecond}); err != nil {
			t.Fatalf("reset with the earlier resets outside the window: got %v, want nil", err)
		}
	})
}

// TestClaim_PrincipalNameHeldByAPerson: a person already holding the principal's name in
// another case (possible only in data from before the name was reserved) makes the claim a
// clear conflict, not an internal error, and changes nothing.
func TestClaim_PrincipalNameHeldByAPerson(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	if _, err := st.CreateUser(ctx, store.NewUser{Username: "Terdut-Operator-Bootstrap"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CreateUser with the reserved name in another case: got %v, want %v", err, store.ErrConflict)
	}
	mustExecMarked(t, st, `INSERT INTO users (username, kind) VALUES ('TERDUT-OPERATOR-BOOTSTRAP', 'human')`)
	if _, err := st.Claim(ctx, store.AuditInfo{Actor: store.ActorCLI}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("claim: got %v, want %v", err, store.ErrConflict)
	}
	b, err := st.Bootstrap(ctx)
	if err != nil || b.State != store.StatePending || b.Generation != 0 {
		t.Fatalf("after the refused claim: got %+v, %v, want pending at generation 0", b, err)
	}
}
