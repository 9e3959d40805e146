// Package zitadeltest runs, in-process, an OpenID provider that this repository did not
// write: the OP of github.com/zitadel/oidc, an OpenID-certified implementation. Tests sign in
// through it to show that terdut-server works with a provider other than its own test
// provider (test/harness/oidctest), in both of the OP's modes: the person's profile claims in the
// ID token, or (as Zitadel itself and Okta do in the code flow) only in the UserInfo answer.
//
// Every authorization request is approved at once, for the user its login_hint names (see
// [Provider.AddUser]) or else for the first user added, through the login redirect the OP
// makes; [Provider.TryAuthorize] follows the OP's redirects as a browser would.
package zitadeltest

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/zitadel/oidc/v3/pkg/op"
)

const loginPath = "/login"

// User is a person the provider signs in.
type User struct {
	Subject  string // the sub claim; login_hint selects the user by it
	Username string // preferred_username, with the profile scope
	Name     string // name, with the profile scope
	Email    string // email, with the email scope
	// EmailVerified is email_verified: true or false as JSON booleans, "true" as a string as
	// Cognito sends it, or nil to leave the claim out.
	EmailVerified any
	// Claims are custom claims (groups, realm_access, ...): always in the UserInfo answer, and
	// in the ID token when the provider puts profile claims there.
	Claims map[string]any
}

// Options configures a provider.
type Options struct {
	// ClaimsInIDToken puts the profile, e-mail and custom claims into the ID token as well
	// as the UserInfo answer; without it the ID token names only the subject.
	ClaimsInIDToken bool
	// Issuer is the issuer the discovery document and the tokens name; empty: the URL the
	// provider is reached at.
	Issuer string
	// RedirectURI is the relying party's callback URL, the only one the provider accepts.
	RedirectURI string
}

// Provider is the zitadel OP behind an httptest.Server, closed when the test ends.
type Provider struct {
	// ClientID and ClientSecret are the one client the provider knows. Read-only.
	ClientID, ClientSecret string

	srv     *httptest.Server
	issuer  string
	storage *storage
}

// New starts a provider for tb's test.
func New(tb testing.TB, opts Options) *Provider {
	tb.Helper()
	c := &client{id: "terdut", secret: rand.Text(), redirectURIs: []string{opts.RedirectURI}, claimsInIDToken: opts.ClaimsInIDToken}
	st, err := newStorage(c)
	if err != nil {
		tb.Fatalf("zitadeltest: %v", err)
	}
	var handler atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*handler.Load()).ServeHTTP(w, r)
	}))
	tb.Cleanup(srv.Close)
	p := &Provider{ClientID: c.id, ClientSecret: c.secret, srv: srv, issuer: opts.Issuer, storage: st}
	if p.issuer == "" {
		p.issuer = srv.URL
	}
	config := &op.Config{CodeMethodS256: true, AuthMethodPost: true}
	_, _ = rand.Read(config.CryptoKey[:]) // encrypts the opaque access tokens
	provider, err := op.NewProvider(config, st, op.StaticIssuer(p.issuer), op.WithAllowInsecure(),
		op.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		tb.Fatalf("zitadeltest: %v", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/", provider)
	mux.HandleFunc(loginPath, p.handleLogin)
	var h http.Handler = mux
	handler.Store(&h)
	return p
}

// URL is where the provider is reached; it is the issuer unless Options.Issuer said otherwise.
func (p *Provider) URL() string { return p.srv.URL }

// Issuer is the issuer the provider names in discovery and tokens.
func (p *Provider) Issuer() string { return p.issuer }

// AddUser registers u, replacing a user of the same subject; the first user added is the
// one signed in when a request names no known user.
func (p *Provider) AddUser(u User) {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	u.Claims = maps.Clone(u.Claims)
	p.storage.users[u.Subject] = u
	if p.storage.defaultUser == "" {
		p.storage.defaultUser = u.Subject
	}
}

// UserInfoAnswers returns how many successful UserInfo answers the provider gave.
func (p *Provider) UserInfoAnswers() int64 {
	p.storage.mu.Lock()
	defer p.storage.mu.Unlock()
	return p.storage.userInfoOK
}

// handleLogin is the provider's login UI, reduced to approving the request at once.
func (p *Provider) handleLogin(w http.ResponseWriter, r *http.Request) {
	id := r.FormValue("authRequestID")
	if err := p.storage.approve(id); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	http.Redirect(w, r, p.srv.URL+"/authorize/callback?id="+url.QueryEscape(id), http.StatusFound)
}

// TryAuthorize requests authURL (an authorization URL a relying party built) and follows the
// provider's redirects, as a browser would, until one leaves the provider: it returns that
// URL, the relying party's callback with code and state (or error and state).
func (p *Provider) TryAuthorize(ctx context.Context, authURL string) (string, error) {
	hc := &http.Client{Transport: p.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next, err := url.Parse(authURL)
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	own, _ := url.Parse(p.srv.URL)
	for range 10 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, next.String(), nil)
		if err != nil {
			return "", fmt.Errorf("authorize: %w", err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return "", fmt.Errorf("authorize: %w", err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		resp.Body.Close()
		if resp.StatusCode != http.StatusFound && resp.StatusCode != http.StatusSeeOther {
			return "", fmt.Errorf("authorize: GET %s: %s: %s", next, resp.Status, strings.TrimSpace(string(body)))
		}
		loc, err := resp.Location()
		if err != nil {
			return "", fmt.Errorf("authorize: %w", err)
		}
		if loc.Host != own.Host {
			return loc.String(), nil
		}
		next = loc
	}
	return "", fmt.Errorf("authorize: too many redirects from %s", authURL)
}
