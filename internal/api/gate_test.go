package api_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
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

// TestGate_PendingOpenClaimSaysHowToClaim: with no operator configured (the open claim, as
// under make run) nobody will claim the install but whoever runs it, so the gate's refusal,
// JSON and page, says how instead of "try again shortly"; the JSON keeps its two fields and
// its code, and the curl line it gives claims the install when run as written.
func TestGate_PendingOpenClaimSaysHowToClaim(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens = nil })
	p := apitest.MustPerson(t, srv.Store, "first-admin", store.RoleAdmin)
	login := func(header http.Header) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login", Header: header,
			Body: map[string]string{"username": p.User.Username, "password": p.Password}})
	}
	claim := "curl -X POST " + srv.URL + "/api/bootstrap"

	resp := login(nil)
	var body map[string]string
	resp.JSON(t, &body)
	if resp.Status != http.StatusServiceUnavailable || len(body) != 2 || body["code"] != "bootstrap_pending" {
		t.Fatalf("JSON: got %d %s, want 503 with only error and code bootstrap_pending", resp.Status, resp.Body)
	}
	for _, want := range []string{"terdut-server bootstrap claim", claim, "no operator is configured"} {
		if !strings.Contains(body["error"], want) {
			t.Errorf("JSON error: got %q, want it to say %q", body["error"], want)
		}
	}
	if strings.Contains(body["error"], "try again shortly") {
		t.Errorf("JSON error: got %q, which tells to wait for an operator there is none of", body["error"])
	}
	page := login(http.Header{"Accept": {"text/html"}})
	if page.Status != http.StatusServiceUnavailable || !strings.Contains(page.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(page.Body), "terdut-server bootstrap claim") || !strings.Contains(string(page.Body), claim) ||
		strings.Contains(string(page.Body), "still being set up") {
		t.Fatalf("page: got %d %q %s, want 503 saying how to claim the install", page.Status, page.Header.Get("Content-Type"), page.Body)
	}

	// What it says works: the curl line, from this machine, claims the install.
	target := strings.TrimPrefix(claim, "curl -X POST ")
	res, err := http.Post(target, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: got %d, want 201", target, res.StatusCode)
	}
	if resp := login(nil); resp.Status != http.StatusOK {
		t.Fatalf("sign-in after the claim: got %d %s, want 200", resp.Status, resp.Body)
	}
}

// TestGate_PendingOpenClaimElsewhere: when the public URL is not this machine's, or the
// claim is on the operator's port, the refusal names the port to use rather than a URL the
// claim is not taken at.
func TestGate_PendingOpenClaimElsewhere(t *testing.T) {
	base := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OperatorTokens = nil })
	for name, tt := range map[string]struct {
		public string
		split  bool
		want   string
	}{
		"PublicHost":    {public: "https://terdut.example.com", want: "curl -X POST http://127.0.0.1:<the port of --listen>/api/bootstrap"},
		"OperatorsPort": {public: base.URL, split: true, want: "curl -X POST http://127.0.0.1:<the port of --operator-listen>/api/bootstrap"},
	} {
		t.Run(name, func(t *testing.T) {
			opts := base.Options
			opts.PublicURL, _ = url.Parse(tt.public)
			h := api.NewServer(base.Store, opts)
			if tt.split {
				h, _ = api.NewSplitServer(base.Store, opts)
			}
			hs := httptest.NewServer(h)
			t.Cleanup(hs.Close)
			resp := (&apitest.Server{URL: hs.URL}).MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
				Body: map[string]string{"username": "nobody", "password": "not checked while pending"}})
			var body struct{ Error string }
			resp.JSON(t, &body)
			if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" || !strings.Contains(body.Error, tt.want) {
				t.Fatalf("got %d %s, want 503 bootstrap_pending saying %q", resp.Status, resp.Body, tt.want)
			}
		})
	}
}
