// Package sso is terdut-server's single sign-on with an OpenID Connect provider: it discovers
// the provider, begins a sign-in (its state, nonce and PKCE verifier), verifies the callback's
// answer and reads the person's claims, decides what the provider's word makes of them (the
// group rules, the role, the usernames to propose), checks a step-up's fresh authentication,
// and disarms a person the provider has dropped from the allowed groups. It writes no HTTP
// answers: internal/api serves the endpoints and maps this package's Error to its statuses.
package sso

import (
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Options configures single sign-on. An empty Issuer turns it off.
type Options struct {
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

// DefaultScopes are the scopes asked for when Options.Scopes is empty.
var DefaultScopes = []string{oidc.ScopeOpenID, "profile", "email"}

// scopes returns the scopes to ask for: openid first, then the configured ones.
func (o Options) scopes() []string {
	if len(o.Scopes) == 0 {
		return slices.Clone(DefaultScopes)
	}
	out := []string{oidc.ScopeOpenID}
	for _, s := range o.Scopes {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func (o Options) usernameClaim() string {
	if o.UsernameClaim == "" {
		return "preferred_username"
	}
	return o.UsernameClaim
}
