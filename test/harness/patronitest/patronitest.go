// Package patronitest runs a Patroni cluster on 127.0.0.1 for tests: one etcd (v3 API), three
// Patroni members with synchronous_mode and synchronous_mode_strict, and HAProxy in front of
// them with Patroni's REST check, as a Zalando/Spilo install is reached through a Service
// that follows the leader. It gives tests the faults of a real cluster: the leader killed,
// a switchover, a member rejoining, the leader cut off from etcd, etcd paused or killed and
// started again, Patroni's failsafe_mode turned on, a rolling restart.
//
// Every program runs in a process group of its own and dies with the test process (SIGKILL
// through Pdeathsig); Postgres, which Patroni starts in a session of its own, is killed from
// its postmaster.pid when the test ends, and by a small reaper if the test process is killed.
package patronitest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// Timing of the cluster, as in the notes on this machine kind: a dead leader's lock expires
// after TTL, and loop_wait + 2 × retry_timeout ≤ ttl.
const (
	TTL          = 10
	LoopWait     = 1
	RetryTimeout = 4
)

// Credentials of the cluster. Spilo's operator creates an owner role and its database for an
// application; the harness does the same: the role App owns the database App.
const (
	Superuser         = "postgres"
	superuserPassword = "patronitest-superuser-password"
	replUser          = "replicator"
	replPassword      = "patronitest-replication-password"
	App               = "terdut"
	AppPassword       = "patronitest-app-password"
)

// hangBound bounds each wait of the harness: a bound on a hang on a busy machine, never a
// measure of speed.
const hangBound = 2 * time.Minute

// Member is one Patroni member and its Postgres.
type Member struct {
	Name     string
	PGPort   int
	RESTPort int
	DataDir  string

	c       *Cluster
	config  string
	logPath string
	etcd    *proxy // this member's connection to etcd
	patroni *proctest.Proc
}

// Cluster is a running Patroni cluster. Its methods fail the test on a hang or an error.
type Cluster struct {
	Members     []*Member
	HAProxyPort int
	EtcdPort    int

	t        testing.TB
	dir      string
	bins     map[string]string
	owner    *sysUser
	etcd     *proctest.Proc
	etcdArgs []string
	haproxy  *proctest.Proc
	reaper   *proctest.Proc
	logf     func(string, ...any)
	failure  atomic.Value // the message of Fail, for the end of the output
}

// Start runs the cluster and waits until it is ready (see WaitReady), then creates the App
// role and database. It stops everything when the test ends. Missing programs fail the test
// with how to install them.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bins, err := findPrograms()
	if err != nil {
		t.Fatal(err)
	}
	owner, err := postgresUser()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/tmp", "patronitest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, dir: dir, bins: bins, owner: owner, logf: t.Logf}
	t.Cleanup(c.stop)
	c.startReaper()
	ports, err := proctest.FreePorts(3 + 3 + 3 + 1)
	if err != nil {
		t.Fatal(err)
	}
	c.EtcdPort, c.HAProxyPort = ports[0], ports[3]
	c.startEtcd(ports[1], ports[2])
	for i := range 3 {
		m := &Member{Name: "m" + strconv.Itoa(i+1), PGPort: ports[4+i], RESTPort: ports[7+i], c: c}
		c.Members = append(c.Members, m)
		if err := c.prepareMember(m); err != nil {
			t.Fatal(err)
		}
		m.start()
	}
	c.startHAProxy()
	ctx, cancel := context.WithTimeout(context.Background(), hangBound)
	defer cancel()
	c.WaitReady(ctx)
	c.createApp(ctx)
	return c
}

// Logf reports progress in the test's log.
func (c *Cluster) Logf(format string, args ...any) { c.logf("patronitest: "+format, args...) }

func (c *Cluster) startEtcd(peerPort, metricsPort int) {
	data := filepath.Join(c.dir, "etcd")
	client := "http://127.0.0.1:" + strconv.Itoa(c.EtcdPort)
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	c.etcdArgs = []string{"--name", "e1", "--data-dir", data,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e1=" + peer, "--initial-cluster-state", "new",
		"--listen-metrics-urls", "http://127.0.0.1:" + strconv.Itoa(metricsPort)}
	c.restartEtcd()
}

// restartEtcd starts etcd on its data directory and waits until it has decided its cluster
// version: Patroni 3.0.2 connecting before that dies at start (ValueError: invalid literal for
// int() with base 10: 'not_decided'), which on a quiet machine left a member that never ran.
func (c *Cluster) restartEtcd() {
	p, err := startProc("etcd", c.bins["etcd"], c.etcdArgs, os.Environ(), nil, filepath.Join(c.dir, "etcd.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.etcd = p
	version := "http://127.0.0.1:" + strconv.Itoa(c.EtcdPort) + "/version"
	c.waitFor(context.Background(), "etcd to decide its cluster version", func() bool {
		resp, err := restClient.Get(version)
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var v struct {
			Cluster string `json:"etcdcluster"`
		}
		return json.NewDecoder(resp.Body).Decode(&v) == nil && v.Cluster != "" && v.Cluster != "not_decided"
	})
}

// prepareMember writes the member's Patroni configuration and makes its directories.
func (c *Cluster) prepareMember(m *Member) error {
	mdir := filepath.Join(c.dir, m.Name)
	m.DataDir = filepath.Join(mdir, "data")
	m.logPath = filepath.Join(mdir, "patroni.log")
	m.config = filepath.Join(mdir, "patroni.yml")
	if err := os.MkdirAll(mdir, 0o700); err != nil {
		return err
	}
	p, err := newProxy("127.0.0.1:" + strconv.Itoa(c.EtcdPort))
	if err != nil {
		return err
	}
	m.etcd = p
	pg := "127.0.0.1:" + strconv.Itoa(m.PGPort)
	rest := "127.0.0.1:" + strconv.Itoa(m.RESTPort)
	hba := []string{"local all all trust", "host replication " + replUser + " 127.0.0.1/32 scram-sha-256",
		"host all all 127.0.0.1/32 scram-sha-256"}
	cfg := map[string]any{
		"scope": "terdut", "namespace": "/patronitest/", "name": m.Name,
		"restapi": map[string]any{"listen": rest, "connect_address": rest},
		// use_proxies: talk to etcd only through the proxy, never to the client URL etcd
		// advertises (Patroni discovers those otherwise, and the proxy could not cut it off).
		"etcd3": map[string]any{"hosts": p.addr(), "use_proxies": true},
		"bootstrap": map[string]any{
			"dcs": map[string]any{"ttl": TTL, "loop_wait": LoopWait, "retry_timeout": RetryTimeout,
				"maximum_lag_on_failover": 1 << 20, "synchronous_mode": true, "synchronous_mode_strict": true,
				"postgresql": map[string]any{"use_pg_rewind": true, "use_slots": true, "parameters": map[string]any{
					"wal_level": "replica", "hot_standby": "on", "wal_log_hints": "on", "max_wal_senders": 10,
					"max_replication_slots": 10, "max_connections": 200, "wal_keep_size": "128MB",
					// A process killed loses nothing the kernel holds: fsync only slows a busy machine.
					"fsync": "off"}}},
			"initdb": []any{map[string]string{"encoding": "UTF8"}, map[string]string{"locale": "C.UTF-8"},
				"data-checksums", map[string]string{"auth-host": "scram-sha-256"}, map[string]string{"auth-local": "trust"}},
		},
		"postgresql": map[string]any{
			"listen": pg, "connect_address": pg, "data_dir": m.DataDir, "bin_dir": c.bins["pg_bin"],
			"pgpass": filepath.Join(mdir, "pgpass"),
			"authentication": map[string]any{
				"superuser":   map[string]string{"username": Superuser, "password": superuserPassword},
				"replication": map[string]string{"username": replUser, "password": replPassword},
			},
			"parameters": map[string]any{"unix_socket_directories": mdir},
			"pg_hba":     hba,
		},
		"watchdog": map[string]any{"mode": "off"},
		"tags":     map[string]any{"nofailover": false, "noloadbalance": false, "clonefrom": false, "nosync": false},
	}
	b, err := json.MarshalIndent(cfg, "", "  ") // JSON is YAML: Patroni reads it as its configuration
	if err != nil {
		return err
	}
	if err := os.WriteFile(m.config, b, 0o600); err != nil {
		return err
	}
	return c.owner.chown(mdir, m.config)
}

// start runs the member's Patroni (as postgres when root), appending to its log.
func (m *Member) start() {
	env := append(os.Environ(), "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "PATRONI_LOG_LEVEL=INFO")
	if m.c.owner != nil {
		env = append(env, "HOME="+filepath.Dir(m.DataDir), "USER=postgres", "LOGNAME=postgres")
	}
	p, err := startProc("patroni "+m.Name, m.c.bins["patroni"], []string{m.config}, env, m.c.owner, m.logPath)
	if err != nil {
		m.c.t.Fatal(err)
	}
	m.patroni = p
}

func (c *Cluster) startHAProxy() {
	var servers strings.Builder
	for _, m := range c.Members {
		fmt.Fprintf(&servers, "  server %s 127.0.0.1:%d check port %d\n", m.Name, m.PGPort, m.RESTPort)
	}
	cfg := fmt.Sprintf(`global
  maxconn 1000
defaults
  mode tcp
  timeout connect 2s
  timeout client 30m
  timeout server 30m
  timeout check 1s
listen primary
  bind 127.0.0.1:%d
  option httpchk GET /primary
  http-check expect status 200
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
%s`, c.HAProxyPort, servers.String())
	path := filepath.Join(c.dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		c.t.Fatal(err)
	}
	p, err := startProc("haproxy", c.bins["haproxy"], []string{"-db", "-f", path}, os.Environ(), nil, filepath.Join(c.dir, "haproxy.log"))
	if err != nil {
		c.t.Fatal(err)
	}
	c.haproxy = p
}

// MultiHostURL is the App database on a libpq multi-host URL listing every member, with
// target_session_attrs=read-write: the client connects to the first that takes writes.
func (c *Cluster) MultiHostURL() string {
	var hosts []string
	for _, m := range c.Members {
		hosts = append(hosts, "127.0.0.1:"+strconv.Itoa(m.PGPort))
	}
	return c.appURL(strings.Join(hosts, ","), "&target_session_attrs=read-write")
}

// HAProxyURL is the App database through HAProxy, which sends connections to the member
// whose GET /primary answers 200, as a Service that follows the leader.
func (c *Cluster) HAProxyURL() string { return c.appURL("127.0.0.1:"+strconv.Itoa(c.HAProxyPort), "") }

func (c *Cluster) appURL(hosts, extra string) string {
	return "postgres://" + App + ":" + url.QueryEscape(AppPassword) + "@" + hosts + "/" + App + "?sslmode=disable" + extra
}

// SuperuserURL is the database db through HAProxy (on the leader), as the superuser.
func (c *Cluster) SuperuserURL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, superuserPassword, c.HAProxyPort, db)
}

// SuperuserURL is the database db on member m alone, as the superuser.
func (m *Member) SuperuserURL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable&connect_timeout=2", Superuser, superuserPassword, m.PGPort, db)
}

// AppURL is the App database on member m alone, as the App role.
func (m *Member) AppURL() string {
	return m.c.appURL("127.0.0.1:"+strconv.Itoa(m.PGPort), "")
}

// Member returns the member called name, or nil.
func (c *Cluster) Member(name string) *Member {
	for _, m := range c.Members {
		if m.Name == name {
			return m
		}
	}
	return nil
}
