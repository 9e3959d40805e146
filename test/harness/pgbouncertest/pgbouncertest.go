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
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
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
