package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// How many clients sign in at once in the gate's figures, and how many people the
// application's database holds for the bench (the contested claim signs them all in).
const (
	signInClients = 4
	benchPeople   = 32
)

// Database names on the throwaway cluster.
const (
	appDB     = "terdut"
	pgbenchDB = "pgbench"
)

// env is what every measurement shares: one throwaway cluster holding the application's
// database (claimed, with people) and pgbench's, three instances of the API over the
// application's database, the OIDC provider, and one HTTP client with keep-alive connections.
type env struct {
	cfg       Config
	cluster   *pglocal.Cluster
	pgbench   string // path of the pgbench binary
	pgVersion string
	cpu       cpuMeter
	wrk       string // path of wrk, or "" when it cannot be had

	server       *process // the terdut-server binary, for the API-key figures and the flood
	noAccessLog  *process // the same with --access-log=false, the access log's baseline
	floor        *process // the floor (bench/floor), the API-key figures' baseline
	poolMaxConns int32    // the pool size of both, pgxpool's default
	signIn       *flooded // the person who signs in during the flood, and how

	gateOn   *apitest.Server // the gate on, as servers run by default
	gateOff  *apitest.Server // the gate off, the baseline of the gate's cost
	operator *apitest.Server // a third replica, where claims and resets are sent
	provider *oidctest.Provider
	people   []apitest.Person // one per API-key client; the first signInClients also sign in
	client   *client

	oidcRate float64 // the highest OIDC callback rate seen so far, to size the next round
}

// newEnv starts the cluster, prepares both databases, claims the install and starts the
// instances. Everything is released when tb ends.
func newEnv(tb testing.TB, cfg Config) *env {
	tb.Helper()
	ctx := tb.Context()
	e := &env{cfg: cfg, client: newClient()}
	var err error
	if e.pgbench, err = findPgbench(); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	cfg.progressf("starting a throwaway PostgreSQL cluster")
	e.cluster, err = pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	tb.Cleanup(func() {
		if err := e.cluster.Stop(); err != nil {
			tb.Errorf("bench: stop cluster: %v", err)
		}
	})
	if e.cpu, err = newCPUMeter(e.cluster.Dir); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if e.pgVersion, err = e.createDatabases(ctx); err != nil {
		tb.Fatalf("bench: %v", err)
	}
	if _, err := store.Migrate(ctx, e.cluster.URL(appDB)); err != nil {
		tb.Fatalf("bench: migrate: %v", err)
	}
	if out, _, err := e.runPgbench(ctx, "-i", "-s", "1", "-q"); err != nil {
		tb.Fatalf("bench: pgbench -i: %v\n%s", err, out)
	}

	e.wrk = e.findWrk(ctx, cfg.InstallWrk)

	e.provider = oidctest.NewProvider(tb)
	for w := range signInClients {
		sub := ssoSubject(w)
		e.provider.AddUser(oidctest.User{Subject: sub, PreferredUsername: sub, Email: sub + "@example.test",
			Groups: []string{"users"}})
	}
	e.gateOn = e.newServer(tb, true)
	e.gateOff = e.newServer(tb, false)
	e.operator = e.newServer(tb, true)
	for i := range benchPeople {
		e.people = append(e.people, apitest.MustPerson(tb, e.gateOn.Store, fmt.Sprintf("bench-%02d", i), store.RoleMember))
	}
	e.operator.MustClaim(tb)
	e.startProcesses(tb)
	return e
}

// startProcesses builds and starts the terdut-server process and the floor over the
// application's database, and checks that the floor answers as the server does.
func (e *env) startProcesses(tb testing.TB) {
	tb.Helper()
	e.cfg.progressf("building terdut-server and the floor")
	serverBin, floorBin := buildBinaries(tb)
	dbURL := e.cluster.URL(appDB)
	// With its defaults, the access log on: it writes a line a request to its standard error
	// (a file here, as a container's log is a stream the server writes and another process reads).
	serverEnv := []string{"TERDUT_DATABASE_URL=" + dbURL, "TERDUT_PASSWORD_HASH_COST=" + strconv.Itoa(floodHashCost)}
	e.server = startProcess(tb, "terdut-server", serverBin, true, serverEnv)
	e.noAccessLog = startProcess(tb, "terdut-server --access-log=false", serverBin, true, serverEnv, "--access-log=false")
	e.floor = startProcess(tb, "floor", floorBin, false, nil, "--database-url", dbURL)
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		tb.Fatalf("bench: %v", err)
	}
	e.poolMaxConns = cfg.MaxConns
	if err := e.checkFloor(tb); err != nil {
		tb.Fatalf("bench: the floor does not do the server's work: %v", err)
	}
	e.signIn = e.newFloodedPerson(tb)
}

// newServer starts an instance over the application's database. Passwords are hashed at
// bcrypt's minimum cost (apitest's default), on both sides of every comparison: the figures
// measure the gate and the database, not bcrypt. Logs go nowhere, at the production level.
func (e *env) newServer(tb testing.TB, gate bool) *apitest.Server {
	tb.Helper()
	return apitest.NewServer(tb, e.cluster.URL(appDB), func(o *api.Options) {
		o.Gate = gate
		o.OIDC = apitest.OIDC(e.provider)
		// Never refuse a reset of the contested-claim loop. The short window keeps the
		// limit's count of recent resets as small as a real limit keeps it.
		o.ResetLimit = store.RateLimit{Max: 1 << 30, Window: time.Second}
		// The OIDC figure starts its sign-ins ahead of a round, more of them than the
		// default bound on sign-ins in progress.
		o.OIDCPendingLimit = 1 << 30
		o.Logger = slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
}

func ssoSubject(w int) string { return fmt.Sprintf("bench-sso-%02d", w) }

// loginBody is the password sign-in request of person i.
func (e *env) loginBody(i int) []byte {
	b, _ := json.Marshal(map[string]string{"username": e.people[i].User.Username, "password": e.people[i].Password})
	return b
}

// createDatabases creates the application's and pgbench's databases and returns the
// server's version.
func (e *env) createDatabases(ctx context.Context) (string, error) {
	conn, err := pgx.Connect(ctx, e.cluster.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("connect to the cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, db := range []string{appDB, pgbenchDB} {
		if _, err := conn.Exec(ctx, "CREATE DATABASE "+db); err != nil {
			return "", fmt.Errorf("create database %s: %w", db, err)
		}
	}
	var version string
	err = conn.QueryRow(ctx, "SELECT current_setting('server_version')").Scan(&version)
	return version, err
}

// runPgbench runs pgbench with args against pgbench's database, as the superuser over TCP
// (the cluster trusts loopback connections), and returns its combined output and the CPU
// time pgbench itself used.
func (e *env) runPgbench(ctx context.Context, args ...string) ([]byte, time.Duration, error) {
	args = append(args, "-h", "127.0.0.1", "-p", strconv.Itoa(e.cluster.Port), "-U", pglocal.Superuser, pgbenchDB)
	cmd := exec.CommandContext(ctx, e.pgbench, args...)
	cmd.Env = append(os.Environ(), "PGSSLMODE=disable", "PGCONNECT_TIMEOUT=10")
	out, err := cmd.CombinedOutput()
	if cmd.ProcessState == nil {
		return out, 0, err
	}
	return out, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), err
}

// findPgbench finds pgbench as pglocal finds the server: on PATH or in the newest
// /usr/lib/postgresql/*/bin, which is also where the cluster's binaries come from.
func findPgbench() (string, error) {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p, nil
	}
	paths, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	sort.Slice(paths, func(i, j int) bool { return majorOf(paths[i]) > majorOf(paths[j]) })
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("pgbench not found on PATH or in /usr/lib/postgresql/*/bin; it comes with the PostgreSQL server binaries (e.g. apt-get install postgresql)")
}

// majorOf extracts N from /usr/lib/postgresql/N/bin/pgbench (0 if not a number).
func majorOf(path string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(filepath.Dir(path))), 64)
	return v
}
