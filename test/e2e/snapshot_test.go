package e2e

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
)

// snapshot is the people's data as the database holds it, row by row as JSON.
type snapshot struct {
	users    []string // every user, the bootstrap principal included (a claim reuses it)
	keys     []string // the people's API keys, revoked ones included, without last_used_at
	sessions []string // every session
}

// takeSnapshot reads the snapshot straight from the database.
func takeSnapshot(t *testing.T, db string) snapshot {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), db)
	if err != nil {
		t.Fatalf("connect to the database: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	rows := func(sql string) []string {
		t.Helper()
		r, err := conn.Query(t.Context(), sql)
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		return out
	}
	// last_used_at moves whenever a key is used; that is not a change to a person's data.
	// Password hashes are compared by digest, so that a failure does not print them.
	return snapshot{
		users: rows(`SELECT ((to_jsonb(u) - 'password_hash') ||
			jsonb_build_object('password_hash_md5', md5(u.password_hash)))::text FROM users u ORDER BY u.id`),
		keys: rows(`SELECT (to_jsonb(k) - 'last_used_at')::text FROM api_keys k
			JOIN users u ON u.id = k.user_id WHERE u.kind = 'human' ORDER BY k.id`),
		sessions: rows(`SELECT to_jsonb(s)::text FROM sessions s ORDER BY s.id`),
	}
}

// assertUnchanged fails the test for every difference between before and after.
func assertUnchanged(t *testing.T, before, after snapshot) {
	t.Helper()
	for _, table := range []struct {
		name          string
		before, after []string
	}{{"users", before.users, after.users}, {"api_keys", before.keys, after.keys}, {"sessions", before.sessions, after.sessions}} {
		if !slices.Equal(table.before, table.after) {
			t.Errorf("%s changed:\ngot  %q\nwant %q", table.name, table.after, table.before)
		}
	}
}
