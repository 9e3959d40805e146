// Package amtest runs a real Prometheus Alertmanager for tests, built from the release
// test/harness/amtest/ambin pins (see Build), configured with one route to one webhook
// receiver, or by a whole alertmanager.yml of the test's (see Options), and fed alerts as Prometheus feeds them (PostAlerts). Start runs
// one; StartCluster runs peers gossiping with each other, as a highly available pair does.
// Everything listens on 127.0.0.1 and is stopped in the test's Cleanup.
package amtest

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// hangBound bounds each wait of the harness: a bound on a hang on a busy machine, never a
// measure of speed.
const hangBound = 2 * time.Minute

// Alertmanager is one running alertmanager process.
type Alertmanager struct {
	// URL is its HTTP address, http://127.0.0.1:<port>: the API under /api/v2/, and what its
	// notifications carry as externalURL.
	URL string
	// ClusterAddr is its gossip address, 127.0.0.1:<port>, or "" outside a cluster.
	ClusterAddr string
	// Dir holds its alertmanager.yml, its storage and its log (alertmanager.log).
	Dir string

	proc   *proctest.Proc
	client *http.Client
}

// Start runs one Alertmanager, not clustered, configured by opts, and waits until it answers
// GET /-/ready. It builds the program first if need be (see Build): minutes, once per machine.
// It fails tb when the program cannot be built or does not become ready, with its log. The
// process is stopped in tb's Cleanup, and its log's tail is printed if tb failed.
func Start(tb testing.TB, opts Options) *Alertmanager {
	tb.Helper()
	return start(tb, []Options{opts}, false)[0]
}

// StartCluster runs n Alertmanagers clustered with each other on 127.0.0.1: each gossips on
// a loopback port of its own, advertises that address and names the others as
// --cluster.peer, with the gossip intervals and the settle timeout short. It returns once
// every peer answers GET /-/ready and its GET /api/v2/status shows the cluster ready with n
// members. Alertmanager does not share alerts between peers: post each alert to every peer,
// as Prometheus does. Failures and cleanup are Start's.
func StartCluster(tb testing.TB, n int, opts Options) []*Alertmanager {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("amtest: StartCluster(%d): want at least one peer", n)
	}
	return start(tb, slices.Repeat([]Options{opts}, n), true)
}

// StartClusterEach is StartCluster with a configuration for each peer: it runs len(opts)
// Alertmanagers clustered with each other, the i-th configured by opts[i] (its own webhook
// URL, say, as when each member of a pair reaches a different replica of the receiver).
func StartClusterEach(tb testing.TB, opts ...Options) []*Alertmanager {
	tb.Helper()
	if len(opts) < 1 {
		tb.Fatalf("amtest: StartClusterEach: want at least one peer")
	}
	return start(tb, opts, true)
}

func start(tb testing.TB, opts []Options, clustered bool) []*Alertmanager {
	tb.Helper()
	opts = slices.Clone(opts) // the caller's own slice stays as it was
	n := len(opts)
	configs := make([][]byte, n)
	for i := range opts {
		opts[i] = opts[i].withDefaults()
		var err error
		if configs[i], err = opts[i].config(); err != nil {
			tb.Fatal(err)
		}
	}
	bin := mustBinary(tb)
	ports, err := proctest.FreePorts(2 * n)
	if err != nil {
		tb.Fatalf("amtest: %v", err)
	}
	ams := make([]*Alertmanager, n)
	for i := range ams {
		am := &Alertmanager{
			URL:    "http://127.0.0.1:" + strconv.Itoa(ports[i]),
			Dir:    tb.TempDir(),
			client: &http.Client{Transport: &http.Transport{}}, // no proxy: loopback only
		}
		if clustered {
			am.ClusterAddr = "127.0.0.1:" + strconv.Itoa(ports[n+i])
		}
		ams[i] = am
	}
	for i, am := range ams {
		args := []string{
			"--config.file=" + filepath.Join(am.Dir, "alertmanager.yml"),
			"--storage.path=" + filepath.Join(am.Dir, "data"),
			"--web.listen-address=" + strings.TrimPrefix(am.URL, "http://"),
			// Without it, the externalURL of notifications names this machine's hostname.
			"--web.external-url=" + am.URL,
			"--log.level=debug",
		}
		if !clustered {
			args = append(args, "--cluster.listen-address=")
		} else {
			args = append(args,
				"--cluster.listen-address="+am.ClusterAddr,
				"--cluster.advertise-address="+am.ClusterAddr,
				"--cluster.peer-name=am"+strconv.Itoa(i),
				"--cluster.peer-timeout="+opts[i].PeerTimeout.String(),
				// Settling polls every 10 gossip intervals until the membership holds still
				// three times; notifications wait for it, up to the settle timeout.
				"--cluster.gossip-interval=100ms",
				"--cluster.pushpull-interval=2s",
				"--cluster.settle-timeout=3s",
				"--cluster.reconnect-interval=1s",
			)
			for j, peer := range ams {
				if j != i {
					args = append(args, "--cluster.peer="+peer.ClusterAddr)
				}
			}
		}
		if err := os.WriteFile(filepath.Join(am.Dir, "alertmanager.yml"), configs[i], 0o644); err != nil {
			tb.Fatalf("amtest: %v", err)
		}
		am.proc, err = proctest.Start("alertmanager", bin, args, []string{"PATH=/usr/bin:/bin"},
			filepath.Join(am.Dir, "alertmanager.log"), proctest.Options{})
		if err != nil {
			tb.Fatalf("amtest: %v", err)
		}
		tb.Cleanup(func() {
			am.Stop()
			am.client.CloseIdleConnections()
			if tb.Failed() {
				tb.Logf("amtest: the end of %s's log (%s):\n%s", am.URL, am.proc.LogPath, tail(am.Log(), 60))
			}
		})
	}
	for _, am := range ams {
		am.waitReady(tb)
	}
	if clustered {
		for _, am := range ams {
			am.waitCluster(tb, n)
		}
	}
	return ams
}

// Stop stops the process: SIGTERM, then SIGKILL after 10 s. A stopped Alertmanager stays
// stopped; Stop again does nothing. The test's Cleanup calls it.
func (am *Alertmanager) Stop() {
	am.proc.Stop(syscall.SIGTERM, 10*time.Second)
}

// Log returns what the process has logged so far (logfmt, debug level), for a failure message.
func (am *Alertmanager) Log() string { return am.proc.Log() }

// waitReady waits until GET /-/ready answers 200, or fails tb with the log.
func (am *Alertmanager) waitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(hangBound)
	for {
		err := am.get(context.Background(), "/-/ready", nil)
		if err == nil {
			return
		}
		if am.proc.Done() {
			tb.Fatalf("amtest: alertmanager at %s exited before it was ready (%v):\n%s", am.URL, err, tail(am.Log(), 60))
		}
		if time.Now().After(deadline) {
			tb.Fatalf("amtest: alertmanager at %s not ready after %v: %v\n%s", am.URL, hangBound, err, tail(am.Log(), 60))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitCluster waits until GET /api/v2/status shows the cluster ready (settled) with n
// members, or fails tb with the log.
func (am *Alertmanager) waitCluster(tb testing.TB, n int) {
	tb.Helper()
	deadline := time.Now().Add(hangBound)
	for {
		st, err := am.Status(context.Background())
		if err == nil && st.Cluster.Status == "ready" && len(st.Cluster.Peers) == n {
			return
		}
		if am.proc.Done() || time.Now().After(deadline) {
			tb.Fatalf("amtest: alertmanager at %s did not form a cluster of %d within %v: status %+v, %v\n%s",
				am.URL, n, hangBound, st.Cluster, err, tail(am.Log(), 60))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = slices.Concat([]string{fmt.Sprintf("[... %d lines before]", len(lines)-n)}, lines[len(lines)-n:])
	}
	return strings.Join(lines, "\n")
}
