package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// wrk is the HTTP load generator of the API-key figures and of the sign-in flood: written in
// C on epoll, in a process of its own, it costs per request about what pgbench's client does.
//
// wrk sends every request of a run with the same key: the query reads the key's row and its
// user's by primary key either way, and last_used_at is written at most once per key in a
// resolution interval, so one key or 32 costs Postgres the same.

var (
	wrkRate     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkRequests = regexp.MustCompile(`(?m)^\s*([0-9]+) requests in `)
	wrkNon2xx   = regexp.MustCompile(`(?m)^\s*Non-2xx or 3xx responses: ([0-9]+)`)
	wrkErrors   = regexp.MustCompile(`(?m)^\s*Socket errors: .*`)
)

// findWrk returns the path of wrk, installing Debian's package with scripts/ensure-wrk.sh
// first when install is set and wrk is missing. It returns "" when wrk cannot be had, and
// why goes to the progress output.
func (e *env) findWrk(ctx context.Context, install bool) string {
	if p, err := exec.LookPath("wrk"); err == nil {
		return p
	}
	if !install {
		e.cfg.progressf("wrk is not installed: the API-key figures cannot be measured (scripts/ensure-wrk.sh installs wrk)")
		return ""
	}
	script, err := ensureWrkScript()
	if err != nil {
		e.cfg.progressf("wrk is not installed and %v", err)
		return ""
	}
	e.cfg.progressf("installing wrk with %s", script)
	cmd := exec.CommandContext(ctx, script)
	if out, err := cmd.CombinedOutput(); err != nil {
		e.cfg.progressf("%s failed (%v)\n%s", script, err, out)
		return ""
	}
	p, err := exec.LookPath("wrk")
	if err != nil {
		e.cfg.progressf("%s succeeded but wrk is still not on PATH", script)
		return ""
	}
	return p
}

// ensureWrkScript finds scripts/ensure-wrk.sh next to this package's source.
func ensureWrkScript() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("the bench cannot locate its source to find scripts/ensure-wrk.sh")
	}
	p := filepath.Join(filepath.Dir(file), "..", "scripts", "ensure-wrk.sh")
	if _, err := os.Stat(p); err != nil {
		return "", fmt.Errorf("scripts/ensure-wrk.sh: %w", err)
	}
	return p, nil
}

// runWrk runs wrk against target from clients connections on 2 threads for d, with extra
// arguments before the target (headers, a script), and returns its report and the CPU time
// it used. It refuses to send load anywhere but 127.0.0.1.
func (e *env) runWrk(ctx context.Context, target string, clients int, d time.Duration, extra ...string) ([]byte, time.Duration, error) {
	if u, err := url.Parse(target); err != nil || u.Hostname() != "127.0.0.1" {
		return nil, 0, fmt.Errorf("wrk: refusing to send load to %q: only 127.0.0.1", target)
	}
	args := []string{"-t", "2", "-c", strconv.Itoa(clients), "-d", strconv.Itoa(int(math.Ceil(d.Seconds()))) + "s",
		"--timeout", "10s"}
	args = append(append(args, extra...), target)
	cmd := exec.CommandContext(ctx, e.wrk, args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// wrk echoes no header back, so no key is in its output; the command line is not
		// quoted here for the same reason.
		return nil, 0, fmt.Errorf("wrk %s: %w\n%s", target, err, out)
	}
	return out, cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime(), nil
}

// parseWrk reads the rate and the number of answers from wrk's report. Any answer other than
// 2xx or 3xx (wrk does not tell them apart), or any socket error, is an error: a refused
// request is cheaper than a served one and must not count.
func parseWrk(out []byte) (result, error) {
	if m := wrkNon2xx.FindSubmatch(out); m != nil {
		return result{}, fmt.Errorf("%s answers were not 2xx or 3xx, want all 200", m[1])
	}
	if m := wrkErrors.Find(out); m != nil {
		return result{}, errors.New(strings.TrimSpace(string(m)))
	}
	rate, n := wrkRate.FindSubmatch(out), wrkRequests.FindSubmatch(out)
	if rate == nil || n == nil {
		return result{}, errors.New("no request count or rate in its report")
	}
	var r result
	var err error
	if r.rate, err = strconv.ParseFloat(string(rate[1]), 64); err != nil {
		return result{}, fmt.Errorf("wrk's Requests/sec: %w", err)
	}
	if r.ops, err = strconv.Atoi(string(n[1])); err != nil {
		return result{}, fmt.Errorf("requests: %w", err)
	}
	if r.ops == 0 {
		return result{}, errors.New("no request was answered")
	}
	return r, nil
}
