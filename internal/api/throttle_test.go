package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestLogin_Throttle: failed password sign-ins are counted per username in the database, so
// guessing is limited across every replica, and a name that does not exist is throttled just
// like one that does (the answer says nothing about which names exist).
func TestLogin_Throttle(t *testing.T) {
	db := pgtest.MustDatabase(t)
	limit := func(o *api.Options) { o.LoginLimit = store.RateLimit{Max: 3, Window: time.Hour} }
	a, b := apitest.NewServer(t, db, limit), apitest.NewServer(t, db, limit)
	a.MustClaim(t)
	alice := apitest.MustPerson(t, a.Store, "alice", store.RoleMember)
	bob := apitest.MustPerson(t, a.Store, "bob", store.RoleMember)
	login := func(srv *apitest.Server, username, password string) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
			Body: map[string]string{"username": username, "password": password}})
	}
	for _, name := range []string{"alice", "ghost"} {
		for i, srv := range []*apitest.Server{a, b, a} {
			if resp := login(srv, name, "wrong-guess-"+strconv.Itoa(i)); resp.Status != http.StatusUnauthorized {
				t.Fatalf("%s, guess %d: got %d %s, want 401", name, i+1, resp.Status, resp.Body)
			}
		}
		// Past the limit, even the right password waits: the replica that saw none of the guesses agrees.
		resp := login(b, name, alice.Password)
		retry, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		if resp.Status != http.StatusTooManyRequests || resp.Code() != "rate_limited" || retry < 1 || retry > 3600 ||
			resp.Cookie("terdut_session") != nil {
			t.Fatalf("%s past the limit: got %d %s Retry-After %q, want 429 rate_limited, 1..3600, no session",
				name, resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
	}
	if resp := login(a, "ALICE", "x-another-guess"); resp.Status != http.StatusTooManyRequests {
		t.Fatalf("the same name in another case: got %d, want 429", resp.Status)
	}
	// Other people are not affected.
	if resp := login(a, "bob", bob.Password); resp.Status != http.StatusOK {
		t.Fatalf("bob: got %d %s, want 200", resp.Status, resp.Body)
	}
	metrics := string(a.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"}).Body)
	if want := `terdut_signins_refused_total{method="password",reason="rate_limited"}`; !strings.Contains(metrics, want) {
		t.Fatalf("metrics lack %s", want)
	}
}
