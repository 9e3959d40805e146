package apitest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// OIDC returns options that point an instance at p (its URL, which is its issuer unless a test
// set another), with groups in the "groups" claim and no group rules; tests add AllowedGroups
// and AdminGroups as they need.
func OIDC(p *oidctest.Provider) *api.OIDCOptions {
	return &api.OIDCOptions{Issuer: p.URL(), ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		GroupsClaim: "groups"}
}

// Authorizer is an OpenID provider that approves authorization requests: given the URL an
// instance redirected a browser to, it returns where the provider sends the browser back.
// *oidctest.Provider is one, and so are the products of the interop module (test/interop/).
type Authorizer interface {
	TryAuthorize(ctx context.Context, authURL string) (callbackURL string, err error)
}

// OIDCFlow is a sign-in that an instance started and the provider answered: what a browser
// holds when the provider sends it back to the callback.
type OIDCFlow struct {
	// StateCookie binds the flow to the browser that started it; nil sends none.
	StateCookie *http.Cookie
	// AuthURL is where the instance sent the browser: the provider's authorization request.
	AuthURL string
	// Callback is where the provider sent the browser: the callback URL with code and state,
	// or with error and state.
	Callback *url.URL
}

// Request returns the flow's callback as a request to any instance: the callback's path and
// query, with the state cookie. Tests may change it (headers, query, cookie) before sending it.
func (f OIDCFlow) Request() Request {
	return Request{Method: http.MethodGet, Path: f.Callback.RequestURI(), Cookie: f.StateCookie}
}

// StartOIDC begins a sign-in on s for the provider's user with this subject
// (GET /auth/oidc/login?login_hint=subject) and has p approve it. It returns an error unless s
// redirects to the provider with a state cookie and p redirects back; it is safe to call from
// many goroutines.
func (s *Server) StartOIDC(ctx context.Context, p Authorizer, subject string) (OIDCFlow, error) {
	return s.startOIDC(ctx, p, "/auth/oidc/login?login_hint="+url.QueryEscape(subject))
}

// StartOIDCStepUp is StartOIDC for a step-up sign-in (GET /auth/oidc/login?reauth=1), the one
// that asks the provider to authenticate the person again before a session makes an API key.
func (s *Server) StartOIDCStepUp(ctx context.Context, p Authorizer, subject string) (OIDCFlow, error) {
	return s.startOIDC(ctx, p, "/auth/oidc/login?reauth=1&login_hint="+url.QueryEscape(subject))
}

func (s *Server) startOIDC(ctx context.Context, p Authorizer, path string) (OIDCFlow, error) {
	resp, err := s.Do(Request{Method: http.MethodGet, Path: path})
	if err != nil {
		return OIDCFlow{}, fmt.Errorf("start sign-in: %w", err)
	}
	cookie := resp.StateCookie()
	authURL := resp.Header.Get("Location")
	if resp.Status != http.StatusFound || cookie == nil || authURL == "" {
		return OIDCFlow{}, fmt.Errorf("start sign-in: got %d %s, want 302 with a state cookie", resp.Status, resp.Body)
	}
	callback, err := p.TryAuthorize(ctx, authURL)
	if err != nil {
		return OIDCFlow{}, err
	}
	cb, err := url.Parse(callback)
	if err != nil {
		return OIDCFlow{}, fmt.Errorf("provider's redirect: %w", err)
	}
	return OIDCFlow{StateCookie: cookie, AuthURL: authURL, Callback: cb}, nil
}

// StateCookie returns the sign-in state cookie the response set (named terdut_oidc_state-<hash
// of the state>, with the __Host- prefix under an https public URL), or nil.
func (r Response) StateCookie() *http.Cookie {
	for _, c := range r.Cookies {
		if strings.HasPrefix(strings.TrimPrefix(c.Name, "__Host-"), "terdut_oidc_state-") && c.MaxAge > 0 {
			return c
		}
	}
	return nil
}

// FinishOIDC sends the flow's callback to s, which need not be the instance that started it.
// It returns an error only when the request could not be made.
func (s *Server) FinishOIDC(f OIDCFlow) (Response, error) {
	return s.Do(f.Request())
}

// SignInOIDC starts a sign-in on s and finishes it on s, returning the callback's response.
func (s *Server) SignInOIDC(ctx context.Context, p Authorizer, subject string) (Response, error) {
	f, err := s.StartOIDC(ctx, p, subject)
	if err != nil {
		return Response{}, err
	}
	return s.FinishOIDC(f)
}

// MustStartOIDC is StartOIDC for the test goroutine.
func (s *Server) MustStartOIDC(tb testing.TB, p Authorizer, subject string) OIDCFlow {
	tb.Helper()
	f, err := s.StartOIDC(tb.Context(), p, subject)
	if err != nil {
		tb.Fatalf("sign in %s: %v", subject, err)
	}
	return f
}

// MustSignInOIDC signs the subject in on s and returns the session cookie; it fails the test
// unless the callback answers 303 to / with one.
func (s *Server) MustSignInOIDC(tb testing.TB, p Authorizer, subject string) *http.Cookie {
	tb.Helper()
	resp, err := s.FinishOIDC(s.MustStartOIDC(tb, p, subject))
	if err != nil {
		tb.Fatalf("sign in %s: %v", subject, err)
	}
	c := resp.Cookie("terdut_session")
	if resp.Status != http.StatusSeeOther || resp.Header.Get("Location") != "/" || c == nil {
		tb.Fatalf("sign in %s: got %d %s, want 303 to / with a session cookie", subject, resp.Status, resp.Body)
	}
	return c
}
