package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
)

// TestGate_SignInWaitsForClaimInFlight holds a claim's lock on the state row mid-transaction
// and checks that a gated sign-in waits for it rather than reading around it: it succeeds
// when the claim commits and is refused, having created nothing, when the claim rolls back.
func TestGate_SignInWaitsForClaimInFlight(t *testing.T) {
	ctx := context.Background()
	signIns := map[string]func(st *store.Store, u store.User) error{
		"Password": func(st *store.Store, u store.User) error {
			_, err := st.CreateSession(ctx, u.ID, time.Hour, store.GateOn)
			return err
		},
		"OIDC": func(st *store.Store, _ store.User) error {
			_, _, _, err := splitSSO(st.SignInSSO(ctx, store.SSOIdentity{Issuer: "https://idp.example.test", Subject: "s-1",
				Usernames: []string{"newcomer"}, Role: store.RoleMember}, time.Hour, store.GateOn))
			return err
		},
	}
	for name, signIn := range signIns {
		for _, commit := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/ClaimCommits", false: "/ClaimRollsBack"}[commit], func(t *testing.T) {
				st := mustStore(t)
				u := mustUser(t, st, "early", store.RoleMember)
				claim, err := st.Pool().Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer claim.Rollback(ctx) //nolint:errcheck
				if _, err := claim.Exec(ctx, `SELECT 1 FROM bootstrap_state FOR UPDATE`); err != nil {
					t.Fatal(err)
				}
				if _, err := claim.Exec(ctx, `UPDATE bootstrap_state SET state = 'complete', generation = 1`); err != nil {
					t.Fatal(err)
				}
				done := make(chan error, 1)
				go func() { done <- signIn(st, u) }()
				waitForLockWait(t, st)
				select {
				case err := <-done:
					t.Fatalf("the sign-in finished (%v) while the claim held the state row, want it to wait", err)
				default:
				}
				if commit {
					err = claim.Commit(ctx)
				} else {
					err = claim.Rollback(ctx)
				}
				if err != nil {
					t.Fatal(err)
				}
				err = <-done
				sessions := mustCount(t, st, `SELECT count(*) FROM sessions`)
				switch {
				case commit && (err != nil || sessions != 1):
					t.Fatalf("after the claim committed: got %v and %d sessions, want success and 1", err, sessions)
				case !commit && (!errors.Is(err, store.ErrBootstrapPending) || sessions != 0):
					t.Fatalf("after the claim rolled back: got %v and %d sessions, want %v and 0", err, sessions, store.ErrBootstrapPending)
				}
				if !commit && mustCount(t, st, `SELECT count(*) FROM users`) != 1 {
					t.Fatal("a refused sign-in created a user")
				}
			})
		}
	}
}

// waitForLockWait waits until some backend is waiting for a row lock on bootstrap_state.
func waitForLockWait(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		var waiting bool
		err := st.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%bootstrap_state%')`).Scan(&waiting)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if waiting {
			return
		}
	}
	t.Fatal("no sign-in waited for the claim's lock within a minute")
}
