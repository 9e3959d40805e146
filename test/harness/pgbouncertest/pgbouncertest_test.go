package pgbouncertest_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pgbouncertest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m, nil) }

// TestPooler_TransactionMode: a role unknown to PgBouncer's files signs in with SCRAM (the
// auth_query path), and one client connection's transactions go to different server
// connections: while another client holds a transaction open on the server connection the
// first one used, the first one's next statement runs on another backend.
func TestPooler_TransactionMode(t *testing.T) {
	ctx := context.Background()
	p := pgbouncertest.Start(t, pgtest.AdminURL(), pgbouncertest.Options{})
	u := p.URL(t, pgtest.MustEmptyDatabase(t))
	a, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatalf("connect through PgBouncer: %v\n%s", err, p.Log())
	}
	defer a.Close(ctx)
	b, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(ctx)
	pid := func(c *pgx.Conn) (n int32) {
		t.Helper()
		if err := c.QueryRow(ctx, "SELECT pg_backend_pid()", pgx.QueryExecModeSimpleProtocol).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	first := pid(a)
	tx, err := b.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// b's transaction takes the idle server connection a just released, or another one;
	// loop until it holds a's, so that a must move.
	held := pid(b)
	for i := 0; held != first; i++ {
		if i == 100 {
			t.Fatalf("in 100 tries, no transaction of a second client got the server connection the first had just used (%d, got %d)", first, held)
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
		first = pid(a)
		if tx, err = b.Begin(ctx); err != nil {
			t.Fatal(err)
		}
		held = pid(b)
	}
	if again := pid(a); again == first {
		t.Fatalf("got backend %d twice for one client while another client's transaction held it: not transaction pooling", again)
	}
}
