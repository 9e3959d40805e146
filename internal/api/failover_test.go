package api_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestLogin_FailoverAtCommit: a password sign-in whose write after the check is cut off by
// the database going away (its connection terminated mid-statement, as a failover does, and
// no new connection admitted, so that nothing can be given back either) is no guess. With a
// limit of one failed guess, the person who then types the right password, retrying as a
// client would (after Retry-After), signs in once the database is back, instead of being
// locked out for the window. A wrong password whose count is cut off answers 503, as a right
// one would: never a 401 that was not counted.
func TestLogin_FailoverAtCommit(t *testing.T) {
	for _, tc := range []struct {
		name  string
		table string // whose write after the check is cut off
		skip  int    // writes to it let through first: the reservation's
		right bool
	}{
		{name: "RightPasswordAtTheSession", table: "sessions", skip: 0, right: true},
		{name: "WrongPasswordAtItsCount", table: "login_attempts", skip: 1, right: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := pgtest.MustDatabase(t)
			srv := apitest.NewServer(t, db, func(o *api.Options) {
				o.LoginLimit = store.RateLimit{Max: 1, Window: time.Hour}
				o.PasswordCheckWait = time.Second
			})
			srv.MustClaim(t)
			p := apitest.MustPerson(t, srv.Store, "on-call", store.RoleMember)
			password := p.Password
			if !tc.right {
				password = "not-" + p.Password
			}
			f := newDatabaseFault(t, db)
			// The write after the check waits on a lock the test holds: the sign-in stops in it.
			f.exec(t, f.db, `CREATE SEQUENCE writes`)
			f.exec(t, f.db, `CREATE FUNCTION hold_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
				IF nextval('writes') > `+strconv.Itoa(tc.skip)+` THEN PERFORM pg_advisory_xact_lock(4711); END IF;
				RETURN NEW; END $$`)
			f.exec(t, f.db, `CREATE TRIGGER hold_write BEFORE INSERT ON `+tc.table+` FOR EACH ROW EXECUTE FUNCTION hold_write()`)
			f.exec(t, f.db, `SELECT pg_advisory_lock(4711)`)

			answered := make(chan apitest.Response, 1)
			go func() {
				resp, err := srv.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": p.User.Username, "password": password}})
				if err != nil {
					t.Errorf("the sign-in in the failover: %v", err)
				}
				answered <- resp
			}()
			f.cutWaiter(t, answered)
			if resp := <-answered; resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
				t.Fatalf("the sign-in cut off at its write: got %d %s, want 503 with Retry-After", resp.Status, resp.Body)
			}
			f.restore(t)
			f.exec(t, f.reconnect(t), `DROP TRIGGER hold_write ON `+tc.table)

			deadline := time.Now().Add(30 * time.Second)
			for {
				resp := login(t, srv, p.User.Username, p.Password, nil)
				if resp.Status == http.StatusOK {
					return
				}
				wait, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
				if resp.Status != http.StatusTooManyRequests && resp.Status != http.StatusServiceUnavailable ||
					time.Now().Add(time.Duration(wait)*time.Second).After(deadline) {
					t.Fatalf("the right password after the failover: got %d %s with Retry-After %q, want 200 within 30 s (the cut-off sign-in was counted as a failed guess)",
						resp.Status, resp.Body, resp.Header.Get("Retry-After"))
				}
				select {
				case <-t.Context().Done():
					return
				case <-time.After(time.Duration(max(wait, 1)) * time.Second):
				}
			}
		})
	}
}

// databaseFault takes a test database away from its server as a failover does: the
// connections in it terminated, new ones refused, until restore.
type databaseFault struct {
	name  string
	url   string
	db    *pgx.Conn // in the database, holding the lock the server waits on
	admin *pgx.Conn // in the maintenance database
}

func newDatabaseFault(t *testing.T, dbURL string) *databaseFault {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	f := &databaseFault{name: strings.TrimPrefix(u.Path, "/"), url: dbURL}
	f.db = f.connect(t, dbURL)
	f.admin = f.connect(t, pgtest.AdminURL())
	return f
}

func (f *databaseFault) connect(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func (f *databaseFault) exec(t *testing.T, c *pgx.Conn, sql string, args ...any) {
	t.Helper()
	if _, err := c.Exec(t.Context(), sql, args...); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// cutWaiter waits until a statement of the server waits on the test's advisory lock, then
// refuses new connections to the database and terminates that statement's connection (so it
// never commits) and then every other one in the database.
func (f *databaseFault) cutWaiter(t *testing.T, answered <-chan apitest.Response) {
	t.Helper()
	var pid int
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case resp := <-answered:
			t.Fatalf("the sign-in answered %d %s with no write after its check", resp.Status, resp.Body)
		default:
		}
		err := f.admin.QueryRow(t.Context(), `SELECT pid FROM pg_stat_activity
			WHERE datname = $1 AND wait_event_type = 'Lock' AND wait_event = 'advisory' LIMIT 1`, f.name).Scan(&pid)
		if err == nil {
			break
		}
		if err != pgx.ErrNoRows || time.Now().After(deadline) {
			t.Fatalf("wait for the server's statement to wait on the lock: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.exec(t, f.admin, `ALTER DATABASE `+pgx.Identifier{f.name}.Sanitize()+` ALLOW_CONNECTIONS false`)
	f.exec(t, f.admin, `SELECT pg_terminate_backend($1, 10000)`, pid)
	f.exec(t, f.admin, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = $1`, f.name)
}

// restore admits connections to the database again.
func (f *databaseFault) restore(t *testing.T) {
	t.Helper()
	f.exec(t, f.admin, `ALTER DATABASE `+pgx.Identifier{f.name}.Sanitize()+` ALLOW_CONNECTIONS true`)
}

// reconnect returns a new connection to the database (the fault ended the old one).
func (f *databaseFault) reconnect(t *testing.T) *pgx.Conn {
	t.Helper()
	f.db = f.connect(t, f.url)
	return f.db
}
