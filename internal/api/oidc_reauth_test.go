package api_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// signInWithAuthTime signs alice in, the provider saying she authenticated at authTime (nil:
// no auth_time claim), and returns the callback's answer.
func signInWithAuthTime(t *testing.T, srv *apitest.Server, p *oidctest.Provider, stepUp bool, authTime *time.Time) apitest.Response {
	t.Helper()
	p.NextTokenOverride(func(claims map[string]any) {
		delete(claims, "auth_time")
		if authTime != nil {
			claims["auth_time"] = authTime.Unix()
		}
	})
	start := srv.StartOIDC
	if stepUp {
		start = srv.StartOIDCStepUp
	}
	f, err := start(t.Context(), p, "alice")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.FinishOIDC(f)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func ago(d time.Duration) *time.Time { at := time.Now().Add(-d); return &at }

// TestAPIKeys_SSOKeyNeedsFreshProviderAuthentication: a single sign-on session makes a key
// only if the provider says (auth_time) the person authenticated within the window, however
// new the session is: a provider that remembered the person for hours signs them in again
// without a password, and that proves nobody is at the keyboard. The refusal names the
// step-up sign-in, which asks the provider for a fresh authentication.
func TestAPIKeys_SSOKeyNeedsFreshProviderAuthentication(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.SSOKeySignInWindow = 10 * time.Minute })
	srv.MustClaim(t)
	createKey := func(t *testing.T, c *http.Cookie, id int64) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(id, "/api-keys"), Cookie: c,
			Body: map[string]string{"name": "k"}})
	}
	wantStepUpAsked := func(t *testing.T, resp apitest.Response) {
		t.Helper()
		wantAPIError(t, resp, http.StatusForbidden, "recent_sign_in_required")
		var body struct {
			SignInURL string `json:"sign_in_url"`
		}
		resp.JSON(t, &body)
		if body.SignInURL != "/auth/oidc/login?reauth=1" {
			t.Errorf("sign_in_url: got %q, want /auth/oidc/login?reauth=1", body.SignInURL)
		}
	}

	for name, authTime := range map[string]*time.Time{"Remembered": ago(2 * time.Hour), "NoAuthTime": nil} {
		t.Run(name, func(t *testing.T) {
			resp := signInWithAuthTime(t, srv, p, false, authTime)
			c := resp.Cookie("terdut_session")
			if resp.Status != http.StatusSeeOther || c == nil {
				t.Fatalf("sign-in: got %d %s, want 303 with a session (signing in does not need a fresh authentication)", resp.Status, resp.Body)
			}
			wantStepUpAsked(t, createKey(t, c, mustMe(t, srv, c).ID))
		})
	}

	t.Run("StepUp", func(t *testing.T) {
		f := srv.MustStartOIDC(t, p, "alice")
		q := mustQuery(t, f.AuthURL)
		if q.Has("max_age") || strings.Contains(q.Get("prompt"), "login") {
			t.Errorf("an ordinary sign-in's authorization request: got max_age=%q prompt=%q, want neither", q.Get("max_age"), q.Get("prompt"))
		}
		f, err := srv.StartOIDCStepUp(t.Context(), p, "alice")
		if err != nil {
			t.Fatal(err)
		}
		q = mustQuery(t, f.AuthURL)
		if q.Get("max_age") != "0" || !strings.Contains(q.Get("prompt"), "login") {
			t.Errorf("the step-up's authorization request: got max_age=%q prompt=%q, want max_age=0 prompt=login", q.Get("max_age"), q.Get("prompt"))
		}

		// A provider that did not authenticate the person during the step-up is refused, and
		// so is an auth_time from the future: no session.
		for _, c := range []struct {
			name     string
			authTime *time.Time
			status   int
			code     string
		}{
			{"Remembered", ago(2 * time.Hour), http.StatusUnauthorized, "sso_reauth_not_fresh"},
			{"NoAuthTime", nil, http.StatusUnauthorized, "sso_auth_time_missing"},
			{"Future", ago(-time.Hour), http.StatusUnauthorized, "invalid_id_token"},
		} {
			before := count(t, srv, `SELECT count(*) FROM sessions`)
			resp := signInWithAuthTime(t, srv, p, true, c.authTime)
			if resp.Status != c.status || resp.Code() != c.code || resp.Cookie("terdut_session") != nil {
				t.Errorf("%s step-up: got %d %s, want %d %s and no session", c.name, resp.Status, resp.Body, c.status, c.code)
			}
			if n := count(t, srv, `SELECT count(*) FROM sessions`); n != before {
				t.Errorf("%s step-up: sessions got %d, want %d", c.name, n, before)
			}
		}

		resp := signInWithAuthTime(t, srv, p, true, ago(0))
		c := resp.Cookie("terdut_session")
		if resp.Status != http.StatusSeeOther || c == nil {
			t.Fatalf("fresh step-up: got %d %s, want 303 with a session", resp.Status, resp.Body)
		}
		wantStatus(t, createKey(t, c, mustMe(t, srv, c).ID), http.StatusCreated)
	})
}

func mustQuery(t *testing.T, u string) url.Values {
	t.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	return parsed.Query()
}
