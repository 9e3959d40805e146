package client_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestNew(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		for _, u := range []string{"http://127.0.0.1:8080", "https://terdut.example.com/", "http://terdut.ns.svc:8080/prefix/"} {
			if _, err := client.New(u, client.WithOperatorToken(apitest.OperatorToken)); err != nil {
				t.Errorf("New(%q): got %v, want nil", u, err)
			}
		}
	})
	t.Run("ErrBaseURL", func(t *testing.T) {
		for _, u := range []string{"", "terdut:8080", "/api", "ftp://host", "http://", "http://host/?a=1", "http://host/#x", "http://%zz"} {
			if c, err := client.New(u); err == nil {
				t.Errorf("New(%q): got %v, nil, want an error", u, c)
			}
		}
	})
	t.Run("ErrOperatorToken", func(t *testing.T) {
		const token = "operator-token-0123456789abcdef-with\nnewline"
		_, err := client.New("http://127.0.0.1:8080", client.WithOperatorToken(token))
		if err == nil {
			t.Fatal("got nil, want an error for a token that cannot be sent")
		}
		if strings.Contains(err.Error(), "operator-token-0123456789abcdef") {
			t.Errorf("got %q, want an error that does not repeat the token", err)
		}
	})
	t.Run("PathPrefix", func(t *testing.T) {
		// The real API behind a path prefix, as behind an ingress that strips it.
		srv := newServer(t, nil)
		prefixed := httptest.NewServer(http.StripPrefix("/terdut", srv.HTTP.Config.Handler))
		t.Cleanup(prefixed.Close)
		st := mustStatus(t, mustClient(t, prefixed.URL+"/terdut/"))
		if st.State != client.StatePending {
			t.Errorf("got %v, want pending", st)
		}
	})
}

func TestClient_Status(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		c := operator(t, newServer(t, nil))
		if got, want := mustStatus(t, c), (client.Status{State: client.StatePending}); got != want {
			t.Fatalf("before the claim: got %+v, want %+v", got, want)
		}
		mustClaim(t, c)
		if got, want := mustStatus(t, c), (client.Status{State: client.StateComplete, Generation: 1}); got != want {
			t.Fatalf("after the claim: got %+v, want %+v", got, want)
		}
	})
}

func TestClient_Claim(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		c := operator(t, newServer(t, nil))
		cl := mustClaim(t, c)
		if cl.Generation != 1 {
			t.Errorf("generation: got %d, want 1", cl.Generation)
		}
		u := cl.User
		if u.ID == 0 || u.Username != store.PrincipalUsername || u.Email != store.PrincipalEmail ||
			u.Role != "admin" || u.Kind != "service" || u.CreatedAt.IsZero() {
			t.Errorf("user: got %+v, want the bootstrap principal", u)
		}
		k := cl.APIKey
		if k.ID == 0 || k.UserID != u.ID || k.Name != store.PrincipalKeyName || !hexKey.MatchString(k.Key) || k.CreatedAt.IsZero() ||
			k.LastUsedAt != nil {
			t.Errorf("key: got %v (key well-formed: %v, last used %v), want a new, unused key of user %d", k, hexKey.MatchString(k.Key), k.LastUsedAt, u.ID)
		}
		me, err := c.Whoami(t.Context(), k.Key)
		if err != nil || me.ID != u.ID {
			t.Errorf("whoami with the new key: got %+v, %v, want user %d", me, err, u.ID)
		}
	})
	t.Run("ErrAlreadyClaimed", func(t *testing.T) {
		c := operator(t, newServer(t, nil))
		first := mustClaim(t, c)
		_, err := c.Claim(t.Context())
		var e *client.Error
		if !errors.Is(err, client.ErrAlreadyClaimed) || !errors.As(err, &e) {
			t.Fatalf("got %v, want ErrAlreadyClaimed", err)
		}
		if e.Status != http.StatusForbidden || e.Code != "bootstrap_already_completed" || e.Message == "" {
			t.Errorf("got %+v, want 403 bootstrap_already_completed with a message", e)
		}
		if errors.Is(err, client.ErrUnauthorized) || errors.Is(err, client.ErrOperatorTokenNotConfigured) {
			t.Errorf("got %v matching other sentinels, want ErrAlreadyClaimed only", err)
		}
		if !mustCheckKey(t, c, first.APIKey.Key) {
			t.Error("the first claim's key: got dead, want it still working")
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		srv := newServer(t, nil)
		for name, opts := range map[string][]client.Option{
			"wrong token": {client.WithOperatorToken("not-the-operator-token-0123456789abcdef")},
			"no token":    nil,
		} {
			_, err := mustClient(t, srv.URL, opts...).Claim(t.Context())
			var e *client.Error
			if !errors.Is(err, client.ErrUnauthorized) || !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
				t.Errorf("%s: got %v, want a 401 matching ErrUnauthorized", name, err)
			}
		}
		if st := mustStatus(t, operator(t, srv)); st.State != client.StatePending {
			t.Errorf("after refused claims: got %+v, want pending", st)
		}
	})
}

func TestClient_Reset(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		srv := newServer(t, nil)
		c := operator(t, srv)
		person := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
		cl := mustClaim(t, c)
		rr, err := c.Reset(t.Context())
		if want := (client.ResetResult{State: client.StatePending, Generation: 1, RevokedAPIKeys: 1}); err != nil || rr != want {
			t.Fatalf("reset: got %+v, %v, want %+v", rr, err, want)
		}
		if mustCheckKey(t, c, cl.APIKey.Key) {
			t.Error("the principal's key after the reset: got working, want revoked")
		}
		if _, err := c.Whoami(t.Context(), person.APIKey); err != nil {
			t.Errorf("a person's key after the reset: got %v, want it untouched", err)
		}
		if st := mustStatus(t, c); st.State != client.StatePending {
			t.Errorf("status: got %+v, want pending", st)
		}
		rr, err = c.Reset(t.Context())
		if want := (client.ResetResult{State: client.StatePending, Generation: 1}); err != nil || rr != want {
			t.Errorf("reset while pending: got %+v, %v, want %+v", rr, err, want)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		srv := newServer(t, nil)
		cl := mustClaim(t, operator(t, srv))
		_, err := mustClient(t, srv.URL, client.WithOperatorToken("not-the-operator-token-0123456789abcdef")).Reset(t.Context())
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("got %v, want ErrUnauthorized", err)
		}
		// An API key, even the bootstrap principal's, is no operator token.
		_, err = mustClient(t, srv.URL, client.WithOperatorToken(cl.APIKey.Key)).Reset(t.Context())
		if !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("with the principal's API key: got %v, want ErrUnauthorized", err)
		}
		if st := mustStatus(t, operator(t, srv)); st.State != client.StateComplete {
			t.Errorf("after refused resets: got %+v, want complete", st)
		}
	})
	t.Run("ErrRateLimited", func(t *testing.T) {
		const window = time.Hour
		srv := newServer(t, func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 1, Window: window} })
		c := operator(t, srv)
		if _, err := c.Reset(t.Context()); err != nil {
			t.Fatalf("first reset: got %v, want nil", err)
		}
		_, err := c.Reset(t.Context())
		var e *client.Error
		if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &e) || e.Status != http.StatusTooManyRequests {
			t.Fatalf("second reset: got %v, want a 429 matching ErrRateLimited", err)
		}
		if e.RetryAfter <= 0 || e.RetryAfter > window {
			t.Errorf("RetryAfter: got %s, want within (0, %s]", e.RetryAfter, window)
		}
	})
}
