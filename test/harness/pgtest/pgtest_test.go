package pgtest

import (
	"context"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		helperMain(mode) // a child of TestReaper_RemovesContainers; never returns
	}
	Main(m, func(ctx context.Context, url string) error {
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, "CREATE TABLE widgets (id int PRIMARY KEY, name text NOT NULL)")
		return err
	})
}

// connect opens a connection that is closed when t finishes.
func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func countWidgets(t *testing.T, conn *pgx.Conn) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM widgets").Scan(&n); err != nil {
		t.Fatalf("count widgets: %v", err)
	}
	return n
}

// databaseExists reports whether the database of url exists on the server.
func databaseExists(t *testing.T, url string) bool {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	var exists bool
	err = connect(t, AdminURL()).QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", cfg.Database).Scan(&exists)
	if err != nil {
		t.Fatal(err)
	}
	return exists
}

func TestDatabasesAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := MustDatabase(t), MustDatabase(t)
	if a == b {
		t.Fatalf("MustDatabase returned the same URL twice: %s", a)
	}
	ca, cb := connect(t, a), connect(t, b)
	if _, err := ca.Exec(context.Background(), "INSERT INTO widgets VALUES (1, 'a')"); err != nil {
		t.Fatal(err)
	}
	if n := countWidgets(t, ca); n != 1 {
		t.Errorf("first database has %d widgets, want 1", n)
	}
	if n := countWidgets(t, cb); n != 0 {
		t.Errorf("second database has %d widgets, want 0", n)
	}
}

func TestCleanupDropsDatabase(t *testing.T) {
	t.Parallel()
	var url string
	t.Run("inner", func(t *testing.T) {
		url = MustDatabase(t)
		connect(t, url) // an open connection must not prevent the drop
		if !databaseExists(t, url) {
			t.Fatal("database does not exist right after MustDatabase")
		}
	})
	if databaseExists(t, url) {
		t.Errorf("database %s still exists after its test finished", url)
	}
}

func TestMustEmptyDatabaseHasNoTables(t *testing.T) {
	t.Parallel()
	var n int
	err := connect(t, MustEmptyDatabase(t)).QueryRow(context.Background(),
		"SELECT count(*) FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema')").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("empty database has %d tables, want 0", n)
	}
}

func TestManyParallelClones(t *testing.T) {
	for i := range 8 {
		t.Run("clone", func(t *testing.T) {
			t.Parallel()
			conn := connect(t, MustDatabase(t))
			if _, err := conn.Exec(context.Background(), "INSERT INTO widgets VALUES ($1, 'x')", i); err != nil {
				t.Fatal(err)
			}
		})
	}
}
