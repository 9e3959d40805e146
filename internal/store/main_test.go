package store_test

import (
	"context"
	"os"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) {
	if url := os.Getenv(envHolder); url != "" {
		runHolder(url)
	}
	pgtest.Main(m, store.MigrateUp)
}

// mustStore opens a store on a fresh, migrated database.
func mustStore(tb testing.TB) *store.Store {
	tb.Helper()
	return mustOpen(tb, pgtest.MustDatabase(tb))
}

// mustOpen opens a store on the database at url and closes it when tb ends.
func mustOpen(tb testing.TB, url string) *store.Store {
	tb.Helper()
	return apitest.OpenStore(tb, url)
}

// mustUser creates a human user with the given role.
func mustUser(tb testing.TB, st *store.Store, username string, role store.Role) store.User {
	tb.Helper()
	u, err := st.CreateUser(context.Background(), store.NewUser{Username: username, Email: username + "@example.test", Role: role})
	if err != nil {
		tb.Fatalf("create user %s: %v", username, err)
	}
	return u
}

// mustKey issues an API key for the user and returns its secret.
func mustKey(tb testing.TB, st *store.Store, userID int64) (store.APIKey, string) {
	tb.Helper()
	k, secret, err := st.CreateAPIKey(context.Background(), userID, "test")
	if err != nil {
		tb.Fatalf("create API key for user %d: %v", userID, err)
	}
	return k, secret
}

// mustClaim claims the install as the operator.
func mustClaim(tb testing.TB, st *store.Store) store.ClaimResult {
	tb.Helper()
	res, err := st.Claim(context.Background(), store.AuditInfo{Actor: store.ActorOperator, RemoteAddr: "192.0.2.1"})
	if err != nil {
		tb.Fatalf("claim: %v", err)
	}
	return res
}

// mustExec runs a statement directly on the store's pool.
func mustExec(tb testing.TB, st *store.Store, sql string, args ...any) int64 {
	tb.Helper()
	tag, err := st.Pool().Exec(context.Background(), sql, args...)
	if err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
	return tag.RowsAffected()
}

// mustExecMarked is mustExec in a transaction marked as this version's, which decides the
// gate itself (see migration 00010): how fixtures add rows to users and sessions while pending.
func mustExecMarked(tb testing.TB, st *store.Store, sql string, args ...any) int64 {
	tb.Helper()
	ctx := context.Background()
	tx, err := st.Pool().Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // a no-op after Commit
	if _, err := tx.Exec(ctx, `SELECT set_config('terdut.gate', 'checked', true)`); err != nil {
		tb.Fatal(err)
	}
	tag, err := tx.Exec(ctx, sql, args...)
	if err != nil {
		tb.Fatalf("exec %q: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		tb.Fatal(err)
	}
	return tag.RowsAffected()
}

// mustCount returns the result of a count(*) query.
func mustCount(tb testing.TB, st *store.Store, sql string, args ...any) int {
	tb.Helper()
	var n int
	if err := st.Pool().QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		tb.Fatalf("query %q: %v", sql, err)
	}
	return n
}

// splitSSO spreads SignInSSO's answer into the user, the session and whether it was created.
func splitSSO(si store.SSOSignIn, err error) (store.User, store.Session, bool, error) {
	return si.User, si.Session, si.Created, err
}
