package oidctest_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

func TestTokenFaults(t *testing.T) {
	tests := []struct {
		name    string
		inject  func(p *oidctest.Provider)
		wantErr func(err error) bool
	}{
		{"wrong audience", override("aud", "someone-else"), is(errVerify, "audience")},
		{"wrong issuer", override("iss", "https://evil.example.test"), is(errVerify, "different provider")},
		{"wrong nonce", override("nonce", "replayed"), is(errVerify, "nonce")},
		{"foreign signature", (*oidctest.Provider).NextSignWithForeignKey, is(errVerify, "signature")},
		{"expired", override("exp", time.Now().Add(-time.Hour).Unix()), func(err error) bool {
			var expired *oidc.TokenExpiredError
			return errors.As(err, &expired)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := oidctest.NewProvider(t)
			rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
			tt.inject(p)
			if _, err := rp.login(t, p); !tt.wantErr(err) {
				t.Fatalf("faulty login: got error %v", err)
			}
			if _, err := rp.login(t, p); err != nil {
				t.Fatalf("fault is not one-shot: next login failed: %v", err)
			}
		})
	}
}

func TestWrongPKCEVerifier(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInParams)
	a := rp.begin()
	cb := p.Authorize(t, a.authURL)
	a.verifier = oauth2.GenerateVerifier()
	_, err := rp.finish(t.Context(), a, cb)
	wantInvalidGrant(t, err)
}

func TestCodeReuse(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	a := rp.begin()
	cb := p.Authorize(t, a.authURL)
	if _, err := rp.finish(t.Context(), a, cb); err != nil {
		t.Fatal(err)
	}
	_, err := rp.finish(t.Context(), a, cb)
	wantInvalidGrant(t, err)
}

func TestRedirectURIMismatch(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	a := rp.begin()
	cb := p.Authorize(t, a.authURL)
	rp.cfg.RedirectURL = "https://rp.example.test/other"
	_, err := rp.finish(t.Context(), a, cb)
	wantInvalidGrant(t, err)
}

func TestWrongClientSecret(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleAutoDetect)
	rp.cfg.ClientSecret = "wrong"
	_, err := rp.login(t, p)
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) || re.ErrorCode != "invalid_client" {
		t.Fatalf("got %v, want invalid_client", err)
	}
	if p.TokensIssued() != 0 {
		t.Errorf("TokensIssued = %d, want 0", p.TokensIssued())
	}
}

func TestAuthorizeError(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	p.NextAuthorizeError("access_denied", "user said no")
	a := rp.begin()
	cb, err := url.Parse(p.Authorize(t, a.authURL))
	if err != nil {
		t.Fatal(err)
	}
	q := cb.Query()
	if q.Get("error") != "access_denied" || q.Get("error_description") != "user said no" ||
		q.Get("state") != a.state || q.Has("code") || cb.Path != "/auth/oidc/callback" {
		t.Errorf("callback %s", cb)
	}
	if _, err := rp.login(t, p); err != nil {
		t.Errorf("fault is not one-shot: next login failed: %v", err)
	}
}

func TestInvalidAuthorizeRequests(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	for name, mutate := range map[string]func(q url.Values){
		"unknown client":    func(q url.Values) { q.Set("client_id", "other") },
		"no redirect_uri":   func(q url.Values) { q.Del("redirect_uri") },
		"no state":          func(q url.Values) { q.Del("state") },
		"implicit flow":     func(q url.Values) { q.Set("response_type", "token") },
		"no openid scope":   func(q url.Values) { q.Set("scope", "email") },
		"no code_challenge": func(q url.Values) { q.Del("code_challenge") },
		"plain PKCE":        func(q url.Values) { q.Set("code_challenge_method", "plain") },
	} {
		u, _ := url.Parse(rp.begin().authURL)
		q := u.Query()
		mutate(q)
		u.RawQuery = q.Encode()
		if _, err := p.TryAuthorize(t.Context(), u.String()); err == nil ||
			!strings.Contains(err.Error(), "400 Bad Request") {
			t.Errorf("%s: got %v, want 400", name, err)
		}
	}
}

// override returns a fault injection setting claim to v in the next ID token.
func override(claim string, v any) func(*oidctest.Provider) {
	return func(p *oidctest.Provider) {
		p.NextTokenOverride(func(c map[string]any) { c[claim] = v })
	}
}

// is returns a matcher for errors at stage whose message mentions substr.
func is(stage error, substr string) func(error) bool {
	return func(err error) bool {
		return errors.Is(err, stage) && strings.Contains(err.Error(), substr)
	}
}

func wantInvalidGrant(t *testing.T, err error) {
	t.Helper()
	var re *oauth2.RetrieveError
	if !errors.Is(err, errExchange) || !errors.As(err, &re) || re.ErrorCode != "invalid_grant" {
		t.Fatalf("got %v, want invalid_grant from the token endpoint", err)
	}
}
