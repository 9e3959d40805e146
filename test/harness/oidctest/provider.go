// Package oidctest runs a real, in-process OpenID Connect provider for tests.
//
// The provider serves discovery, a JWKS, the authorization and token endpoints
// of the authorization code flow with PKCE (S256), and a UserInfo endpoint that
// answers for the access tokens it issued. ID tokens are
// RS256 JWTs signed with a per-provider RSA key, so relying parties can be
// exercised with their production OIDC client libraries instead of mocks.
//
// Every valid authorization request is approved immediately, without a login
// form, for the user named by its login_hint parameter (see [Provider.AddUser])
// or else for the default user (see [Provider.SetUser]).
//
// Like many real providers (Zitadel, Okta), it can be made to send the person's
// profile claims only from UserInfo, not in the ID token
// ([Provider.SetClaimsInUserInfoOnly]); and its discovery document and tokens
// can name another issuer than its URL ([Provider.SetIssuer]).
//
// Its UserInfo endpoint can be taken out of discovery or pointed elsewhere
// ([Provider.SetUserInfoEndpoint]), or made to refuse every access token
// ([Provider.SetUserInfoRefusesTokens]), as providers do whose access tokens are
// issued for an API rather than for UserInfo.
//
// Fault injection ([Provider.NextAuthorizeError], [Provider.NextTokenOverride],
// [Provider.NextSignWithForeignKey], [Provider.NextUserInfoError],
// [Provider.NextUserInfoOverride]) is one-shot: each fault is consumed by the
// next request it applies to, whichever flow that request belongs to. Tests
// that inject faults should not share their provider with concurrent flows.
package oidctest

import (
	"crypto/rand"
	"crypto/rsa"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// User is an identity the provider signs in.
type User struct {
	// Subject is the sub claim and the value login_hint selects the user by.
	Subject string
	// Email is the email claim; email_verified is always true unless overridden.
	Email string
	// PreferredUsername is the preferred_username claim.
	PreferredUsername string
	// Name is the name claim.
	Name string
	// Groups is the value of the groups claim (see [Provider.SetGroupsClaim]).
	Groups []string
	// ExtraClaims are added to the person's claims last and may override any
	// claim; a nil value removes the claim (email_verified, say).
	ExtraClaims map[string]any
}

// Provider is an OpenID provider backed by an httptest.Server. All of its
// methods are safe for concurrent use.
type Provider struct {
	// ClientID is the only client the provider accepts. Read-only.
	ClientID string
	// ClientSecret is that client's secret, random per provider. Read-only.
	ClientSecret string

	srv        *httptest.Server
	key        *rsa.PrivateKey
	keyID      string
	foreignKey func() (*rsa.PrivateKey, error)

	mu           sync.Mutex
	issuer       string
	defaultUser  User
	users        map[string]User
	groupsClaim  string
	userInfoOnly bool
	userInfoURL  *string                // nil: its own /userinfo; "": none in discovery
	endpoints    map[string]string      // discovery fields named elsewhere than on this server
	refuseTokens bool                   // UserInfo answers 401 invalid_token to every access token
	grants       map[string]grant       // pending authorization codes
	accessTokens map[string]accessGrant // access tokens UserInfo answers for
	faults       faults

	authorizeRequests atomic.Int64
	tokenRequests     atomic.Int64
	tokensIssued      atomic.Int64
	userInfoRequests  atomic.Int64
}

// NewProvider starts a provider whose server is closed when tb's test ends.
// Its default user is "alice" (subject "alice", groups ["users"]).
func NewProvider(tb testing.TB) *Provider {
	tb.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatalf("oidctest: generating signing key: %v", err)
	}
	p := &Provider{
		ClientID:     "oidctest-client",
		ClientSecret: rand.Text(),
		key:          key,
		keyID:        rand.Text(),
		foreignKey: sync.OnceValues(func() (*rsa.PrivateKey, error) {
			return rsa.GenerateKey(rand.Reader, 2048)
		}),
		defaultUser: User{
			Subject:           "alice",
			Email:             "alice@example.test",
			PreferredUsername: "alice",
			Name:              "Alice Example",
			Groups:            []string{"users"},
		},
		users:        make(map[string]User),
		groupsClaim:  "groups",
		grants:       make(map[string]grant),
		accessTokens: make(map[string]accessGrant),
	}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.handleDiscovery)
	mux.HandleFunc("GET /jwks", p.handleJWKS)
	mux.HandleFunc("GET /authorize", p.handleAuthorize)
	mux.HandleFunc("POST /authorize", p.handleAuthorize)
	mux.HandleFunc("POST /token", p.handleToken)
	mux.HandleFunc("GET /userinfo", p.handleUserInfo)
	mux.HandleFunc("POST /userinfo", p.handleUserInfo)
	p.srv = httptest.NewUnstartedServer(mux)
	p.srv.Start()
	p.issuer = p.srv.URL
	tb.Cleanup(p.srv.Close)
	return p
}

// Issuer returns the issuer identifier that discovery and ID tokens name: the
// discovery base URL, [Provider.URL], unless [Provider.SetIssuer] changed it.
func (p *Provider) Issuer() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.issuer
}

// URL returns the base URL of the provider's server, where its discovery
// document and endpoints are.
func (p *Provider) URL() string { return p.srv.URL }

// SetIssuer makes the discovery document and the ID tokens issued from now on
// name iss as the issuer, while the provider stays at [Provider.URL]: as a
// provider whose issuer is configured differently from where it is reached.
func (p *Provider) SetIssuer(iss string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.issuer = iss
}

// SetClaimsInUserInfoOnly makes ID tokens issued from now on carry only the
// protocol claims (iss, sub, aud, times, nonce, at_hash), with the person's
// profile, e-mail, groups and extra claims only in the UserInfo answer, as
// Zitadel and Okta do by default in the code flow. Off again with false.
func (p *Provider) SetClaimsInUserInfoOnly(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.userInfoOnly = on
}

// SetUser sets the default user, used when a request has no known login_hint.
func (p *Provider) SetUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.defaultUser = u.clone()
}

// AddUser registers u so that authorization requests carrying
// login_hint=u.Subject sign in as u. Adding a subject again replaces it.
func (p *Provider) AddUser(u User) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.users[u.Subject] = u.clone()
}

// SetGroupsClaim sets the name of the claim carrying [User.Groups]
// (default "groups") in ID tokens issued from now on.
func (p *Provider) SetGroupsClaim(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.groupsClaim = name
}

// AuthorizeRequests returns how many /authorize requests were received.
func (p *Provider) AuthorizeRequests() int64 { return p.authorizeRequests.Load() }

// TokenRequests returns how many /token requests were received, failed ones included.
func (p *Provider) TokenRequests() int64 { return p.tokenRequests.Load() }

// TokensIssued returns how many token responses were issued successfully.
func (p *Provider) TokensIssued() int64 { return p.tokensIssued.Load() }

// UserInfoRequests returns how many /userinfo requests were received, failed ones included.
func (p *Provider) UserInfoRequests() int64 { return p.userInfoRequests.Load() }

// userFor returns the user registered under loginHint, or the default user.
// The caller must hold p.mu.
func (p *Provider) userFor(loginHint string) User {
	if u, ok := p.users[loginHint]; ok && loginHint != "" {
		return u
	}
	return p.defaultUser
}

// clone returns a copy of u that shares no slices or maps with it.
func (u User) clone() User {
	c := u
	c.Groups = slices.Clone(u.Groups)
	c.ExtraClaims = maps.Clone(u.ExtraClaims)
	return c
}
