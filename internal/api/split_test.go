package api_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestNewSplitServer: the operator's three endpoints answer on the operator's handler only,
// every other path answers 404 there, and the two handlers share one server: a refusal on
// the operator's port is a security event with the client address, its request an access
// line, and both count in the metrics that people's port serves.
func TestNewSplitServer(t *testing.T) {
	base := apitest.NewServer(t, pgtest.MustDatabase(t), nil) // for its options and store
	logs := &apitest.SyncBuffer{}
	opts := base.Options
	opts.Logger, opts.AccessLog = slog.New(slog.NewJSONHandler(logs, nil)), logs
	peopleH, operatorH := api.NewSplitServer(base.Store, opts)
	peopleHTTP, operatorHTTP := httptest.NewServer(peopleH), httptest.NewServer(operatorH)
	t.Cleanup(peopleHTTP.Close)
	t.Cleanup(operatorHTTP.Close)
	people, operator := &apitest.Server{URL: peopleHTTP.URL}, &apitest.Server{URL: operatorHTTP.URL}

	mustStatus := func(t *testing.T, srv *apitest.Server, method, path, bearer string, want int) apitest.Response {
		t.Helper()
		resp := srv.MustDo(t, apitest.Request{Method: method, Path: path, Bearer: bearer})
		if resp.Status != want {
			t.Errorf("%s %s: got %d %s, want %d", method, path, resp.Status, resp.Body, want)
		}
		return resp
	}
	mustNotFound := func(t *testing.T, srv *apitest.Server, method, path string) {
		t.Helper()
		if resp := mustStatus(t, srv, method, path, apitest.OperatorToken, http.StatusNotFound); resp.Code() != "not_found" {
			t.Errorf("%s %s: got code %q, want not_found", method, path, resp.Code())
		}
	}

	t.Run("OperatorPort", func(t *testing.T) {
		mustStatus(t, operator, http.MethodGet, "/api/bootstrap/status", "", http.StatusOK)
		mustStatus(t, operator, http.MethodPost, "/api/bootstrap", "wrong-token", http.StatusUnauthorized)
		mustStatus(t, operator, http.MethodPost, "/api/bootstrap", apitest.OperatorToken, http.StatusCreated)
		mustStatus(t, operator, http.MethodPost, "/api/bootstrap/reset", apitest.OperatorToken, http.StatusOK)
		for _, path := range []string{"/healthz", "/readyz", "/metrics", "/", "/login", "/api/me", "/api/users", "/api/audit", "/auth/oidc/login"} {
			mustNotFound(t, operator, http.MethodGet, path)
		}
		mustNotFound(t, operator, http.MethodPost, "/api/auth/login")
	})

	t.Run("PeoplePort", func(t *testing.T) {
		mustNotFound(t, people, http.MethodGet, "/api/bootstrap/status")
		mustNotFound(t, people, http.MethodPost, "/api/bootstrap")
		mustNotFound(t, people, http.MethodPost, "/api/bootstrap/reset")
		mustStatus(t, people, http.MethodGet, "/healthz", "", http.StatusOK)
	})

	t.Run("Shared", func(t *testing.T) {
		metrics := string(mustStatus(t, people, http.MethodGet, "/metrics", "", http.StatusOK).Body)
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
