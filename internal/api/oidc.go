package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCOptions configures single sign-on. An empty Issuer turns it off.
type OIDCOptions struct {
	Issuer        string
	ClientID      string
	ClientSecret  string
	GroupsClaim   string   // the ID token claim that lists the person's groups
	AllowedGroups []string // empty: anyone the provider authenticates
	AdminGroups   []string // members of any of these are admins
}

// oidcLoginTTL is how long a person has to finish a sign-in at the provider.
const oidcLoginTTL = 10 * time.Minute

// retryDiscoveryAfter spaces out attempts to reach a provider that did not answer.
const retryDiscoveryAfter = 5 * time.Second

// oidcClient discovers the provider on first use, so that the server starts (and its probes
// pass) while the provider is unreachable; sign-ins answer 503 until it is reachable.
type oidcClient struct {
	opts        OIDCOptions
	redirectURL string
	httpClient  *http.Client

	mu       sync.Mutex
	oauth    *oauth2.Config
	verifier *oidc.IDTokenVerifier
	failedAt time.Time
}

func newOIDCClient(opts OIDCOptions, redirectURL string) *oidcClient {
	return &oidcClient{opts: opts, redirectURL: redirectURL, httpClient: &http.Client{Timeout: 10 * time.Second}}
}

var errProviderUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "sso_unavailable",
	Message: "The sign-in provider cannot be reached right now; try again shortly.", RetryAfter: 5 * time.Second}

// get returns the OAuth2 configuration and the ID token verifier, discovering them if needed.
func (c *oidcClient) get(ctx context.Context) (*oauth2.Config, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oauth != nil {
		return c.oauth, c.verifier, nil
	}
	if time.Since(c.failedAt) < retryDiscoveryAfter {
		return nil, nil, errProviderUnavailable
	}
	// The provider keeps this context for fetching keys later, so it must outlive the
	// request; the HTTP client's timeout bounds each fetch instead.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), c.httpClient)
	p, err := oidc.NewProvider(pctx, c.opts.Issuer)
	if err != nil {
		c.failedAt = time.Now()
		return nil, nil, fmt.Errorf("%w: discover %s: %w", errProviderUnavailable, c.opts.Issuer, err)
	}
	c.oauth = &oauth2.Config{ClientID: c.opts.ClientID, ClientSecret: c.opts.ClientSecret,
		Endpoint: p.Endpoint(), RedirectURL: c.redirectURL, Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
	c.verifier = p.Verifier(&oidc.Config{ClientID: c.opts.ClientID})
	return c.oauth, c.verifier, nil
}

// exchangeContext carries the HTTP client with its timeout into oauth2's token request.
func (c *oidcClient) exchangeContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.httpClient)
}

// randomString returns n random bytes, base64url-encoded.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
