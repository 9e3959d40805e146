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

// signInCounts is what a refused sign-in must leave as it was.
type signInCounts struct{ users, sessions, ssoUsers int }

func countSignIns(t *testing.T, srv *apitest.Server) signInCounts {
	t.Helper()
	return signInCounts{
		users:    count(t, srv, `SELECT count(*) FROM users`),
		sessions: count(t, srv, `SELECT count(*) FROM sessions`),
		ssoUsers: count(t, srv, `SELECT count(*) FROM users WHERE oidc_subject IS NOT NULL`),
	}
}

// withQuery returns req with the query parameter key set to value, or removed when value is "".
func withQuery(req apitest.Request, key, value string) apitest.Request {
	path, rawQuery, _ := strings.Cut(req.Path, "?")
	q, _ := url.ParseQuery(rawQuery)
	q.Del(key)
	if value != "" {
		q.Set(key, value)
	}
	req.Path = path + "?" + q.Encode()
	return req
}

func TestOIDC_CallbackRefused(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) { o.OIDC.AllowedGroups = []string{"users"} })
	srv.MustClaim(t)
	p.AddUser(oidctest.User{Subject: "outsider", PreferredUsername: "outsider", Email: "outsider@example.test",
		Groups: []string{"contractors"}})
	p.AddUser(oidctest.User{Subject: "nogroups", PreferredUsername: "nogroups"})

	// Each case builds the failing callback request, arming the provider's faults as it needs;
	// the cases run one after another because the faults are one-shot and provider-wide.
	cases := []struct {
		name   string
		build  func(t *testing.T) apitest.Request
		status int
		code   string
	}{
		{"ErrStateTampered", func(t *testing.T) apitest.Request {
			req := srv.MustStartOIDC(t, p, "alice").Request()
			state, swap := []byte(req.Cookie.Value), byte('A')
			if state[0] == swap {
				swap = 'B'
			}
			state[0] = swap
			return withQuery(req, "state", string(state))
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrStateCookieMissing", func(t *testing.T) apitest.Request {
			req := srv.MustStartOIDC(t, p, "alice").Request()
			req.Cookie = nil
			return req
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrStateCookieOfAnotherFlow", func(t *testing.T) apitest.Request {
			mine, theirs := srv.MustStartOIDC(t, p, "alice"), srv.MustStartOIDC(t, p, "alice")
			req := mine.Request()
			req.Cookie = theirs.StateCookie
			return req
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrStateForged", func(t *testing.T) apitest.Request {
			// A state and cookie that agree, but no sign-in was ever started with them.
			req := srv.MustStartOIDC(t, p, "alice").Request()
			forged := strings.Repeat("A", len(req.Cookie.Value))
			req = withQuery(req, "state", forged)
			req.Cookie = &http.Cookie{Name: req.Cookie.Name, Value: forged}
			return req
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrStateExpired", func(t *testing.T) apitest.Request {
			req := srv.MustStartOIDC(t, p, "alice").Request()
			if _, err := srv.Store.Pool().Exec(t.Context(),
				`UPDATE oidc_logins SET expires_at = now() - interval '1 second'`); err != nil {
				t.Fatal(err)
			}
			return req
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrReplayed", func(t *testing.T) apitest.Request {
			req := srv.MustStartOIDC(t, p, "alice").Request()
			if resp := srv.MustDo(t, req); resp.Status != http.StatusSeeOther {
				t.Fatalf("first callback: got %d %s, want 303", resp.Status, resp.Body)
			}
			return req
		}, http.StatusBadRequest, "invalid_state"},
		{"ErrMissingCode", func(t *testing.T) apitest.Request {
			return withQuery(srv.MustStartOIDC(t, p, "alice").Request(), "code", "")
		}, http.StatusBadRequest, "missing_code"},
		{"ErrCodeForged", func(t *testing.T) apitest.Request {
			return withQuery(srv.MustStartOIDC(t, p, "alice").Request(), "code", "forged-code")
		}, http.StatusUnauthorized, "sso_exchange_failed"},
		{"ErrProviderError", func(t *testing.T) apitest.Request {
			p.NextAuthorizeError("access_denied", "the person said no")
			return srv.MustStartOIDC(t, p, "alice").Request()
		}, http.StatusUnauthorized, "sso_provider_error"},
		{"ErrNonce", tokenFault(srv, p, func(c map[string]any) { c["nonce"] = "another-flows-nonce" }),
			http.StatusUnauthorized, "invalid_id_token"},
		{"ErrNonceMissing", tokenFault(srv, p, func(c map[string]any) { delete(c, "nonce") }),
			http.StatusUnauthorized, "invalid_id_token"},
		{"ErrExpired", tokenFault(srv, p, func(c map[string]any) {
			c["iat"], c["exp"] = time.Now().Add(-2*time.Hour).Unix(), time.Now().Add(-time.Hour).Unix()
		}), http.StatusUnauthorized, "invalid_id_token"},
		{"ErrAudience", tokenFault(srv, p, func(c map[string]any) { c["aud"] = "another-client" }),
			http.StatusUnauthorized, "invalid_id_token"},
		{"ErrIssuer", tokenFault(srv, p, func(c map[string]any) { c["iss"] = "https://evil.example.test" }),
			http.StatusUnauthorized, "invalid_id_token"},
		{"ErrForeignSignature", func(t *testing.T) apitest.Request {
			p.NextSignWithForeignKey()
			return srv.MustStartOIDC(t, p, "alice").Request()
		}, http.StatusUnauthorized, "invalid_id_token"},
		{"ErrUserInfoFailed", userInfoFault(srv, p, func() { p.NextUserInfoError(http.StatusInternalServerError) }),
			http.StatusBadGateway, "sso_userinfo_failed"},
		{"ErrUserInfoTokenRefused", userInfoFault(srv, p, func() { p.NextUserInfoError(http.StatusUnauthorized) }),
			http.StatusBadGateway, "sso_userinfo_failed"},
		{"ErrUserInfoOtherSubject", userInfoFault(srv, p, func() {
			p.NextUserInfoOverride(func(c map[string]any) { c["sub"] = "someone-else" })
		}), http.StatusUnauthorized, "invalid_userinfo"},
		{"ErrUserInfoNoSubject", userInfoFault(srv, p, func() {
			p.NextUserInfoOverride(func(c map[string]any) { delete(c, "sub") })
		}), http.StatusUnauthorized, "invalid_userinfo"},
		{"ErrGroupNotAllowed", func(t *testing.T) apitest.Request {
			return srv.MustStartOIDC(t, p, "outsider").Request()
		}, http.StatusForbidden, "group_not_allowed"},
		{"ErrNoGroups", func(t *testing.T) apitest.Request {
			return srv.MustStartOIDC(t, p, "nogroups").Request()
		}, http.StatusForbidden, "group_not_allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, html := range []bool{false, true} {
				req := tc.build(t)
				if html {
					req.Header = http.Header{"Accept": {"text/html"}}
				}
				before := countSignIns(t, srv)
				resp := srv.MustDo(t, req)
				if resp.Status != tc.status {
					t.Errorf("html=%v: got %d %s, want %d", html, resp.Status, resp.Body, tc.status)
				}
				switch ct := resp.Header.Get("Content-Type"); {
				case html && !strings.HasPrefix(ct, "text/html"):
					t.Errorf("html: got %s %s, want a page", ct, resp.Body)
				case !html && resp.Code() != tc.code:
					t.Errorf("got %s, want code %s", resp.Body, tc.code)
				}
				if resp.Cookie("terdut_session") != nil {
					t.Errorf("html=%v: got a session cookie, want none", html)
				}
				if after := countSignIns(t, srv); after != before {
					t.Errorf("html=%v: users, sessions, SSO users: got %+v, want %+v as before", html, after, before)
				}
				checkNoSecrets(t, resp, req, p, srv)
			}
		})
	}
	// Once the faults are spent, alice signs in again, and the success shows no secret either.
	req := srv.MustStartOIDC(t, p, "alice").Request()
	resp := srv.MustDo(t, req)
	if c := resp.Cookie("terdut_session"); resp.Status != http.StatusSeeOther || c == nil || mustMe(t, srv, c).Username != "alice" {
		t.Errorf("after the failures: got %d %s, want 303 with alice's session", resp.Status, resp.Body)
	}
	checkNoSecrets(t, resp, req, p, srv)
}

// tokenFault starts a sign-in whose ID token the provider will sign after mutate changes it.
func tokenFault(srv *apitest.Server, p *oidctest.Provider, mutate func(map[string]any)) func(*testing.T) apitest.Request {
	return func(t *testing.T) apitest.Request {
		req := srv.MustStartOIDC(t, p, "alice").Request()
		p.NextTokenOverride(mutate)
		return req
	}
}

// userInfoFault starts a sign-in of a person whose claims the provider sends only from
// UserInfo, arming the fault for that UserInfo call.
func userInfoFault(srv *apitest.Server, p *oidctest.Provider, arm func()) func(*testing.T) apitest.Request {
	return func(t *testing.T) apitest.Request {
		p.SetClaimsInUserInfoOnly(true)
		t.Cleanup(func() { p.SetClaimsInUserInfoOnly(false) })
		req := srv.MustStartOIDC(t, p, "alice").Request()
		arm()
		return req
	}
}

// checkNoSecrets fails if the response or the server's logs show the authorization code, the
// state, a JWT or the client secret.
func checkNoSecrets(t *testing.T, resp apitest.Response, req apitest.Request, p *oidctest.Provider, srv *apitest.Server) {
	t.Helper()
	_, rawQuery, _ := strings.Cut(req.Path, "?")
	q, _ := url.ParseQuery(rawQuery)
	secrets := map[string]string{"client secret": p.ClientSecret, "code": q.Get("code"), "state": q.Get("state"),
		"JWT": "eyJ"}
	for what, secret := range secrets {
		if len(secret) < 3 {
			continue
		}
		if strings.Contains(string(resp.Body), secret) {
			t.Errorf("the response body shows the %s: %s", what, resp.Body)
		}
		if strings.Contains(srv.Logs.String(), secret) {
			t.Errorf("the server's logs show the %s", what)
		}
	}
}

// TestOIDC_NoSubject: an ID token without sub (or with an empty one) is refused and creates
// nobody. Accepted, every such sign-in landed in one account with an empty subject, renamed
// and re-roled by whoever signed in last, which the API then took for a password account.
func TestOIDC_NoSubject(t *testing.T) {
	srv, p := newOIDCServer(t, nil)
	srv.MustClaim(t)
	for _, mutate := range map[string]func(map[string]any){
		"Missing": func(c map[string]any) { delete(c, "sub") },
		"Empty":   func(c map[string]any) { c["sub"] = "" },
	} {
		f := srv.MustStartOIDC(t, p, "alice")
		p.NextTokenOverride(mutate)
		resp := srv.MustDo(t, f.Request())
		wantAPIError(t, resp, http.StatusUnauthorized, "invalid_id_token")
		if resp.Cookie("terdut_session") != nil {
			t.Errorf("the refused sign-in set a session cookie")
		}
	}
	if n := count(t, srv, `SELECT count(*) FROM users WHERE oidc_issuer IS NOT NULL`); n != 0 {
		t.Fatalf("single sign-on users after sign-ins without a subject: got %d, want 0", n)
	}
}
