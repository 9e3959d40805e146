package main

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_WarnsOfSchemaWriters: a server whose schema only its own role may create in starts
// without a word about it; once every role may (PostgreSQL 14's default for public), each start
// says so at WARN, with the fix, and still serves.
func TestServe_WarnsOfSchemaWriters(t *testing.T) {
	const warning = "SECURITY: other database roles may create objects where terdut-server keeps its own"
	dbURL := pgtest.MustEmptyDatabase(t)
	e := env{"TERDUT_DATABASE_URL": dbURL}
	srv := startServe(t, e)
	if err := srv.stop(); err != nil {
		t.Fatal(err)
	}
	mustNotContain(t, "stderr of a server alone in its schema", srv.Stderr.String(), warning)

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `GRANT CREATE ON SCHEMA public TO PUBLIC`); err != nil {
		t.Fatal(err)
	}
	srv = startServe(t, e)
	mustContain(t, "stderr of a server whose schema every role may create in", srv.Stderr.String(),
		warning, `"level":"WARN"`, "every role (PUBLIC) may create in schema public",
		`REVOKE CREATE ON SCHEMA \"public\" FROM PUBLIC`)
}
