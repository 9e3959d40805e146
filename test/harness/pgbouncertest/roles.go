package pgbouncertest

// The roles and databases a Pooler prepares, and how it takes them back.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// URL returns a URL that reaches the database at databaseURL (on the server Start was given,
// as a superuser) through PgBouncer, as a new login role with a password that may read and
// write every table of it and create tables in its schema public. It installs the pooler's
// lookup function in that database first.
func (p *Pooler) URL(tb testing.TB, databaseURL string) string {
	tb.Helper()
	role, password := "app_"+randomHex(6), randomHex(16)
	db := p.Install(tb, databaseURL)
	p.exec(p.adminURL, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, ident(role), password))
	p.roles = append(p.roles, role)
	p.exec(databaseURL, fmt.Sprintf(`GRANT pg_read_all_data, pg_write_all_data TO %[1]s;
		GRANT CREATE, USAGE ON SCHEMA public TO %[1]s;
		GRANT CONNECT, TEMPORARY ON DATABASE %[2]s TO %[1]s`, ident(role), ident(db)))
	return p.URLFor(role, password, db)
}

// URLFor returns the URL of database db through PgBouncer as role with password, for a
// role and database that exist already (the lookup function must be installed: Install).
func (p *Pooler) URLFor(role, password, db string) string {
	u := url.URL{Scheme: "postgres", User: url.UserPassword(role, password),
		Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)), Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Install creates, in the database at databaseURL (a superuser's URL), the schema pooler and
// the function pooler.user_lookup that PgBouncer's auth_query calls, as Spilo does, and
// returns the database's name.
func (p *Pooler) Install(tb testing.TB, databaseURL string) string {
	tb.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		tb.Fatalf("pgbouncertest: database URL: %v", err)
	}
	db := strings.TrimPrefix(u.Path, "/")
	p.exec(databaseURL, fmt.Sprintf(lookupSQL, ident(p.authUser)))
	p.databases = append(p.databases, databaseURL)
	return db
}

// lookupSQL is Spilo's pooler schema and lookup function.
const lookupSQL = `CREATE SCHEMA IF NOT EXISTS pooler;
CREATE OR REPLACE FUNCTION pooler.user_lookup(in i_username text, out uname text, out phash text)
RETURNS record AS $$
BEGIN
	SELECT usename, passwd FROM pg_catalog.pg_shadow WHERE usename = i_username INTO uname, phash;
	RETURN;
END;
$$ LANGUAGE plpgsql SECURITY DEFINER;
REVOKE ALL ON FUNCTION pooler.user_lookup(text) FROM public;
GRANT USAGE ON SCHEMA pooler TO %[1]s;
GRANT EXECUTE ON FUNCTION pooler.user_lookup(text) TO %[1]s;`

// cleanup stops PgBouncer, takes back what the roles hold in each database and drops them,
// and removes the files.
func (p *Pooler) cleanup() {
	p.proc.Stop(syscall.SIGTERM, 10*time.Second)
	if len(p.roles) > 0 {
		roles := make([]string, len(p.roles))
		for i, r := range p.roles {
			roles[i] = ident(r)
		}
		list := strings.Join(roles, ", ")
		for _, db := range p.databases {
			if err := execSQL(db, "DROP OWNED BY "+list); err != nil && !isGone(err) {
				p.tb.Errorf("pgbouncertest: take back the roles' privileges: %v", err)
			}
		}
		for _, r := range roles {
			if err := execSQL(p.adminURL, "DROP ROLE IF EXISTS "+r); err != nil {
				p.tb.Errorf("pgbouncertest: drop role %s: %v", r, err)
			}
		}
	}
	if err := os.RemoveAll(p.dir); err != nil {
		p.tb.Errorf("pgbouncertest: %v", err)
	}
}

// exec runs sql on the database at u, failing the test on an error.
func (p *Pooler) exec(u, sql string) {
	p.tb.Helper()
	if err := execSQL(u, sql); err != nil {
		p.tb.Fatalf("pgbouncertest: %v", err)
	}
}

func execSQL(u, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	return err
}

// isGone reports whether err says the database no longer exists (the test dropped it).
func isGone(err error) bool {
	return strings.Contains(err.Error(), "SQLSTATE 3D000")
}

// findPgBouncer returns the path of pgbouncer, or an error that says how to install it.
func findPgBouncer() (string, error) {
	if p, err := exec.LookPath("pgbouncer"); err == nil {
		return p, nil
	}
	const debian = "/usr/sbin/pgbouncer"
	if _, err := os.Stat(debian); err == nil {
		return debian, nil
	}
	return "", errors.New("pgbouncertest: pgbouncer is not installed: run scripts/ensure-pgbouncer.sh (as root it installs Debian's pgbouncer; otherwise it says how)")
}

// postgresUser returns the credential of the system user postgres when running as root
// (PgBouncer refuses to run as root), and nil otherwise.
func postgresUser() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgbouncertest: running as root, so PgBouncer must run as the system user postgres: %w", err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }
