package main

import (
	"net/http"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// buildInfoLine is terdut_build_info's one series, its labels in Prometheus's order.
var buildInfoLine = regexp.MustCompile(`(?m)^terdut_build_info\{goversion="([^"]+)",revision="([^"]+)",version="([^"]+)"\} 1$`)

// TestServe_MetricsListen checks that with --metrics-listen /metrics is served on that port
// alone (people's port answers it 404, and the metrics port answers nothing else), and that
// without it /metrics is served nowhere: people's port answers it 404 all the same, and the
// log says so.
func TestServe_MetricsListen(t *testing.T) {
	t.Run("OwnPort", func(t *testing.T) {
		srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustDatabase(t)}, "--metrics-listen", "127.0.0.1:0")
		metricsURL := listenURL(srv.Stderr.String(), "terdut-server listening for metrics")
		if metricsURL == "" || metricsURL == srv.URL {
			t.Fatalf("got metrics URL %q (people's: %s), want a port of its own in the log:\n%s", metricsURL, srv.URL, srv.Stderr)
		}
		status, body := srv.get(t, "/api/me", "") // a request to count
		mustStatus(t, "GET /api/me", status, body, http.StatusUnauthorized, nil)

		status, body = srv.get(t, "/metrics", "")
		mustNotFound(t, "GET /metrics on --listen", status, body)
		status, body = srv.doAt(t, metricsURL, http.MethodGet, "/healthz", "")
		mustNotFound(t, "GET /healthz on --metrics-listen", status, body)
		status, body = srv.doAt(t, metricsURL, http.MethodGet, "/api/bootstrap/status", "")
		mustNotFound(t, "GET /api/bootstrap/status on --metrics-listen", status, body)

		status, body = srv.doAt(t, metricsURL, http.MethodGet, "/metrics", "")
		mustStatus(t, "GET /metrics on --metrics-listen", status, body, http.StatusOK, nil)
		for _, want := range []string{`terdut_http_requests_total{method="GET",route="/api/me",status="401"} 1`,
			"terdut_bootstrap_pending 1", "go_goroutines ", "process_cpu_seconds_total "} {
			if !strings.Contains(body, want) {
				t.Errorf("got /metrics without %q, want it:\n%s", want, body)
			}
		}
		if m := buildInfoLine.FindStringSubmatch(body); m == nil || m[1] != runtime.Version() {
			t.Errorf("got terdut_build_info %q, want one series of value 1 with goversion %s", m, runtime.Version())
		}
		// The scrapes themselves are neither counted nor logged.
		if strings.Contains(body, `route="/metrics"`) {
			t.Errorf("got the metrics port's requests counted, want them left out")
		}
	})
	t.Run("Default", func(t *testing.T) {
		srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustDatabase(t)})
		if u := listenURL(srv.Stderr.String(), "terdut-server listening for metrics"); u != "" {
			t.Errorf("got a metrics port %s without --metrics-listen, want none", u)
		}
		// The people's port, which a route exposes for every path, never serves /metrics.
		status, body := srv.get(t, "/metrics", "")
		mustNotFound(t, "GET /metrics on --listen without --metrics-listen", status, body)
		mustContain(t, "the log", srv.Stderr.String(), "no --metrics-listen: /metrics is served nowhere")
	})
}

// TestServe_MetricsListenBusy checks that a --metrics-listen address that is taken stops the
// server at start, naming the setting, and leaves none of its ports open.
func TestServe_MetricsListenBusy(t *testing.T) {
	srv := startServe(t, env{"TERDUT_DATABASE_URL": pgtest.MustDatabase(t)})
	busy := strings.TrimPrefix(srv.URL, "http://")
	r := runCmd(t, env{"TERDUT_DATABASE_URL": pgtest.MustDatabase(t)}, "--listen", "127.0.0.1:0", "--metrics-listen", busy)
	if r.Err == nil || !strings.Contains(r.Err.Error(), "--metrics-listen "+busy) {
		t.Fatalf("got %v, want an error naming --metrics-listen %s", r.Err, busy)
	}
}
