package sso

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/logcap"
)

// retryDiscoveryAfter spaces out attempts to reach a provider that did not answer.
const retryDiscoveryAfter = 5 * time.Second

// defaultOIDCTimeout bounds each request to the provider, and one whole discovery.
const defaultOIDCTimeout = 10 * time.Second

// discoveryWait bounds how long a request that needs the provider waits for a discovery in
// progress: past it, the request is refused (sso_unavailable) and the discovery goes on for
// the next requests.
const discoveryWait = 2 * time.Second

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

// errProviderUnavailable is logged by the discovery that found it (see logOutcome), not by
// each request it refuses: anyone can ask for a sign-in while the provider is down.
var errProviderUnavailable = &Error{Kind: Unavailable, Code: "sso_unavailable",
	Message: "The sign-in provider cannot be reached right now; try again shortly.", RetryAfter: 5 * time.Second,
	Logged: true}

// errIssuerMismatch is a configuration error, not an outage: retrying does not help, an
// administrator must correct --oidc-issuer (or the provider's issuer). Like
// errProviderUnavailable, the discovery logs it.
func errIssuerMismatch(configured, discovery, discovered string) *Error {
	return &Error{Kind: Misconfigured, Code: "sso_misconfigured", Logged: true, Message: fmt.Sprintf(
		"Single sign-on is misconfigured: --oidc-issuer is %q, but the provider's discovery document (%s) names the issuer %q. "+
			"An administrator must set --oidc-issuer to the issuer the provider names, or correct the provider's issuer; "+
			"until then nobody can sign in with single sign-on.", configured, discovery, logcap.Cut(discovered, 512))}
}

// get returns the OAuth2 configuration, the provider and the ID token verifier. Until a
// discovery has succeeded it starts one (unless one is in progress, or the last failed less
// than retryDiscoveryAfter ago) and waits for it at most discoveryWait, then answers
// errProviderUnavailable; a wrong issuer is errIssuerMismatch.
func (c *Client) get(ctx context.Context) (*oauth2.Config, *oidc.Provider, *oidc.IDTokenVerifier, error) {
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
func (c *Client) rediscover(seen *discovery) <-chan struct{} {
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
func (c *Client) runDiscovery(done chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	d := &discovery{}
	p, err := c.discover(ctx)
	var ae *Error
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
	var ae *Error
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
func (c *Client) logOutcome(prev, d *discovery) {
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
func (c *Client) discover(ctx context.Context) (*oidc.Provider, error) {
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
func (c *Client) discoverIssuer(ctx context.Context) (*oidc.Provider, error) {
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

// Misconfiguration returns the configuration error the last discovery found, or nil. It
// never waits.
func (c *Client) Misconfiguration() *Error { return misconfigurationOf(c.state.Load()) }

// misconfigurationOf is Misconfiguration for the discovery d (nil: none ended yet). Callers
// that use d too read the state once and pass it: a discovery may end between two reads.
func misconfigurationOf(d *discovery) *Error {
	var ae *Error
	if d != nil && errors.As(d.err, &ae) && ae.Code == "sso_misconfigured" {
		return ae
	}
	return nil
}

// FailsReadiness reports whether the last discovery found a misconfiguration that makes the
// server unready: a wrong --oidc-issuer, not a refused endpoint (see endpointRefusal).
func (c *Client) FailsReadiness() bool {
	d := c.state.Load()
	return misconfigurationOf(d) != nil && !d.keepReady
}

// Recheck starts a discovery, without waiting for it, when the last one found the issuer
// wrong and retryDiscoveryAfter has passed: a NotReady pod gets no sign-ins, so readiness
// itself must notice a provider that was fixed.
func (c *Client) Recheck() {
	if d := c.state.Load(); misconfigurationOf(d) != nil && time.Since(d.at) >= retryDiscoveryAfter {
		c.rediscover(d)
	}
}

// CheckAtStart discovers the provider once when the server starts, so that a wrong issuer is
// in the log (and in /readyz) before anyone tries to sign in. A provider that is down is only
// a warning: sign-ins retry it.
func (c *Client) CheckAtStart() { c.rediscover(nil) }

// exchangeContext carries the HTTP client with its timeout into oauth2's token request.
func (c *Client) exchangeContext(ctx context.Context) context.Context {
	return context.WithValue(ctx, oauth2.HTTPClient, c.httpClient)
}
