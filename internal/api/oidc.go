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
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/logcap"
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
	// EndpointOrigins are origins (scheme://host[:port]) besides the issuer's where the
	// discovery document may name the token endpoint, the JWKS and UserInfo; each https, or
	// http to a loopback address. Empty: the issuer's origin alone.
	EndpointOrigins []string
	// Timeout bounds each request to the provider and one whole discovery; zero: 10s.
	Timeout time.Duration
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

// defaultOIDCTimeout bounds each request to the provider, and one whole discovery.
const defaultOIDCTimeout = 10 * time.Second

// discoveryWait bounds how long a request that needs the provider waits for a discovery in
// progress: past it, it answers 503 and the discovery goes on for the next requests.
const discoveryWait = 2 * time.Second

// oidcClient discovers the provider on first use, so that the server starts (and its probes
// pass) while the provider is unreachable; sign-ins answer 503 until it is reachable. No lock
// is held across a request to the provider: what the last discovery found is read from an
// atomic pointer, so readiness and the login page never wait for a provider that hangs.
type oidcClient struct {
	opts        OIDCOptions
	redirectURL string
	httpClient  *http.Client
	timeout     time.Duration // of one whole discovery
	log         *slog.Logger

	state atomic.Pointer[discovery] // nil until the first discovery ends

	mu     sync.Mutex    // guards flight alone, never held across a request
	flight chan struct{} // closed when the discovery in progress ends; nil when none is
}

// discovery is what one discovery found: replaced whole, never changed.
type discovery struct {
	oauth    *oauth2.Config
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	err      error // why it failed; nil with a provider
	// keepReady marks a misconfiguration that readiness reports without failing (see
	// endpointRefusal).
	keepReady bool
	at        time.Time // when it ended
}

func newOIDCClient(opts OIDCOptions, redirectURL string, log *slog.Logger) *oidcClient {
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = defaultOIDCTimeout
	}
	return &oidcClient{opts: opts, redirectURL: redirectURL,
		httpClient: &http.Client{Timeout: timeout, CheckRedirect: refuseRedirect}, timeout: timeout, log: log}
}

// errProviderUnavailable is logged by the discovery that found it (see logOutcome), not by
// each request it refuses: anyone can ask for a sign-in while the provider is down.
var errProviderUnavailable = &apiError{Status: http.StatusServiceUnavailable, Code: "sso_unavailable",
	Message: "The sign-in provider cannot be reached right now; try again shortly.", RetryAfter: 5 * time.Second,
	logged: true}

// errIssuerMismatch is a configuration error, not an outage: retrying does not help, an
// administrator must correct --oidc-issuer (or the provider's issuer). Like
// errProviderUnavailable, the discovery logs it.
func errIssuerMismatch(configured, discovery, discovered string) *apiError {
	return &apiError{Status: http.StatusInternalServerError, Code: "sso_misconfigured", logged: true, Message: fmt.Sprintf(
		"Single sign-on is misconfigured: --oidc-issuer is %q, but the provider's discovery document (%s) names the issuer %q. "+
			"An administrator must set --oidc-issuer to the issuer the provider names, or correct the provider's issuer; "+
			"until then nobody can sign in with single sign-on.", configured, discovery, logcap.Cut(discovered, 512))}
}

// get returns the OAuth2 configuration, the provider and the ID token verifier. Until a
// discovery has succeeded it starts one (unless one is in progress, or the last failed less
// than retryDiscoveryAfter ago) and waits for it at most discoveryWait, then answers
// errProviderUnavailable; a wrong issuer is errIssuerMismatch.
func (c *oidcClient) get(ctx context.Context) (*oauth2.Config, *oidc.Provider, *oidc.IDTokenVerifier, error) {
	d := c.state.Load()
	if d == nil || (d.provider == nil && time.Since(d.at) >= retryDiscoveryAfter) {
		done := c.rediscover(d)
		t := time.NewTimer(discoveryWait)
		defer t.Stop()
		select {
		case <-done:
			d = c.state.Load()
		case <-t.C:
			return nil, nil, nil, fmt.Errorf("%w: the discovery of %s has not ended within %s", errProviderUnavailable, c.opts.Issuer, discoveryWait)
		case <-ctx.Done():
			return nil, nil, nil, fmt.Errorf("%w: %w", errProviderUnavailable, ctx.Err())
		}
	}
	if d.provider == nil {
		return nil, nil, nil, d.err
	}
	return d.oauth, d.provider, d.verifier, nil
}

// rediscover starts a discovery unless one is in progress or one ended since seen was read,
// and returns a channel closed once a discovery newer than seen has ended.
func (c *oidcClient) rediscover(seen *discovery) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.flight != nil {
		return c.flight
	}
	if c.state.Load() != seen {
		return closedChan
	}
	done := make(chan struct{})
	c.flight = done
	go c.runDiscovery(done)
	return done
}

var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// runDiscovery discovers the provider, publishes what it found and closes done. It has its
// own deadline and no request's context: its outcome is every request's for a while, so a
// client that hangs up must not make it a failure.
func (c *oidcClient) runDiscovery(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	d := &discovery{}
	p, err := c.discover(ctx)
	var ae *apiError
	switch {
	case err == nil:
		d.provider = p
		d.oauth = &oauth2.Config{ClientID: c.opts.ClientID, ClientSecret: c.opts.ClientSecret,
			Endpoint: p.Endpoint(), RedirectURL: c.redirectURL, Scopes: c.opts.scopes()}
		d.verifier = p.Verifier(&oidc.Config{ClientID: c.opts.ClientID})
	case errors.As(err, &ae) && ae.Code == "sso_misconfigured":
		d.err = ae
		d.keepReady = errors.As(err, new(*endpointRefusal))
	default:
		d.err = fmt.Errorf("%w: discover %s: %w", errProviderUnavailable, c.opts.Issuer, err)
	}
	d.at = time.Now()
	prev := c.state.Swap(d)
	c.mu.Lock()
	c.flight = nil
	c.mu.Unlock()
	close(done)
	c.logOutcome(prev, d)
}

// outcome is what kind of answer a discovery gave: ok, misconfigured or unavailable.
func (d *discovery) outcome() string {
	var ae *apiError
	switch {
	case d.provider != nil:
		return "ok"
	case errors.As(d.err, &ae) && ae.Code == "sso_misconfigured":
		return "misconfigured"
	}
	return "unavailable"
}

// logOutcome logs the first discovery, and each whose outcome differs in kind from the one
// before, so that a wrong issuer or an outage is in the log when it begins and when it ends,
// not once a request or once a retry.
func (c *oidcClient) logOutcome(prev, d *discovery) {
	if prev != nil && prev.outcome() == d.outcome() {
		return
	}
	switch d.outcome() {
	case "ok":
		c.log.Info("single sign-on provider discovered", "issuer", c.opts.Issuer)
	case "misconfigured":
		c.log.Error("single sign-on is misconfigured", "err", d.err.Error())
	default:
		c.log.Warn("single sign-on provider unreachable; sign-ins answer 503 and retry it", "issuer", c.opts.Issuer, "err", d.err)
	}
}

// discover reads the provider's discovery document and holds its endpoints to where they may
// be (see checkEndpoints).
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	p, err := c.discoverIssuer(ctx)
	if err != nil {
		return nil, err
	}
	if err := c.opts.checkEndpoints(p); err != nil {
		return nil, err
	}
	return p, nil
}

// discoverIssuer reads the provider's discovery document. An issuer in it that differs from the
// configured one only by a trailing slash is accepted, and is then the issuer ID tokens must
// carry; any other difference is errIssuerMismatch. The provider does not keep ctx: it
// fetches keys later with the HTTP client alone, whose timeout bounds each fetch.
func (c *oidcClient) discoverIssuer(ctx context.Context) (*oidc.Provider, error) {
	pctx := oidc.ClientContext(ctx, c.httpClient)
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

// misconfiguration returns the configuration error the last discovery found, or nil. It
// never waits.
func (c *oidcClient) misconfiguration() *apiError { return misconfigurationOf(c.state.Load()) }

// misconfigurationOf is misconfiguration for the discovery d (nil: none ended yet). Callers
// that use d too read the state once and pass it: a discovery may end between two reads.
func misconfigurationOf(d *discovery) *apiError {
	var ae *apiError
	if d != nil && errors.As(d.err, &ae) && ae.Code == "sso_misconfigured" {
		return ae
	}
	return nil
}

// failsReadiness reports whether the last discovery found a misconfiguration that makes the
// server unready: a wrong --oidc-issuer, not a refused endpoint (see endpointRefusal).
func (c *oidcClient) failsReadiness() bool {
	d := c.state.Load()
	return misconfigurationOf(d) != nil && !d.keepReady
}

// recheck starts a discovery, without waiting for it, when the last one found the issuer
// wrong and retryDiscoveryAfter has passed: a NotReady pod gets no sign-ins, so readiness
// itself must notice a provider that was fixed.
func (c *oidcClient) recheck() {
	if d := c.state.Load(); misconfigurationOf(d) != nil && time.Since(d.at) >= retryDiscoveryAfter {
		c.rediscover(d)
	}
}

// checkAtStart discovers the provider once when the server starts, so that a wrong issuer is
// in the log (and in /readyz) before anyone tries to sign in. A provider that is down is only
// a warning: sign-ins retry it.
func (c *oidcClient) checkAtStart() { c.rediscover(nil) }

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
