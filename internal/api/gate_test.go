package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/apitest"
	"github.com/terdut-server/terdut-server/internal/store"
)

func TestGate_PendingRefusesPasswordSignIn(t *testing.T) {
	srv := newServer(t)
	p := apitest.MustPerson(t, srv.Store, "early-bird", store.RoleAdmin)
	login := func(username, password string, header http.Header) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login", Header: header,
			Body: map[string]string{"username": username, "password": password}})
	}
	for name, creds := range map[string][2]string{"Right": {p.User.Username, p.Password},
		"WrongPassword": {p.User.Username, "nope-nope-nope"}, "UnknownUser": {"ghost", "whatever-1"}} {
		resp := login(creds[0], creds[1], nil)
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: got %d %s (Retry-After %q), want 503 bootstrap_pending with Retry-After",
				name, resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
		if resp.Cookie("terdut_session") != nil {
			t.Fatalf("%s: got a session cookie while pending", name)
		}
	}
	page := login(p.User.Username, p.Password, http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	if page.Status != http.StatusServiceUnavailable || !strings.Contains(page.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.Body), "still being set up") || page.Header.Get("Retry-After") == "" {
		t.Fatalf("browser: got %d %q %s, want 503 with the set-up page", page.Status, page.Header.Get("Content-Type"), page.Body)
	}
	if sessions := count(t, srv, `SELECT count(*) FROM sessions`); sessions != 0 {
		t.Fatalf("got %d sessions, want 0", sessions)
	}
	srv.MustClaim(t)
	if resp := login(p.User.Username, p.Password, nil); resp.Status != http.StatusOK {
		t.Fatalf("after the claim: got %d %s, want 200", resp.Status, resp.Body)
	}
}

func TestGate_PendingKeepsTheRestWorking(t *testing.T) {
	srv := newServer(t)
	p := apitest.MustPerson(t, srv.Store, "existing", store.RoleMember)
	for _, path := range []string{"/healthz", "/readyz", "/metrics", "/api/bootstrap/status", "/login"} {
		if resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: path}); resp.Status != http.StatusOK {
			t.Fatalf("GET %s while pending: got %d %s, want 200", path, resp.Status, resp.Body)
		}
	}
	if resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: p.APIKey}); resp.Status != http.StatusOK {
		t.Fatalf("an existing user's API key while pending: got %d %s, want 200", resp.Status, resp.Body)
	}
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users/" + itoa(p.User.ID) + "/api-keys",
		Bearer: p.APIKey, Body: map[string]string{"name": "ci"}})
	if resp.Status != http.StatusCreated {
		t.Fatalf("creating a key while pending: got %d %s, want 201", resp.Status, resp.Body)
	}
	metrics := string(srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
	for _, want := range []string{"terdut_bootstrap_pending 1",
		`terdut_http_requests_total{method="POST",route="/api/users/{id}/api-keys",status="201"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q:\n%s", want, metrics)
		}
	}
	if strings.Contains(metrics, "/api/users/"+itoa(p.User.ID)) {
		t.Fatal("metrics hold a raw path with an id; want route patterns only")
	}
	srv.MustClaim(t)
	metrics = string(srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
	for _, want := range []string{"terdut_bootstrap_pending 0", `terdut_bootstrap_claims_total{outcome="claimed"} 1`} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("metrics lack %q after the claim", want)
		}
	}
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }
