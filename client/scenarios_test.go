package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestClient_DatabaseDown: with the server's database gone, every call fails with an error
// matching ErrUnavailable, CheckKey never answers a plain false, and Reconcile resets nothing.
func TestClient_DatabaseDown(t *testing.T) {
	t.Parallel()
	db := pgtest.MustDatabase(t)
	srv := apitest.NewServer(t, db, nil)
	c := operator(t, srv)
	person := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	held := mustClaim(t, c).APIKey.Key
	mustDropDatabase(t, db)

	calls := map[string]func() error{
		"status": func() error { _, err := c.Status(t.Context()); return err },
		"claim":  func() error { _, err := c.Claim(t.Context()); return err },
		"reset":  func() error { _, err := c.Reset(t.Context()); return err },
		"checkkey": func() error {
			ok, err := c.CheckKey(t.Context(), person.APIKey)
			if ok {
				return errors.New("got true")
			}
			return err
		},
		"reconcile": func() error { _, err := c.Reconcile(t.Context(), held); return err },
	}
	for name, call := range calls {
		err := call()
		var e *client.Error
		if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &e) || e.Status < 500 {
			t.Errorf("%s: got %v, want a 5xx *Error matching ErrUnavailable", name, err)
		}
	}
}

// TestClient_NoOperatorToken: on a server without --operator-token-file the claim is open,
// a reset is refused with ErrOperatorTokenNotConfigured, and so Reconcile cannot recover a
// lost key, but it still leaves a working one alone.
func TestClient_NoOperatorToken(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(o *api.Options) { o.OperatorTokens = nil })
	cl := mustClaim(t, mustClient(t, srv.URL))
	if cl.Generation != 1 || !hexKey.MatchString(cl.APIKey.Key) {
		t.Fatalf("open claim: got generation %d and a well-formed key %v, want 1 and true",
			cl.Generation, hexKey.MatchString(cl.APIKey.Key))
	}
	c := operator(t, srv) // a token the server does not know of
	_, err := c.Reset(t.Context())
	var e *client.Error
	if !errors.Is(err, client.ErrOperatorTokenNotConfigured) || !errors.As(err, &e) || e.Status != http.StatusForbidden {
		t.Fatalf("reset: got %v, want a 403 matching ErrOperatorTokenNotConfigured", err)
	}
	if errors.Is(err, client.ErrAlreadyClaimed) || errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("reset: got %v matching other sentinels, want ErrOperatorTokenNotConfigured only", err)
	}
	if _, err := c.Reconcile(t.Context(), ""); !errors.Is(err, client.ErrOperatorTokenNotConfigured) {
		t.Fatalf("reconcile without a key: got %v, want ErrOperatorTokenNotConfigured", err)
	}
	mustReconcile(t, c, cl.APIKey.Key, client.ActionNone, 1)
}

// TestClient_Foreign401: a 401 to the key check that does not come from terdut-server (an
// authenticating proxy in front of it) is an error, never a dead key, so Reconcile does not
// reset the claim over it.
func TestClient_Foreign401(t *testing.T) {
	t.Parallel()
	srv := newServer(t, nil)
	held := mustReconcile(t, operator(t, srv), "", client.ActionClaimed, 1).APIKey.Key
	behind := mustClient(t, newWallProxy(t, srv.URL, "/api/me").URL, client.WithOperatorToken(apitest.OperatorToken))
	ok, err := behind.CheckKey(t.Context(), held)
	if ok || !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("check key: got %v, %v, want false and the proxy's 401 as an error", ok, err)
	}
	if _, err := behind.Reconcile(t.Context(), held); !errors.Is(err, client.ErrUnauthorized) {
		t.Errorf("reconcile: got %v, want the proxy's 401 as an error", err)
	}
	if st := mustStatus(t, operator(t, srv)); st.Generation != 1 || !mustCheckKey(t, operator(t, srv), held) {
		t.Errorf("got %+v, want generation 1 and the held key working: no reset", st)
	}
}

// newWallProxy puts a reverse proxy in front of the server at target that answers 401 itself,
// in plain text, for the path wall, as an authenticating proxy would.
func newWallProxy(t *testing.T, target, wall string) *httptest.Server {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(u)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == wall {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	return front
}
