package sso

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"regexp"

	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/store"
)

var loginHintPattern = regexp.MustCompile(`^[A-Za-z0-9._@+-]{1,128}$`)

// Begun is a sign-in begun: its state, which the caller records (store.SaveOIDCLogin) and binds
// to the browser (StateCookies), what the callback must check it against, and where to send
// the browser.
type Begun struct {
	State string
	Login store.OIDCLogin
	URL   string // the provider's authorization endpoint, with the request
}

// Begin begins a sign-in: a state, a nonce and a PKCE verifier, and the authorization request
// that carries them. loginHint is passed on only if it looks like a username or an address;
// stepUp asks the provider to authenticate the person again. Until the provider is known it
// waits for its discovery a while, then returns an Error: sso_unavailable, or
// sso_misconfigured.
func (c *Client) Begin(ctx context.Context, stepUp bool, loginHint string) (Begun, error) {
	oauth, _, _, err := c.get(ctx)
	if err != nil {
		return Begun{}, err
	}
	b := Begun{State: randomString(32), Login: store.OIDCLogin{Nonce: randomString(32), CodeVerifier: oauth2.GenerateVerifier(),
		StepUp: stepUp}}
	opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(b.Login.CodeVerifier), oauth2.SetAuthURLParam("nonce", b.Login.Nonce)}
	if loginHintPattern.MatchString(loginHint) {
		opts = append(opts, oauth2.SetAuthURLParam("login_hint", loginHint))
	}
	if stepUp {
		// Both, as providers honour one or the other: OpenID Connect Core defines each.
		opts = append(opts, oauth2.SetAuthURLParam("max_age", "0"), oauth2.SetAuthURLParam("prompt", "login"))
	}
	b.URL = oauth.AuthCodeURL(b.State, opts...)
	return b, nil
}

// randomString returns n random bytes, base64url-encoded.
func randomString(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
