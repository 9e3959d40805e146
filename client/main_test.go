package client_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}

// newServer starts one real API instance on a fresh database; mutate adjusts its options.
func newServer(t *testing.T, mutate func(*api.Options)) *apitest.Server {
	t.Helper()
	return apitest.NewServer(t, pgtest.MustDatabase(t), mutate)
}

// mustClient returns a client of the server at baseURL.
func mustClient(t *testing.T, baseURL string, opts ...client.Option) *client.Client {
	t.Helper()
	c, err := client.New(baseURL, opts...)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

// operator returns a client of srv holding the operator token the server accepts.
func operator(t *testing.T, srv *apitest.Server) *client.Client {
	t.Helper()
	return mustClient(t, srv.URL, client.WithOperatorToken(apitest.OperatorToken))
}

// mustDropDatabase drops the database at dbURL under a running server, so that every query
// of the server fails from now on.
func mustDropDatabase(t *testing.T, dbURL string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(t.Context(), pgtest.AdminURL())
	if err != nil {
		t.Fatalf("connect as admin: %v", err)
	}
	defer conn.Close(context.WithoutCancel(t.Context()))
	name := pgx.Identifier{strings.TrimPrefix(u.Path, "/")}.Sanitize()
	if _, err := conn.Exec(t.Context(), "DROP DATABASE "+name+" WITH (FORCE)"); err != nil {
		t.Fatalf("drop database: %v", err)
	}
}

// mustClaim claims the install through c and returns the claim.
func mustClaim(t *testing.T, c *client.Client) client.Claim {
	t.Helper()
	cl, err := c.Claim(t.Context())
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return cl
}

// mustCheckKey returns whether key works, failing the test if the check itself fails.
func mustCheckKey(t *testing.T, c *client.Client, key string) bool {
	t.Helper()
	ok, err := c.CheckKey(t.Context(), key)
	if err != nil {
		t.Fatalf("check key: %v", err)
	}
	return ok
}

// mustStatus returns the claim state.
func mustStatus(t *testing.T, c *client.Client) client.Status {
	t.Helper()
	st, err := c.Status(t.Context())
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return st
}
