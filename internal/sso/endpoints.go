package sso

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/opjwt"
)

// endpointRefusal is an endpoint of the discovery document that single sign-on will not use:
// a misconfiguration (its Error is sso_misconfigured, naming the field), which, unlike a
// wrong --oidc-issuer, readiness reports without failing: the document is the provider's and
// can change under a running server, and a provider must not be able to take every replica
// out of service, with the webhooks and API keys that never need it.
type endpointRefusal struct{ err *Error }

func (e *endpointRefusal) Error() string { return e.err.Error() }
func (e *endpointRefusal) Unwrap() error { return e.err }

// checkEndpoints holds the endpoints the discovery document names to where they may be. Every
// one must be https, or http to a literal loopback address: the authorization request, the
// code and the client secret, and the keys that decide who is admin, never cross a network
// in clear. The token endpoint, the JWKS and UserInfo, which the server itself calls and
// believes, must also be on the issuer's own origin or one of EndpointOrigins, so that a
// changed document cannot move where the keys come from or where the secret goes. The
// authorization endpoint, which only browsers visit, may be anywhere.
func (o Options) checkEndpoints(p *oidc.Provider) error {
	var doc struct {
		Authorization string `json:"authorization_endpoint"`
		Token         string `json:"token_endpoint"`
		JWKS          string `json:"jwks_uri"`
		UserInfo      string `json:"userinfo_endpoint"`
	}
	if err := p.Claims(&doc); err != nil {
		return err
	}
	issuer, err := url.Parse(o.Issuer)
	if err != nil {
		return err
	}
	for _, e := range []struct {
		field, value string
		optional     bool // absent is fine: UserInfo is asked only when the ID token lacks a claim
		anyOrigin    bool
	}{
		{"authorization_endpoint", doc.Authorization, false, true},
		{"token_endpoint", doc.Token, false, false},
		{"jwks_uri", doc.JWKS, false, false},
		{"userinfo_endpoint", doc.UserInfo, true, false},
	} {
		if e.value == "" && e.optional {
			continue
		}
		u, err := url.Parse(e.value)
		switch {
		case err != nil || !u.IsAbs() || u.Host == "":
			return o.refuseEndpoint(e.field, e.value, "is not an absolute URL",
				"correct the provider's configuration")
		case !opjwt.SecureOrLoopback(u):
			return o.refuseEndpoint(e.field, e.value,
				"is not https (plain http is accepted only to a loopback address such as 127.0.0.1), so what goes there or comes back would cross the network in clear",
				"have the provider name its https URLs (behind a TLS proxy, have the proxy forward the scheme, X-Forwarded-Proto)")
		case !e.anyOrigin && !opjwt.SameOrigin(issuer, u) && !o.allowsOrigin(u):
			return o.refuseEndpoint(e.field, e.value,
				fmt.Sprintf("is not on the issuer's origin (%s://%s) nor on one of --oidc-endpoint-origins", issuer.Scheme, issuer.Host),
				"if the provider does serve it there, add its origin to --oidc-endpoint-origins; otherwise correct the provider's public URL")
		}
	}
	return nil
}

// allowsOrigin reports whether u is on one of EndpointOrigins.
func (o Options) allowsOrigin(u *url.URL) bool {
	for _, s := range o.EndpointOrigins {
		if origin, err := url.Parse(s); err == nil && opjwt.SameOrigin(origin, u) {
			return true
		}
	}
	return false
}

func (o Options) refuseEndpoint(field, value, why, fix string) error {
	return &endpointRefusal{&Error{Kind: Misconfigured, Code: "sso_misconfigured", Logged: true,
		Message: fmt.Sprintf("Single sign-on is misconfigured: the provider's discovery document (%s) names the %s %q, which %s. "+
			"An administrator must fix it: %s. Until then nobody can sign in with single sign-on.",
			strings.TrimSuffix(o.Issuer, "/")+"/.well-known/openid-configuration", field, logcap.Cut(value, 512), why, fix)}}
}

// errRedirectRefused is what the provider's client answers a redirect with: the provider's
// endpoints answer where discovery names them, and a redirect could take the code, the
// client secret or the access token elsewhere, https to http included.
var errRedirectRefused = errors.New("the sign-in provider answered with a redirect, which is not followed")

// refuseRedirect is the provider's client's CheckRedirect.
func refuseRedirect(*http.Request, []*http.Request) error { return errRedirectRefused }
