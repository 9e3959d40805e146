package docs

import (
	"bufio"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// metricsPage documents every metric the server serves.
const metricsPage = "metrics.md"

// metricRowPattern reads a row of the page's tables: | `name` | type | labels | meaning |
var metricRowPattern = regexp.MustCompile("^\\| `([a-z_]+\\*?)` \\| ([a-z]+) \\|([^|]*)\\|")

// metricsServer is a terdut-server binary serving in a process of the test.
type metricsServer struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	log   strings.Builder
	addrs map[string]string // "listening" message to address
	done  chan struct{}
}

// startMetricsServer runs the real binary on loopback ports the kernel picks, with metrics
// on a port of their own, and returns once both ports are in its log. It is stopped (SIGTERM)
// when the test ends.
func startMetricsServer(t *testing.T, env []string) *metricsServer {
	t.Helper()
	s := &metricsServer{addrs: map[string]string{}, done: make(chan struct{})}
	s.cmd = exec.Command(mustServerBinary(t), "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--password-hash-cost", "4", "--access-log=false")
	s.cmd.Env = env
	stderr, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stdout = io.Discard
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.done:
		case <-time.After(2 * time.Minute):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var line struct{ Msg, Addr string }
			s.mu.Lock()
			s.log.WriteString(sc.Text() + "\n")
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Addr != "" {
				s.addrs[line.Msg] = line.Addr
			}
			s.mu.Unlock()
		}
		_ = s.cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		s.mu.Lock()
		people, metrics := s.addrs["terdut-server listening"], s.addrs["terdut-server listening for metrics"]
		log := s.log.String()
		s.mu.Unlock()
		if people != "" && metrics != "" {
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("terdut-server exited before listening:\n%s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("terdut-server did not listen within 2m:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// url returns the base URL of the port whose "listening" line is msg.
func (s *metricsServer) url(msg string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return "http://" + s.addrs[msg]
}

// mustDo sends a request and returns its status.
func mustDo(t *testing.T, method, url, bearer, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestMetricsPage scrapes a real server, after requests that make it count what it counts
// (the gate's refusal, a claim and a second one, wrong passwords, a wrong operator token, a
// reset), and checks that the page names every metric family it serves, with its type; and
// that every terdut_* metric the page names is one the code defines.
func TestMetricsPage(t *testing.T) {
	token := mustOperatorToken(t)
	tokenFile := filepath.Join(t.TempDir(), "operator-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := startMetricsServer(t, []string{"PATH=" + os.Getenv("PATH"), "TERDUT_DATABASE_URL=" + pgtest.MustDatabase(t),
		"TERDUT_OPERATOR_TOKEN_FILE=" + tokenFile})
	base := srv.url("terdut-server listening")
	login := `{"username":"nobody","password":"wrong-password"}`
	for _, r := range []struct {
		method, path, bearer, body string
		want                       int
	}{
		{"GET", "/healthz", "", "", 200},
		{"GET", "/readyz", "", "", 200},
		{"POST", "/api/auth/login", "", login, 503}, // the gate
		{"POST", "/api/bootstrap", token, "", 201},
		{"POST", "/api/bootstrap", token, "", 403},
		{"POST", "/api/auth/login", "", login, 401},
		{"POST", "/api/bootstrap/reset", "wrong-" + token, "", 401},
		{"POST", "/api/bootstrap/reset", token, "", 200},
		{"GET", "/no-such-path", "", "", 404},
	} {
		if got := mustDo(t, r.method, base+r.path, r.bearer, r.body); got != r.want {
			t.Fatalf("%s %s: got %d, want %d", r.method, r.path, got, r.want)
		}
	}
	resp, err := http.Get(srv.url("terdut-server listening for metrics") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	scrape, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: got %d, %v; want 200", resp.StatusCode, err)
	}

	page, err := os.ReadFile(metricsPage)
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]string{} // name (or prefix*) to type
	for _, line := range strings.Split(string(page), "\n") {
		if m := metricRowPattern.FindStringSubmatch(line); m != nil {
			documented[m[1]] = m[2]
		}
	}
	served := map[string]string{}
	for _, line := range strings.Split(string(scrape), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			served[f[2]] = f[3]
		}
	}
	// What the requests above must have made the server serve: a scrape that lost them
	// would check nothing.
	for _, want := range []string{"terdut_build_info", "terdut_http_requests_total", "terdut_http_request_duration_seconds",
		"terdut_signins_refused_total", "terdut_bootstrap_claims_total", "terdut_bootstrap_resets_total",
		"terdut_operator_token_failures_total", "terdut_bootstrap_pending", "go_goroutines", "process_cpu_seconds_total"} {
		if served[want] == "" {
			t.Errorf("got no %s in the scrape, want the requests to have made it:\n%s", want, scrape)
		}
	}
	for name, typ := range served {
		doc, ok := documented[name]
		if !ok {
			prefix, _, _ := strings.Cut(name, "_")
			if _, ok = documented[prefix+"_*"]; ok && prefix != "terdut" {
				continue
			}
			t.Errorf("the server serves %s (%s), which %s does not name: add a row for it", name, typ, metricsPage)
			continue
		}
		if doc != typ {
			t.Errorf("%s calls %s a %s, want %s, as the server serves it", metricsPage, name, doc, typ)
		}
	}
	if len(documented) < 10 {
		t.Fatalf("got %d metrics from %s, want every one: is the page being read?", len(documented), metricsPage)
	}
	defined := mustDefinedMetricNames(t)
	for name := range documented {
		if strings.HasPrefix(name, "terdut_") && !defined[name] {
			t.Errorf("%s names %s, which no Go file of the server defines", metricsPage, name)
		}
	}
}

// metricNamePattern finds metric names in Go source, such as Name: "terdut_signins_total".
var metricNamePattern = regexp.MustCompile(`"(terdut_[a-z_]+)"`)

// mustDefinedMetricNames returns the terdut_* strings of the server's non-test Go files.
func mustDefinedMetricNames(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	for _, dir := range []string{"../internal", "../cmd"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range metricNamePattern.FindAllStringSubmatch(string(src), -1) {
				names[m[1]] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return names
}
