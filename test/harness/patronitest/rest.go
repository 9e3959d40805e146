package patronitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

// restClient reads a member's state; a POST (a switchover) waits until Patroni has done it.
var restClient, restActionClient = &http.Client{Timeout: 2 * time.Second}, &http.Client{Timeout: time.Minute}

// ClusterMember is one member as GET /cluster lists it.
type ClusterMember struct {
	Name     string `json:"name"`
	Role     string `json:"role"`  // leader, replica or sync_standby
	State    string `json:"state"` // running, streaming, stopped, ...
	Timeline int    `json:"timeline"`
}

// Status is what Patroni's GET /patroni says of the member that answers it.
type Status struct {
	State       string `json:"state"`
	Role        string `json:"role"` // master or replica
	Timeline    int    `json:"timeline"`
	Replication []struct {
		ApplicationName string `json:"application_name"`
		State           string `json:"state"`
		SyncState       string `json:"sync_state"`
	} `json:"replication"`
}

func (m *Member) rest(ctx context.Context, method, path string, body any, v any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://127.0.0.1:"+strconv.Itoa(m.RESTPort)+path, rd)
	if err != nil {
		return 0, err
	}
	client := restClient
	if method != http.MethodGet {
		client = restActionClient
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil {
		if err := json.Unmarshal(b, v); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %d %q: %w", method, path, resp.StatusCode, b, err)
		}
	}
	if resp.StatusCode >= 300 && v == nil {
		return resp.StatusCode, fmt.Errorf("%s %s on %s: %d %s", method, path, m.Name, resp.StatusCode, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}

// Status asks the member for its own state.
func (m *Member) Status(ctx context.Context) (Status, error) {
	var s Status
	_, err := m.rest(ctx, http.MethodGet, "/patroni", nil, &s)
	return s, err
}

// Topology asks the members in turn for GET /cluster and returns the first answer.
func (c *Cluster) Topology(ctx context.Context) ([]ClusterMember, error) {
	var lastErr error
	for _, m := range c.Members {
		if m.patroni == nil || m.patroni.Done() {
			continue
		}
		var body struct {
			Members []ClusterMember `json:"members"`
		}
		if _, err := m.rest(ctx, http.MethodGet, "/cluster", nil, &body); err != nil {
			lastErr = err
			continue
		}
		return body.Members, nil
	}
	return nil, fmt.Errorf("no member answered GET /cluster: %v", lastErr)
}

// ready checks the state WaitReady waits for; it returns the leader and the sync standby.
func (c *Cluster) ready(ctx context.Context) (leader, sync *Member, why string) {
	top, err := c.Topology(ctx)
	if err != nil {
		return nil, nil, err.Error()
	}
	for _, cm := range top {
		switch cm.Role {
		case "leader":
			if leader != nil {
				return nil, nil, "two leaders in GET /cluster"
			}
			leader = c.Member(cm.Name)
		case "sync_standby":
			sync = c.Member(cm.Name)
		}
	}
	running := 0
	for _, m := range c.Members {
		if m.patroni != nil && !m.patroni.Done() {
			running++
		}
	}
	if leader == nil || sync == nil || len(top) != running {
		return nil, nil, fmt.Sprintf("GET /cluster: %+v", top)
	}
	st, err := leader.Status(ctx)
	if err != nil {
		return nil, nil, err.Error()
	}
	streaming := 0
	for _, r := range st.Replication {
		if r.State == "streaming" {
			streaming++
		}
	}
	if st.Role != "master" && st.Role != "primary" || streaming != running-1 {
		return nil, nil, fmt.Sprintf("the leader %s: GET /patroni %+v", leader.Name, st)
	}
	// Only a member that Patroni reports as the leader and that takes writes counts.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := probeWrite(pctx, leader); err != nil {
		return nil, nil, fmt.Sprintf("the leader %s does not take a write: %v", leader.Name, err)
	}
	return leader, sync, ""
}

// WaitReady waits until the cluster is what a fault needs to start from: one leader that
// takes writes, every other running member (a killed one is not, until it rejoins) streaming from it (GET /patroni's replication[].state
// on the leader) and a sync standby published in the DCS (GET /cluster), without which a
// killed leader's survivors would never promote. It fails the test, with every log, after
// ctx or a bound on a hang.
func (c *Cluster) WaitReady(ctx context.Context) (leader, sync *Member) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	start := time.Now()
	var why string
	for {
		if leader, sync, why = c.ready(ctx); why == "" {
			c.Logf("ready after %s: leader %s, sync standby %s", time.Since(start).Round(10*time.Millisecond), leader.Name, sync.Name)
			return leader, sync
		}
		select {
		case <-ctx.Done():
			c.Fail("waited %s for the cluster to be ready; last: %s", time.Since(start).Round(time.Second), why)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// probeWrite commits a write on m as the superuser, which under strict synchronous
// replication returns only once a sync standby has it. It returns when m was seen out of
// recovery (zero if it was not).
func probeWrite(ctx context.Context, m *Member) (promoted time.Time, err error) {
	conn, err := pgx.Connect(ctx, m.SuperuserURL("postgres"))
	if err != nil {
		return time.Time{}, err
	}
	defer conn.Close(context.Background())
	var standby bool
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&standby); err != nil {
		return time.Time{}, err
	}
	if standby {
		return time.Time{}, errors.New("in recovery")
	}
	promoted = time.Now()
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS patronitest_probe (at timestamptz NOT NULL);
		INSERT INTO patronitest_probe VALUES (now())`)
	return promoted, err
}

// createApp creates the App role and database on the leader, as Spilo's operator does.
func (c *Cluster) createApp(ctx context.Context) {
	leader, _ := c.WaitReady(ctx)
	conn, err := pgx.Connect(ctx, leader.SuperuserURL("postgres"))
	if err != nil {
		c.Fail("connect to the leader: %v", err)
	}
	defer conn.Close(context.Background())
	for _, sql := range []string{
		"CREATE ROLE " + App + " LOGIN PASSWORD '" + AppPassword + "'",
		"CREATE DATABASE " + App + " OWNER " + App,
	} {
		if _, err := conn.Exec(ctx, sql); err != nil {
			c.Fail("%s: %v", sql, err)
		}
	}
	// Every member has it before a test starts: one that does not yet refuses the App role or
	// database, which is a start-up fault of its own for the tests that want it.
	for _, m := range c.Members {
		for start := time.Now(); ; time.Sleep(50 * time.Millisecond) {
			conn, err := pgx.Connect(ctx, m.AppURL())
			if err == nil {
				conn.Close(context.Background())
				break
			}
			if time.Since(start) > hangBound {
				c.Fail("%s never had the %s database: %v", m.Name, App, err)
			}
		}
	}
}

// Leader returns the member GET /cluster names as the leader, or nil.
func (c *Cluster) Leader(ctx context.Context) *Member {
	top, err := c.Topology(ctx)
	if err != nil {
		return nil
	}
	for _, cm := range top {
		if cm.Role == "leader" {
			return c.Member(cm.Name)
		}
	}
	return nil
}

// WritableAfter is WaitWritable for the test goroutine: since is when the fault began, for
// the log; it fails the test if no member takes a write.
func (c *Cluster) WritableAfter(ctx context.Context, since time.Time, exclude ...*Member) Writable {
	c.t.Helper()
	w, err := c.WaitWritable(ctx, exclude...)
	if err != nil {
		c.Fail("%v", err)
	}
	c.Logf("%s promoted %s and writable %s after the fault", w.Member.Name,
		w.Promoted.Sub(since).Round(10*time.Millisecond), w.At.Sub(since).Round(10*time.Millisecond))
	return w
}

// Writable is a member that took a write, when it was first seen out of recovery, and when
// its write returned.
type Writable struct {
	Member   *Member
	Promoted time.Time // first seen read-write (pg_is_in_recovery() false)
	HAProxy  time.Time // a connection through HAProxy first reached it read-write
	At       time.Time // its first committed write returned
}

// WaitWritable polls every member but those excluded (an old leader that may still take
// writes for a moment) with a committed write until one takes it: Patroni's own time to a
// writable leader, without any client's retry in it. Under strict synchronous replication a
// new leader's writes wait for a sync standby, so a member can be promoted well before its
// first write returns. It is safe to call from any goroutine; it gives up after a bound on a
// hang.
func (c *Cluster) WaitWritable(ctx context.Context, exclude ...*Member) (Writable, error) {
	ctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	found := make(chan Writable, len(c.Members))
	for _, m := range c.Members {
		if slices.Contains(exclude, m) {
			continue
		}
		go func() {
			var promoted time.Time
			for ctx.Err() == nil {
				pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
				p, err := probeWrite(pctx, m)
				pcancel()
				if promoted.IsZero() && !p.IsZero() {
					promoted = p
				}
				if err == nil {
					found <- Writable{Member: m, Promoted: promoted, At: time.Now()}
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	viaHAProxy := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			if m := c.viaHAProxy(ctx); m != nil && !slices.Contains(exclude, m) {
				viaHAProxy <- time.Now()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var w Writable
	select {
	case w = <-found:
	case <-ctx.Done():
		return Writable{}, fmt.Errorf("patronitest: no member took a write within %s", hangBound)
	}
	select {
	case w.HAProxy = <-viaHAProxy:
		return w, nil
	case <-ctx.Done():
		return Writable{}, fmt.Errorf("patronitest: HAProxy did not route to a read-write member within %s", hangBound)
	}
}

// viaHAProxy connects through HAProxy and returns the member it reached if that member is
// out of recovery, or nil.
func (c *Cluster) viaHAProxy(ctx context.Context) *Member {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/postgres?sslmode=disable", Superuser, superuserPassword, c.HAProxyPort))
	if err != nil {
		return nil
	}
	defer conn.Close(context.Background())
	var standby bool
	var port int
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery(), inet_server_port()`).Scan(&standby, &port); err != nil || standby {
		return nil
	}
	for _, m := range c.Members {
		if m.PGPort == port {
			return m
		}
	}
	return nil
}
