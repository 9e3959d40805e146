package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// What a replica of a version before the gate runs, as the pre-gate code wrote it: a person
// provisioned at their first single sign-on (createSSOUser with no regard for the claim), a
// session for them, and the old claim's principal (decided by SELECT count(*) FROM users).
var olderReplicaInserts = []struct{ name, sql string }{
	{"SSOProvisioning", `INSERT INTO users (username, email, role, kind, oidc_issuer, oidc_subject)
		VALUES ('early-bird', 'early@example.test', 'admin', 'human', 'https://idp.example.test', 'early')`},
	{"OldClaim", `INSERT INTO users (username, email, role, kind)
		SELECT 'terdut-operator-bootstrap', 'bootstrap@terdut-operator.local', 'admin', 'service'
		WHERE (SELECT count(*) FROM users) = 0`},
}

// olderSession is the pre-gate code's session insert, for the user named.
const olderSession = `INSERT INTO sessions (user_id, token_hash, expires_at)
	SELECT id, sha256(random()::text::bytea), now() + interval '12 hours' FROM users WHERE username = $1`

// wantRefusedByGate fails unless err is the database's refusal of an ungated insert.
func wantRefusedByGate(t *testing.T, what string, err error) {
	t.Helper()
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "42501" {
		t.Fatalf("%s while pending: got %v, want the gate's refusal (SQLSTATE 42501)", what, err)
	}
}

// TestGate_OlderReplicas: during a rolling upgrade from a version without the gate, the older
// replicas' plain INSERTs into users and sessions are refused by the database while the install
// is pending (new, or reset), and accepted once it is claimed; this version's own paths, which
// decide the gate themselves, work while pending as before.
func TestGate_OlderReplicas(t *testing.T) {
	ctx := context.Background()

	t.Run("UpgradeOfAnEmptyInstall", func(t *testing.T) {
		// Before migration 00010 an older replica's insert went through while pending: the bypass.
		url := pgtest.MustEmptyDatabase(t)
		p := mustGoose(t, url)
		mustMigrateTo(t, p, 7)
		st := mustOpen(t, url)
		if b, err := st.Bootstrap(ctx); err != nil || b.State != store.StatePending {
			t.Fatalf("after the gate's migration: got %+v, %v, want pending", b, err)
		}
		if _, err := st.Pool().Exec(ctx, olderReplicaInserts[0].sql); err != nil {
			t.Fatalf("an older replica's insert before 00010: got %v, want it to go through (the bypass this closes)", err)
		}
		mustExec(t, st, `DELETE FROM users`)
		if _, err := store.Migrate(ctx, url); err != nil {
			t.Fatal(err)
		}
		for _, ins := range olderReplicaInserts {
			_, err := st.Pool().Exec(ctx, ins.sql)
			wantRefusedByGate(t, ins.name, err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users`); n != 0 {
			t.Fatalf("users after the older replica's inserts: got %d, want 0", n)
		}
		// The operator's claim, through this version, still goes through while pending.
		mustClaim(t, st)
	})

	t.Run("PendingAfterReset", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		mustUser(t, st, "ada", store.RoleMember)
		if _, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{}); err != nil {
			t.Fatal(err)
		}
		_, err := st.Pool().Exec(ctx, olderSession, "ada")
		wantRefusedByGate(t, "an older replica's session", err)
		// (The old claim inserts nothing here: users exist, so it refuses by its own rule.)
		_, err = st.Pool().Exec(ctx, olderReplicaInserts[0].sql)
		wantRefusedByGate(t, olderReplicaInserts[0].name, err)
		if n := mustCount(t, st, `SELECT count(*) FROM sessions`); n != 0 {
			t.Fatalf("sessions: got %d, want 0", n)
		}
	})

	t.Run("AcceptedOnceClaimed", func(t *testing.T) {
		// An install claimed under the old rule keeps being served by older replicas.
		st := mustStore(t)
		mustClaim(t, st)
		if _, err := st.Pool().Exec(ctx, olderReplicaInserts[0].sql); err != nil {
			t.Fatalf("an older replica's provisioning once claimed: got %v, want nil", err)
		}
		if tag, err := st.Pool().Exec(ctx, olderSession, "early-bird"); err != nil || tag.RowsAffected() != 1 {
			t.Fatalf("an older replica's session once claimed: got %v, %v, want one row", tag, err)
		}
	})

	t.Run("ThisVersionWhilePending", func(t *testing.T) {
		// With the gate off people sign in while pending, and an admin may add people after a
		// reset: this version's inserts carry the marker and are not refused.
		st := mustStore(t)
		ada := mustUser(t, st, "ada", store.RoleMember)
		if _, err := st.CreateSession(ctx, ada.ID, time.Hour, store.GateOff); err != nil {
			t.Fatalf("CreateSession with the gate off while pending: got %v, want nil", err)
		}
		if _, _, created, err := splitSSO(st.SignInSSO(ctx, store.SSOIdentity{Issuer: "https://idp.example.test", Subject: "sam",
			Usernames: []string{"sam"}, Role: store.RoleMember}, time.Hour, store.GateOff)); err != nil || !created {
			t.Fatalf("SignInSSO with the gate off while pending: got created %v, %v, want a new user", created, err)
		}
		if _, err := st.CreateSession(ctx, ada.ID, time.Hour, store.GateOn); !errors.Is(err, store.ErrBootstrapPending) {
			t.Fatalf("CreateSession with the gate on while pending: got %v, want %v", err, store.ErrBootstrapPending)
		}
		// The marker is local to its transaction: a plain insert after it on the same
		// connection is refused again.
		conn, err := st.Pool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(ctx, `SELECT set_config('terdut.gate', 'checked', true)`); err != nil {
			t.Fatal(err)
		}
		_, err = conn.Exec(ctx, olderSession, "ada")
		wantRefusedByGate(t, "a plain insert after a marked transaction on its connection", err)
	})
}
