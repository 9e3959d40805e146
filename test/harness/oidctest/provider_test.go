package oidctest_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

const callbackURL = "https://rp.example.test/auth/oidc/callback"

// Stages at which a relying party's login can fail.
var (
	errCallback = errors.New("callback")
	errExchange = errors.New("exchange")
	errVerify   = errors.New("verify")
)

// relyingParty is a minimal OIDC client built like the server's, on go-oidc and oauth2.
type relyingParty struct {
	cfg      oauth2.Config
	verifier *oidc.IDTokenVerifier
}

// attempt is the per-login state a relying party keeps between redirects.
type attempt struct {
	state, nonce, verifier, authURL string
}

// claims are the ID token claims the tests look at.
type claims struct {
	Email             string   `json:"email"`
	EmailVerified     bool     `json:"email_verified"`
	PreferredUsername string   `json:"preferred_username"`
	Name              string   `json:"name"`
	Groups            []string `json:"groups"`
}

func newRelyingParty(t *testing.T, p *oidctest.Provider, style oauth2.AuthStyle) *relyingParty {
	t.Helper()
	op, err := oidc.NewProvider(t.Context(), p.Issuer())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	endpoint := op.Endpoint()
	endpoint.AuthStyle = style
	return &relyingParty{
		cfg: oauth2.Config{
			ClientID:     p.ClientID,
			ClientSecret: p.ClientSecret,
			Endpoint:     endpoint,
			RedirectURL:  callbackURL,
			Scopes:       []string{oidc.ScopeOpenID, "email", "profile", "groups"},
		},
		verifier: op.Verifier(&oidc.Config{ClientID: p.ClientID}),
	}
}

// begin builds an authorization URL with state, nonce and a PKCE S256 challenge.
func (rp *relyingParty) begin(opts ...oauth2.AuthCodeOption) attempt {
	a := attempt{state: rand.Text(), nonce: rand.Text(), verifier: oauth2.GenerateVerifier()}
	opts = append(opts, oidc.Nonce(a.nonce), oauth2.S256ChallengeOption(a.verifier))
	a.authURL = rp.cfg.AuthCodeURL(a.state, opts...)
	return a
}

// finish handles the callback: checks state, exchanges the code with the PKCE
// verifier, verifies the ID token and its nonce and at_hash.
func (rp *relyingParty) finish(ctx context.Context, a attempt, callback string) (*oidc.IDToken, error) {
	u, err := url.Parse(callback)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errCallback, err)
	}
	q := u.Query()
	switch {
	case q.Get("state") != a.state:
		return nil, fmt.Errorf("%w: state %q, want %q", errCallback, q.Get("state"), a.state)
	case q.Get("error") != "":
		return nil, fmt.Errorf("%w: %s: %s", errCallback, q.Get("error"), q.Get("error_description"))
	}
	tok, err := rp.cfg.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(a.verifier))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errExchange, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := rp.verifier.Verify(ctx, raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errVerify, err)
	}
	if idt.Nonce != a.nonce {
		return nil, fmt.Errorf("%w: nonce %q, want %q", errVerify, idt.Nonce, a.nonce)
	}
	if err := idt.VerifyAccessToken(tok.AccessToken); err != nil {
		return nil, fmt.Errorf("%w: %w", errVerify, err)
	}
	return idt, nil
}

// login runs a whole sign-in from the test goroutine.
func (rp *relyingParty) login(t *testing.T, p *oidctest.Provider, opts ...oauth2.AuthCodeOption) (*oidc.IDToken, error) {
	t.Helper()
	a := rp.begin(opts...)
	return rp.finish(t.Context(), a, p.Authorize(t, a.authURL))
}

func TestLogin(t *testing.T) {
	for name, style := range map[string]oauth2.AuthStyle{
		"client_secret_basic": oauth2.AuthStyleInHeader,
		"client_secret_post":  oauth2.AuthStyleInParams,
		"auto_detect":         oauth2.AuthStyleAutoDetect,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			p := oidctest.NewProvider(t)
			idt, err := newRelyingParty(t, p, style).login(t, p)
			if err != nil {
				t.Fatal(err)
			}
			var c claims
			if err := idt.Claims(&c); err != nil {
				t.Fatal(err)
			}
			want := claims{"alice@example.test", true, "alice", "Alice Example", []string{"users"}}
			if idt.Subject != "alice" || idt.Issuer != p.Issuer() || !equalClaims(c, want) {
				t.Errorf("got sub=%q iss=%q %+v, want alice %s %+v", idt.Subject, idt.Issuer, c, p.Issuer(), want)
			}
			if p.TokenRequests() != 1 || p.TokensIssued() != 1 || p.AuthorizeRequests() != 1 {
				t.Errorf("counters: authorize=%d token=%d issued=%d, want 1 each",
					p.AuthorizeRequests(), p.TokenRequests(), p.TokensIssued())
			}
		})
	}
}

func equalClaims(a, b claims) bool {
	return slices.Equal(a.Groups, b.Groups) &&
		a.Email == b.Email && a.EmailVerified == b.EmailVerified &&
		a.PreferredUsername == b.PreferredUsername && a.Name == b.Name
}
