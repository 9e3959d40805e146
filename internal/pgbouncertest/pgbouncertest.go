// Package pgbouncertest runs a real PgBouncer on 127.0.0.1, on a free port, in front of a
// given Postgres server, configured as Zalando's postgres-operator configures its connection
// pooler: pool_mode = transaction, SCRAM logins, and auth_user with auth_query = SELECT * FROM
// pooler.user_lookup($1), a SECURITY DEFINER function in each database (as Spilo installs it)
// that reads the password verifiers, so that the application's role needs no entry in
// PgBouncer's own files. The test's Cleanup stops PgBouncer, drops the roles it created and
// removes its files.
//
// PgBouncer refuses to run as root: as root, it runs as the system user postgres.
package pgbouncertest

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
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/proctest"
)

// hangBound bounds each wait of the harness: a bound on a hang on a busy machine, never a
// measure of speed.
const hangBound = time.Minute

// Options are the settings of a Pooler that tests vary.
type Options struct {
	// Mode is PgBouncer's pool_mode (default "transaction", the operator's default).
	Mode string
	// PoolSize is default_pool_size: server connections per database and role (default 20).
	PoolSize int
}

// Pooler is a running PgBouncer.
type Pooler struct {
	// Port is where PgBouncer listens, on 127.0.0.1.
	Port int

	tb        testing.TB
	adminURL  string // the upstream superuser's URL
	authUser  string // PgBouncer's auth_user, as the operator's "pooler" role
	dir       string
	proc      *proctest.Proc
	roles     []string // created by this Pooler, dropped at Cleanup
	databases []string // where the lookup function was installed
}

// Start starts PgBouncer in front of the server adminURL (a superuser's URL) reaches. It
// creates the auth_user role there and registers the cleanup with tb. It fails tb when
// pgbouncer is not installed, saying how to install it.
func Start(tb testing.TB, adminURL string, opts Options) *Pooler {
	tb.Helper()
	if opts.Mode == "" {
		opts.Mode = "transaction"
	}
	if opts.PoolSize == 0 {
		opts.PoolSize = 20
	}
	bin, err := findPgBouncer()
	if err != nil {
		tb.Fatal(err)
	}
	u, err := url.Parse(adminURL)
	if err != nil || u.Hostname() == "" {
		tb.Fatalf("pgbouncertest: the admin URL must be postgres://user@host:port/db")
	}
	upPort := u.Port()
	if upPort == "" {
		upPort = "5432"
	}
	p := &Pooler{tb: tb, adminURL: adminURL, authUser: "pooler_" + randomHex(6)}
	runAs, err := postgresUser()
	if err != nil {
		tb.Fatal(err)
	}
	if p.dir, err = os.MkdirTemp("", "pgbouncertest-"); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.cleanup)
	if runAs != nil {
		if err := os.Chown(p.dir, int(runAs.Uid), int(runAs.Gid)); err != nil {
			tb.Fatalf("pgbouncertest: %v", err)
		}
	}
	password := randomHex(16)
	p.exec(adminURL, fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, ident(p.authUser), password))
	p.roles = append(p.roles, p.authUser)

	ports, err := proctest.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	p.Port = ports[0]
	ini := fmt.Sprintf(iniTemplate, u.Hostname(), upPort, p.authUser, opts.Mode, p.Port,
		filepath.Join(p.dir, "auth_file.txt"), p.authUser, p.authUser, opts.PoolSize, opts.PoolSize+authPool)
	files := map[string]string{
		"pgbouncer.ini": ini,
		"auth_file.txt": fmt.Sprintf("%q %q\n", p.authUser, password),
	}
	for name, body := range files {
		path := filepath.Join(p.dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			tb.Fatal(err)
		}
		if runAs != nil {
			if err := os.Chown(path, int(runAs.Uid), int(runAs.Gid)); err != nil {
				tb.Fatal(err)
			}
		}
	}
	p.proc, err = proctest.Start("pgbouncer", bin, []string{filepath.Join(p.dir, "pgbouncer.ini")},
		[]string{"PATH=/usr/bin:/bin"}, filepath.Join(p.dir, "pgbouncer.log"), proctest.Options{Credential: runAs})
	if err != nil {
		tb.Fatalf("pgbouncertest: %v", err)
	}
	p.waitListening()
	return p
}

// authPool is the room max_db_connections leaves beside the application's pool, for the
// auth_user's own connections: without it, each new client's login would close the
// application's idle server connection to make room for the auth_query.
const authPool = 2

// iniTemplate is the operator's pgbouncer.ini, less TLS (loopback here; the operator's
// pooler requires TLS to Postgres and from clients) and with this harness's paths.
const iniTemplate = `[databases]
* = host=%s port=%s auth_user=%s

[pgbouncer]
pool_mode = %s
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = scram-sha-256
auth_file = %s
auth_user = %s
auth_query = SELECT * FROM pooler.user_lookup($1)
admin_users = %s
log_connections = 0
log_disconnections = 0
default_pool_size = %d
reserve_pool_size = 0
max_client_conn = 10000
max_db_connections = %d
idle_transaction_timeout = 600
server_login_retry = 5
ignore_startup_parameters = extra_float_digits,options
`

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

// Log returns what PgBouncer has logged so far, for a failure message.
func (p *Pooler) Log() string { return p.proc.Log() }

// waitListening waits until PgBouncer accepts connections, or fails with its log.
func (p *Pooler) waitListening() {
	p.tb.Helper()
	deadline := time.Now().Add(hangBound)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if p.proc.Done() || time.Now().After(deadline) {
			p.tb.Fatalf("pgbouncertest: PgBouncer did not listen on %d: %v\n%s", p.Port, err, p.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

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
