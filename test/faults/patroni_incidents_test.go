//go:build patroni

package faults

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/amtest"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/patronitest"
	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// The storm a real Alertmanager delivers while the leader dies: stormGroups groups (group_by
// alertname) of stormPerGroup alerts each.
const (
	stormGroups   = 20
	stormPerGroup = 10
	// stormBound bounds each wait of the storm: generous, since every group's delivery may
	// have to wait out a failover and Alertmanager's retries on a busy machine.
	stormBound = 4 * time.Minute
)

// stormResolved says which alerts the storm resolves after the failover, half of them: every
// alert of the first 5 groups (their incidents resolve), the first 5 of the next 10 (their
// incidents stay open with half their alerts resolved), none of the last 5.
func stormResolved(group, instance int) bool {
	return group < 5 || group < 15 && instance < 5
}

// stormAlert is alert instance of group, as Prometheus posts it: firing, or resolved at end.
func stormAlert(group, instance int, startsAt, end time.Time) amtest.Alert {
	return amtest.Alert{
		Labels: map[string]string{"alertname": fmt.Sprintf("FaultsStorm%02d", group),
			"instance": fmt.Sprintf("host-%02d", instance), "severity": "warning"},
		Annotations:  map[string]string{"summary": "a storm through a failover"},
		StartsAt:     startsAt,
		EndsAt:       end,
		GeneratorURL: "http://prometheus.invalid/graph",
	}
}

// proveIncidentsThroughFailover runs a terdut-server process on dbURL (with args), makes an
// integration with the admin key adminKey, and has a real Alertmanager deliver the storm to
// it while the Patroni leader is killed: the groups are posted one after another, and the
// leader dies once a few notifications are stored, so that the rest meet the failover. After
// Patroni promotes another member, half of the alerts are resolved through Alertmanager. Then,
// polling with generous bounds: every alert of Alertmanager's is stored once, one incident
// per group, every resolution applied, no timeline event twice (checkStorm), and the webhook
// never answered 4xx (checkWebhookAnswers). The cluster must be ready (WaitReady) when it
// starts; the killed member stays down.
func proveIncidentsThroughFailover(t *testing.T, c *patronitest.Cluster, dbURL, adminKey string, args ...string) {
	ctx := t.Context()
	srv := startIncidentServer(t, dbURL, args...)
	resp := srv.api().MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/integrations", Bearer: adminKey,
		Body: map[string]string{"name": "faults-storm"}})
	var integration struct {
		ID   int64
		Keys []struct{ Key string }
	}
	if resp.Status != http.StatusCreated {
		t.Fatalf("POST /api/integrations with the claimed admin key: got %d %s, want 201", resp.Status, resp.Body)
	}
	resp.JSON(t, &integration)
	keyFile := filepath.Join(t.TempDir(), "terdut-key")
	apitest.WriteFile(t, keyFile, integration.Keys[0].Key)
	// No repeat within the test: Alertmanager sends a group again only after a change or a
	// failed delivery, so that a 2xx answered for what was not committed loses its alerts
	// for good, as it would between an install's repeats (hours).
	am := amtest.Start(t, amtest.Options{WebhookURL: srv.url + "/api/webhooks/alertmanager", CredentialsFile: keyFile,
		GroupBy: []string{"alertname"}, GroupWait: time.Second, GroupInterval: 2 * time.Second, RepeatInterval: time.Hour})

	startsAt := time.Now().Add(-time.Minute).Truncate(time.Second).UTC()
	posted := make(chan error, 1)
	go func() {
		for g := range stormGroups {
			var alerts []amtest.Alert
			for i := range stormPerGroup {
				alerts = append(alerts, stormAlert(g, i, startsAt, time.Time{}))
			}
			if err := am.PostAlerts(ctx, alerts); err != nil {
				posted <- fmt.Errorf("post group %d: %w", g, err)
				return
			}
			time.Sleep(150 * time.Millisecond) // one group after another: deliveries straddle the kill
		}
		posted <- nil
	}()
	waitStorm(t, "the first notifications to be stored", func() bool { return srv.outcomes(t)["stored"] >= 3 })
	leader := c.Leader(ctx)
	if leader == nil {
		t.Fatal("no leader in GET /cluster")
	}
	storedAtKill := srv.outcomes(t)["stored"]
	c.Kill(leader)
	killedAt := time.Now()
	w, err := c.WaitWritable(ctx, leader)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("storm: %s killed after %.0f notifications were stored; %s promoted %s, reached through HAProxy %s, writable %s after the kill",
		leader.Name, storedAtKill, w.Member.Name, w.Promoted.Sub(killedAt).Round(10*time.Millisecond),
		w.HAProxy.Sub(killedAt).Round(10*time.Millisecond), w.At.Sub(killedAt).Round(10*time.Millisecond))
	if err := <-posted; err != nil {
		t.Fatal(err)
	}

	// Alertmanager's own fingerprints, while every alert fires.
	var fingerprints map[string]map[string]string
	waitStorm(t, "Alertmanager to hold every alert of the storm", func() bool {
		alerts, err := am.Alerts(ctx)
		fingerprints = map[string]map[string]string{}
		for _, a := range alerts {
			fingerprints[a.Fingerprint] = a.Labels
		}
		return err == nil && len(fingerprints) == stormGroups*stormPerGroup
	})
	var firing, open int
	waitStorm(t, "every alert firing and every group's incident open on the server", func() bool {
		firing = srv.count(adminKey, "/api/alerts?status=firing&limit=1000")
		open = srv.count(adminKey, "/api/incidents?status=triggered&limit=1000")
		return firing == stormGroups*stormPerGroup && open == stormGroups
	}, func() string {
		return fmt.Sprintf("%d alerts firing, %d incidents triggered (-1: no answer)", firing, open)
	})
	firingAt := time.Now()

	var resolutions []amtest.Alert
	for g := range stormGroups {
		for i := range stormPerGroup {
			if stormResolved(g, i) {
				resolutions = append(resolutions, stormAlert(g, i, startsAt, time.Now().Add(-time.Second).UTC()))
			}
		}
	}
	if err := am.PostAlerts(ctx, resolutions); err != nil {
		t.Fatal(err)
	}
	resolvedAlerts, resolvedGroups := len(resolutions), 0
	for g := range stormGroups {
		if stormResolved(g, stormPerGroup-1) {
			resolvedGroups++
		}
	}
	var resolved, closed int
	waitStorm(t, "every resolution on the server", func() bool {
		resolved = srv.count(adminKey, "/api/alerts?status=resolved&limit=1000")
		closed = srv.count(adminKey, "/api/incidents?status=resolved&limit=1000")
		return resolved == resolvedAlerts && closed == resolvedGroups
	}, func() string {
		return fmt.Sprintf("%d alerts resolved, %d incidents resolved (-1: no answer)", resolved, closed)
	})
	t.Logf("storm: every alert firing %s after the kill, every resolution applied %s after it was posted",
		firingAt.Sub(killedAt).Round(100*time.Millisecond), time.Since(firingAt).Round(100*time.Millisecond))

	checkStorm(t, srv, c, adminKey, integration.ID, fingerprints)
	checkWebhookAnswers(t, srv, am)
}

// waitStorm polls cond until it holds, failing the test after stormBound with what state
// (if given) says of the last poll.
func waitStorm(t *testing.T, what string, cond func() bool, state ...func() string) {
	t.Helper()
	for deadline := time.Now().Add(stormBound); !cond(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			last := ""
			for _, s := range state {
				last = "; last: " + s()
			}
			t.Fatalf("waited %s for %s%s", stormBound, what, last)
		}
	}
}

// incidentServer is the terdut-server program for the storm: the real binary, its metrics on
// a port of their own, each access line written at once.
type incidentServer struct {
	url, metrics string
	proc         *proctest.Proc
}

// api is the server's API, for requests.
func (s *incidentServer) api() *apitest.Server { return &apitest.Server{URL: s.url} }

// startIncidentServer starts it on dbURL with args and waits until GET /readyz answers 200;
// it is stopped (SIGTERM) when the test ends.
func startIncidentServer(t *testing.T, dbURL string, args ...string) *incidentServer {
	t.Helper()
	ports, err := proctest.FreePorts(2)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "operator-token")
	apitest.WriteFile(t, tokenFile, apitest.OperatorToken+"\n")
	listen, metrics := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	s := &incidentServer{url: "http://" + listen, metrics: "http://" + metrics + "/metrics"}
	args = append([]string{"--listen", listen, "--metrics-listen", metrics, "--public-url", s.url,
		"--access-log-interval", "0", "--password-hash-cost", "4"}, args...)
	env := append(os.Environ(), "TERDUT_DATABASE_URL="+dbURL, "TERDUT_OPERATOR_TOKEN_FILE="+tokenFile)
	if s.proc, err = proctest.Start("terdut-server", binary, args, env, filepath.Join(dir, "terdut-server.log"), proctest.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.proc.Stop(syscall.SIGTERM, 30*time.Second) {
			t.Errorf("terdut-server did not stop within 30 s of SIGTERM")
		}
		if t.Failed() {
			log := strings.Split(strings.TrimRight(s.proc.Log(), "\n"), "\n")
			t.Logf("terdut-server's log, last %d lines:\n%s", min(len(log), 80), strings.Join(log[max(len(log)-80, 0):], "\n"))
		}
	})
	ctx, cancel := context.WithTimeout(t.Context(), hangBound)
	defer cancel()
	for {
		if resp, err := s.api().Do(apitest.Request{Method: http.MethodGet, Path: "/readyz"}); err == nil && resp.Status == http.StatusOK {
			return s
		}
		if s.proc.Done() || ctx.Err() != nil {
			t.Fatalf("terdut-server not ready (exited: %v):\n%s", s.proc.Done(), s.proc.Log())
		}
		time.Sleep(100 * time.Millisecond)
	}
}
