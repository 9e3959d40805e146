package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// accessLines returns the access log's lines.
func accessLines(t *testing.T, srv *apitest.Server) []logLine {
	t.Helper()
	return logLines(t, srv, func(l logLine) bool { return l["msg"] == "request" })
}

// TestAccessLog: each request has a line with its method, route pattern (not its path),
// status, duration, principal and id; the id is always the server's, and the answer carries
// it; the client's X-Request-Id, when a plain token, is kept beside it as client_request_id. --access-log=false turns the lines off.
func TestAccessLog(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	ann := apitest.MustPerson(t, srv.Store, "ann", store.RoleMember)
	path := fmt.Sprintf("/api/users/%d/api-keys", ann.User.ID)

	for _, c := range []struct {
		name, sent string
		kept       bool
	}{
		{"Generated", "", false},
		{"FromClient", "9f1c2b7e-client-id", true},
		{"TooLong", strings.Repeat("a", 65), false},
		{"NotAToken", "two words", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := len(accessLines(t, srv))
			h := http.Header{}
			if c.sent != "" {
				h.Set("X-Request-Id", c.sent)
			}
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path, Bearer: ann.APIKey, Header: h})
			wantStatus(t, resp, http.StatusOK)
			id := resp.Header.Get("X-Request-Id")
			if id == "" || id == c.sent {
				t.Errorf("X-Request-Id: sent %q, got %q, want the server's own", c.sent, id)
			}
			clientID := ""
			if c.kept {
				clientID = c.sent
			}
			lines := accessLines(t, srv)
			if len(lines) != before+1 {
				t.Fatalf("access lines: got %d new, want 1", len(lines)-before)
			}
			l := lines[len(lines)-1]
			want := map[string]any{"level": "INFO", "method": "GET", "route": "/api/users/{id}/api-keys",
				"status": float64(200), "user_id": float64(ann.User.ID), "request_id": id}
			if clientID != "" { // the line names the client's id only when it kept one
				want["client_request_id"] = clientID
			} else if v, ok := l["client_request_id"]; ok {
				t.Errorf("client_request_id: got %v, want none", v)
			}
			for k, v := range want {
				if l[k] != v {
					t.Errorf("%s: got %v, want %v (line %v)", k, l[k], v, l)
				}
			}
			if d, ok := l["duration_ms"].(float64); !ok || d < 0 {
				t.Errorf("duration_ms: got %v, want a duration", l["duration_ms"])
			}
		})
	}
	// Anonymous, unmatched: no principal, and the raw path is not logged.
	srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/no/such/secret-looking-path"})
	lines := accessLines(t, srv)
	if len(lines) == 0 {
		t.Fatalf("access lines: got none, want one a request")
	}
	if l := lines[len(lines)-1]; l["route"] != "unmatched" || l["status"] != float64(404) || l["user_id"] != float64(0) {
		t.Errorf("unmatched request: got %v, want route unmatched, 404, user_id 0", l)
	}
	// A method is caller input too: Go's server takes any token of up to the header limit.
	long := strings.Repeat("X", 16<<10)
	srv.MustDo(t, apitest.Request{Method: long, Path: "/no/such/secret-looking-path"})
	lines = accessLines(t, srv)
	if m, _ := lines[len(lines)-1]["method"].(string); len(m) > 256 {
		t.Errorf("a %d-byte method: the access line quotes %d bytes of it, want at most 128 and the marker", len(long), len(m))
	}
	if strings.Contains(srv.Logs.String(), "secret-looking-path") {
		t.Errorf("the log holds a raw path")
	}

	t.Run("Off", func(t *testing.T) {
		off := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.AccessLog = nil })
		off.MustClaim(t)
		wantStatus(t, off.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/healthz"}), http.StatusOK)
		if n := len(accessLines(t, off)); n != 0 {
			t.Errorf("access lines with the access log off: got %d, want 0", n)
		}
	})
}

// TestCanceled: a client that hangs up while its request waits on the database is logged at
// INFO as canceled, not as an ERROR, and counted as 499, not 500.
func TestCanceled(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	ann := apitest.MustPerson(t, srv.Store, "ann", store.RoleMember)
	route := "/api/users/{id}/api-keys"

	// Key creation locks its user's row: hold it, so that the request waits.
	tx, err := srv.Store.Pool().Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck
	if _, err := tx.Exec(t.Context(), `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, ann.User.ID); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("%s/api/users/%d/api-keys", srv.URL, ann.User.ID),
		strings.NewReader(`{"name": "laptop"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+ann.APIKey)
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("got %d, want the request to be cut off by its client", resp.StatusCode)
	}
	series := func(status string) string {
		return `terdut_http_requests_total{method="POST",route="` + route + `",status="` + status + `"}`
	}
	waitFor(t, "the canceled request to be counted", func() bool {
		return metric(t, srv, series("499"))+metric(t, srv, series("500")) > 0
	})
	if n499, n500 := metric(t, srv, series("499")), metric(t, srv, series("500")); n499 != 1 || n500 != 0 {
		t.Errorf("counted: got %v as 499 and %v as 500, want 1 and 0", n499, n500)
	}
	if lines := logLines(t, srv, func(l logLine) bool { return l["level"] == "ERROR" }); len(lines) != 0 {
		t.Errorf("ERROR lines: got %v, want none", lines)
	}
	canceled := logLines(t, srv, func(l logLine) bool { return l["msg"] == "request canceled by its client" })
	if len(canceled) != 1 || canceled[0]["level"] != "INFO" {
		t.Errorf("canceled lines: got %v, want one at INFO", canceled)
	}
}

// TestCheckSlots_OverloadLog: refusals for want of a password check slot are counted one by
// one in the metrics, never logged as ERROR, and logged at most once a second.
func TestCheckSlots_OverloadLog(t *testing.T) {
	passwords, err := api.NewPasswords(8)
	if err != nil {
		t.Fatal(err)
	}
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.Passwords, o.PasswordChecks, o.PasswordCheckWait = passwords, 1, time.Millisecond
		o.LoginLimit = store.RateLimit{Max: 1000, Window: time.Minute}
	})
	srv.MustClaim(t)
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	overloaded := 0
	for round := range 3 {
		for i := range 16 {
			wg.Go(func() {
				resp, err := srv.Do(apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
					Body: map[string]string{"username": "ghost", "password": "guess-" + strconv.Itoa(round*100+i)}})
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Status == http.StatusServiceUnavailable {
					mu.Lock()
					overloaded++
					mu.Unlock()
				}
			})
		}
		wg.Wait()
	}
	elapsed := time.Since(start)
	if overloaded < 2 {
		t.Fatalf("got %d refused as overloaded, want several", overloaded)
	}
	if got := metric(t, srv, "terdut_password_checks_refused_total"); got != float64(overloaded) {
		t.Errorf("terdut_password_checks_refused_total: got %v, want %d", got, overloaded)
	}
	if lines := logLines(t, srv, func(l logLine) bool { return l["level"] == "ERROR" }); len(lines) != 0 {
		t.Errorf("ERROR lines: got %d (%v), want none", len(lines), lines[0])
	}
	warned := logLines(t, srv, func(l logLine) bool { return strings.HasPrefix(l["msg"].(string), "password checks overloaded") })
	if max := int(elapsed/time.Second) + 1; len(warned) < 1 || len(warned) > max {
		t.Errorf("overload lines: got %d for %d refusals in %s, want 1 to %d", len(warned), overloaded, elapsed, max)
	}
	total := 0.0
	for _, l := range warned {
		total += l["refused_since_last_line"].(float64)
	}
	if total > float64(overloaded) || total < 1 {
		t.Errorf("refusals the lines account for: got %v, want 1 to %d", total, overloaded)
	}
}
