package store

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestAPIKeyRow_HashAndClear: the pooled row hashes a secret as hashToken does, at every
// length, and keeps nothing of it, or of the person, once cleared for the pool.
func TestAPIKeyRow_HashAndClear(t *testing.T) {
	for _, secret := range []string{"", "a", strings.Repeat("f", 64), strings.Repeat("f", 65), strings.Repeat("x", 300)} {
		row := new(apiKeyRow)
		if got, want := row.hashOf(secret), hashToken(secret); !bytes.Equal(got, want) {
			t.Fatalf("hashOf(%d bytes) = %x, want %x", len(secret), got, want)
		}
		row.u.Username, row.role, row.issuer.String = "someone", "admin", "https://idp.example"
		row.clear()
		if *row != (apiKeyRow{}) {
			t.Fatalf("a cleared row kept %+v", *row)
		}
	}
}

// TestAPIKeyStatement: the lookup is the prepared statement only where pgx caches statements;
// in every other mode, the function, whose plan the server connection keeps.
func TestAPIKeyStatement(t *testing.T) {
	for mode, want := range map[pgx.QueryExecMode]bool{
		pgx.QueryExecModeCacheStatement: false,
		pgx.QueryExecModeCacheDescribe:  true,
		pgx.QueryExecModeDescribeExec:   true,
		pgx.QueryExecModeExec:           true,
		pgx.QueryExecModeSimpleProtocol: true,
	} {
		if got := apiKeyStatement(mode); got != want {
			t.Errorf("mode %v: calls the function %v, want %v", mode, got, want)
		}
	}
}

// TestAPIKeyOwnerCall: the call names the schema, quoted, and types its argument, so that no
// overload of another role's, in that schema or another, can be chosen for it.
func TestAPIKeyOwnerCall(t *testing.T) {
	for schema, want := range map[string]string{
		"public":     `SELECT * FROM "public".api_key_owner($1::bytea)`,
		`Odd "name"`: `SELECT * FROM "Odd ""name""".api_key_owner($1::bytea)`,
	} {
		if got := fmt.Sprintf(apiKeyOwnerCall, pgx.Identifier{schema}.Sanitize()); got != want {
			t.Errorf("schema %q: got %s, want %s", schema, got, want)
		}
	}
}
