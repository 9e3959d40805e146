package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/pgtest"
)

// TestNewSplitServer: the operator's three endpoints answer on the operator's handler only,
// every other path answers 404 there, and the two handlers share one server: a refusal on
// the operator's port is a security event with the client address, its request an access
// line, and both count in the metrics that people's port serves.
func TestNewSplitServer(t *testing.T) {
	base := apitest.NewServer(t, pgtest.MustDatabase(t), nil) // for its options and store
	logs := &apitest.SyncBuffer{}
	opts := base.Options
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	peopleH, operatorH := api.NewSplitServer(base.Store, opts)
	people, operator := httptest.NewServer(peopleH), httptest.NewServer(operatorH)
	t.Cleanup(people.Close)
	t.Cleanup(operator.Close)

	send := func(t *testing.T, url, method, path, bearer string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	mustNotFound := func(t *testing.T, port, url, method, path string) {
		t.Helper()
		status, body := send(t, url, method, path, apitest.OperatorToken)
		var e struct{ Error, Code string }
		if status != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Code != "not_found" || e.Error == "" {
			t.Errorf("%s %s on %s's port: got %d %s, want 404 not_found", method, path, port, status, body)
		}
	}

	t.Run("OperatorPort", func(t *testing.T) {
		if status, body := send(t, operator.URL, http.MethodGet, "/api/bootstrap/status", ""); status != http.StatusOK {
			t.Errorf("status: got %d %s, want 200", status, body)
		}
		if status, body := send(t, operator.URL, http.MethodPost, "/api/bootstrap", "wrong-token"); status != http.StatusUnauthorized {
			t.Errorf("claim with a wrong token: got %d %s, want 401", status, body)
		}
		if status, body := send(t, operator.URL, http.MethodPost, "/api/bootstrap", apitest.OperatorToken); status != http.StatusCreated {
			t.Errorf("claim: got %d %s, want 201", status, body)
		}
		if status, body := send(t, operator.URL, http.MethodPost, "/api/bootstrap/reset", apitest.OperatorToken); status != http.StatusOK {
			t.Errorf("reset: got %d %s, want 200", status, body)
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/", "/login", "/api/me", "/api/users", "/api/audit", "/auth/oidc/login"} {
			mustNotFound(t, "the operator", operator.URL, http.MethodGet, path)
		}
		mustNotFound(t, "the operator", operator.URL, http.MethodPost, "/api/auth/login")
	})

	t.Run("PeoplePort", func(t *testing.T) {
		mustNotFound(t, "people", people.URL, http.MethodGet, "/api/bootstrap/status")
		mustNotFound(t, "people", people.URL, http.MethodPost, "/api/bootstrap")
		mustNotFound(t, "people", people.URL, http.MethodPost, "/api/bootstrap/reset")
		if status, body := send(t, people.URL, http.MethodGet, "/healthz", ""); status != http.StatusOK {
			t.Errorf("healthz: got %d %s, want 200", status, body)
		}
	})

	t.Run("Shared", func(t *testing.T) {
		_, metrics := send(t, people.URL, http.MethodGet, "/metrics", "")
		if !strings.Contains(metrics, `route="/api/bootstrap/reset"`) {
			t.Errorf("people's /metrics counts no request of the operator's port:\n%s", metrics)
		}
		var refused, claimLine, accessLine bool
		for line := range bytes.Lines([]byte(logs.String())) {
			var l map[string]any
			if err := json.Unmarshal(line, &l); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			switch {
			case l["event"] == "operator.refused" && l["client_addr"] == "127.0.0.1":
				refused = true
			case l["event"] == "bootstrap.claim" && l["remote_addr"] == "127.0.0.1":
				claimLine = true
			case l["msg"] == "request" && l["route"] == "/api/bootstrap":
				accessLine = true
			}
		}
		if !refused || !claimLine || !accessLine {
			t.Errorf("log: got refusal event %v, claim line %v, access line %v, want all three, with the client address:\n%s",
				refused, claimLine, accessLine, logs)
		}
	})
}
