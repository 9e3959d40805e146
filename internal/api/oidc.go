package api

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// OIDCOptions configures single sign-on. An empty Issuer turns it off.
type OIDCOptions struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// Scopes are asked for at sign-in; openid is always added. Empty: openid, profile, email.
	Scopes []string
	// UsernameClaim names the claim a new person's username comes from; empty: preferred_username.
	UsernameClaim string
	// GroupsClaim names the claim that lists the person's groups, or a dotted path into nested
	// objects such as realm_access.roles; its value is an array of strings or one string.
	GroupsClaim   string
	AllowedGroups []string // empty: anyone the provider authenticates
	AdminGroups   []string // members of any of these are admins
}

// DefaultOIDCScopes are the scopes asked for when OIDCOptions.Scopes is empty.
var DefaultOIDCScopes = []string{oidc.ScopeOpenID, "profile", "email"}

// scopes returns the scopes to ask for: openid first, then the configured ones.
func (o OIDCOptions) scopes() []string {
	if len(o.Scopes) == 0 {
		return slices.Clone(DefaultOIDCScopes)
	}
	out := []string{oidc.ScopeOpenID}
	for _, s := range o.Scopes {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (o OIDCOptions) usernameClaim() string {
	if o.UsernameClaim == "" {
		return "preferred_username"
	}
	return o.UsernameClaim
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

	mu            sync.Mutex
	oauth         *oauth2.Config
	provider      *oidc.Provider
	verifier      *oidc.IDTokenVerifier
	failedAt      time.Time
	misconfigured *apiError // the last discovery found the issuer wrong; nil once one succeeds
}

func newOIDCClient(opts OIDCOptions, redirectURL string) *oidcClient {
	return &oidcClient{opts: opts, redirectURL: redirectURL, httpClient: &http.Client{Timeout: 10 * time.Second}}
}

var errProviderUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "sso_unavailable",
	Message: "The sign-in provider cannot be reached right now; try again shortly.", RetryAfter: 5 * time.Second}

// errIssuerMismatch is a configuration error, not an outage: retrying does not help, an
// administrator must correct --oidc-issuer (or the provider's issuer).
func errIssuerMismatch(configured, discovery, discovered string) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Code: "sso_misconfigured", Message: fmt.Sprintf(
		"Single sign-on is misconfigured: --oidc-issuer is %q, but the provider's discovery document (%s) names the issuer %q. "+
			"An administrator must set --oidc-issuer to the issuer the provider names, or correct the provider's issuer; "+
			"until then nobody can sign in with single sign-on.", configured, discovery, discovered)}
}

// get returns the OAuth2 configuration, the provider and the ID token verifier, discovering
// them if needed.
func (c *oidcClient) get(ctx context.Context) (*oauth2.Config, *oidc.Provider, *oidc.IDTokenVerifier, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.oauth != nil {
		return c.oauth, c.provider, c.verifier, nil
	}
	if time.Since(c.failedAt) < retryDiscoveryAfter {
		if c.misconfigured != nil {
			return nil, nil, nil, c.misconfigured
		}
		return nil, nil, nil, errProviderUnavailable
	}
	p, err := c.discover(ctx)
	if err != nil {
		c.failedAt = time.Now()
		var ae *apiError
		if errors.As(err, &ae) && ae.Code == "sso_misconfigured" {
			c.misconfigured = ae
			return nil, nil, nil, err
		}
		return nil, nil, nil, fmt.Errorf("%w: discover %s: %w", errProviderUnavailable, c.opts.Issuer, err)
	}
	c.misconfigured = nil
	c.provider = p
	c.oauth = &oauth2.Config{ClientID: c.opts.ClientID, ClientSecret: c.opts.ClientSecret,
		Endpoint: p.Endpoint(), RedirectURL: c.redirectURL, Scopes: c.opts.scopes()}
	c.verifier = p.Verifier(&oidc.Config{ClientID: c.opts.ClientID})
	return c.oauth, c.provider, c.verifier, nil
}

// discover reads the provider's discovery document. An issuer in it that differs from the
// configured one only by a trailing slash is accepted, and is then the issuer ID tokens must
// carry; any other difference is errIssuerMismatch.
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	// The provider keeps this context for fetching keys later, so it must outlive the
	// request; the HTTP client's timeout bounds each fetch instead.
	pctx := oidc.ClientContext(context.WithoutCancel(ctx), c.httpClient)
	p, err := oidc.NewProvider(pctx, c.opts.Issuer)
	var mismatch *oidc.IssuerMismatchError
	if !errors.As(err, &mismatch) {
		return p, err
	}
	if strings.TrimRight(mismatch.Provided, "/") != strings.TrimRight(mismatch.Discovered, "/") {
		return nil, errIssuerMismatch(c.opts.Issuer,
			strings.TrimSuffix(c.opts.Issuer, "/")+"/.well-known/openid-configuration", mismatch.Discovered)
	}
	return oidc.NewProvider(oidc.InsecureIssuerURLContext(pctx, mismatch.Discovered), c.opts.Issuer)
}

// misconfiguration returns the configuration error the last discovery found, or nil.
func (c *oidcClient) misconfiguration() *apiError {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.misconfigured
}

// checkAtStart discovers the provider once when the server starts, so that a wrong issuer is
// in the log (and in /readyz) before anyone tries to sign in. A provider that is down is only
// a warning: sign-ins retry it.
func (c *oidcClient) checkAtStart(log *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*c.httpClient.Timeout)
	defer cancel()
	_, _, _, err := c.get(ctx)
	var ae *apiError
	switch {
	case err == nil:
		log.Info("single sign-on provider discovered", "issuer", c.opts.Issuer)
	case errors.As(err, &ae) && ae.Code == "sso_misconfigured":
		log.Error("single sign-on is misconfigured: fix --oidc-issuer", "err", ae.Message)
	default:
		log.Warn("single sign-on provider unreachable at start; sign-ins will retry it", "issuer", c.opts.Issuer, "err", err)
	}
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
