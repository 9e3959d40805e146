package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestServe_AccessLog: through run(), n requests write n access lines in far fewer than n
// writes to standard error (the lines are held and written together, not one write system
// call a request), and a clean stop (the context's cancel, as SIGTERM does in main) writes
// every line held: none is lost. The interval is long, so that only the stop can have
// written the lines of the last requests.
func TestServe_AccessLog(t *testing.T) {
	const n, interval = 200, time.Hour
	e := env{"TERDUT_DATABASE_URL": pgtest.MustEmptyDatabase(t)}
	srv := startServe(t, e, "--public-url", "http://terdut.test:8080", "--access-log-interval", interval.String())
	writesBefore, start := srv.Stderr.Writes(), time.Now()
	for i := 0; i < n; i++ {
		status, body := srv.get(t, "/api/bootstrap/status", "")
		mustStatus(t, "GET /api/bootstrap/status", status, body, http.StatusOK, nil)
	}
	writes, took := srv.Stderr.Writes()-writesBefore, time.Since(start)

	// A security event is never held back: it is in the log as soon as its request is
	// answered, after the access lines held before it.
	resp, err := client.Post(srv.URL+"/api/auth/login", "application/json", strings.NewReader(`{"username":"x","password":"y"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	log := srv.Stderr.String()
	event := strings.Index(log, `"event":"login.password.refused"`)
	if event < 0 {
		t.Errorf("the refused sign-in's security event before the stop: got none, want it written at once:\n%s", log)
	} else if got := accessLines(t, log[:strings.LastIndexByte(log[:event], '\n')+1], "/api/bootstrap/status"); got != n {
		t.Errorf("access lines before the security event: got %d, want %d", got, n)
	}
	if err := srv.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if got := accessLines(t, srv.Stderr.String(), "/api/bootstrap/status"); got != n {
		t.Errorf("access lines after a clean stop: got %d, want %d", got, n)
	}
	// n lines fill less than the buffer: nothing but another log line (written at once, the
	// held lines before it) writes them before the stop. A write a request is what it must not do.
	if writes > 2 {
		t.Errorf("writes to stderr while serving %d requests in %s: got %d, want at most 2", n, took.Round(time.Millisecond), writes)
	}
}

// accessLines counts the access lines of route in a JSON log, failing on a line that is not JSON.
func accessLines(t *testing.T, log, route string) int {
	t.Helper()
	n := 0
	sc := bufio.NewScanner(strings.NewReader(log))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct{ Msg, Route string }
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("a log line that is not JSON: %v: %q", err, sc.Text())
		}
		if l.Msg == "request" && l.Route == route {
			n++
		}
	}
	return n
}
