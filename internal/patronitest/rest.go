package patronitest

import (
	"bytes"
	"context"
	"encoding/json"
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
		if m.patroni == nil || m.patroni.done() {
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
		if m.patroni != nil && !m.patroni.done() {
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
	if err := probeWrite(pctx, leader); err != nil {
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
// replication returns only once a sync standby has it.
func probeWrite(ctx context.Context, m *Member) error {
	conn, err := pgx.Connect(ctx, m.SuperuserURL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE TABLE IF NOT EXISTS patronitest_probe (at timestamptz NOT NULL);
		INSERT INTO patronitest_probe VALUES (now())`)
	return err
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
func (c *Cluster) WritableAfter(ctx context.Context, since time.Time, exclude ...*Member) (*Member, time.Time) {
	c.t.Helper()
	m, at, err := c.WaitWritable(ctx, exclude...)
	if err != nil {
		c.Fail("%v", err)
	}
	c.Logf("writable on %s %s after the fault", m.Name, at.Sub(since).Round(10*time.Millisecond))
	return m, at
}

// WaitWritable polls every member but those excluded (an old leader that may still take
// writes for a moment) with a committed write until one takes it, and returns that member and
// when its write returned: Patroni's own time to a writable leader, without any client's
// retry in it. It is safe to call from any goroutine; it gives up after a bound on a hang.
func (c *Cluster) WaitWritable(ctx context.Context, exclude ...*Member) (*Member, time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, hangBound)
	defer cancel()
	type result struct {
		m  *Member
		at time.Time
	}
	found := make(chan result, len(c.Members))
	for _, m := range c.Members {
		if slices.Contains(exclude, m) {
			continue
		}
		go func() {
			for ctx.Err() == nil {
				// Under strict synchronous replication a new leader's first write waits
				// for a sync standby: that wait is Patroni's, so the probe waits with it.
				pctx, pcancel := context.WithTimeout(ctx, 30*time.Second)
				err := probeWrite(pctx, m)
				pcancel()
				if err == nil {
					found <- result{m, time.Now()}
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	select {
	case r := <-found:
		return r.m, r.at, nil
	case <-ctx.Done():
		return nil, time.Time{}, fmt.Errorf("patronitest: no member took a write within %s", hangBound)
	}
}
