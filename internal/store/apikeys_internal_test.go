package store

import (
	"bytes"
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
	for mode, want := range map[pgx.QueryExecMode]string{
		pgx.QueryExecModeCacheStatement: authenticateAPIKeySQL,
		pgx.QueryExecModeCacheDescribe:  apiKeyOwnerSQL,
		pgx.QueryExecModeDescribeExec:   apiKeyOwnerSQL,
		pgx.QueryExecModeExec:           apiKeyOwnerSQL,
		pgx.QueryExecModeSimpleProtocol: apiKeyOwnerSQL,
	} {
		if got := apiKeyStatement(mode); got != want {
			t.Errorf("mode %v: got %q, want %q", mode, got, want)
		}
	}
}
