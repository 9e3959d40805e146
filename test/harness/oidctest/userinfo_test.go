package oidctest_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// loginWithUserInfo signs in through p and asks its UserInfo endpoint about the person, as a
// relying party does with go-oidc. It returns the ID token's claims and UserInfo's.
func loginWithUserInfo(t *testing.T, p *oidctest.Provider, hint string) (idClaims, infoClaims map[string]any, err error) {
	t.Helper()
	op, err := oidc.NewProvider(t.Context(), p.URL())
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	a := rp.begin(oauth2.SetAuthURLParam("login_hint", hint))
	u := p.Authorize(t, a.authURL)
	cb, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := rp.cfg.Exchange(t.Context(), cb.Query().Get("code"), oauth2.VerifierOption(a.verifier))
	if err != nil {
		t.Fatal(err)
	}
	idt, err := rp.verifier.Verify(t.Context(), tok.Extra("id_token").(string))
	if err != nil {
		t.Fatal(err)
	}
	if err := idt.Claims(&idClaims); err != nil {
		t.Fatal(err)
	}
	info, err := op.UserInfo(t.Context(), oauth2.StaticTokenSource(tok))
	if err != nil {
		return idClaims, nil, err
	}
	if err := info.Claims(&infoClaims); err != nil {
		t.Fatal(err)
	}
	return idClaims, infoClaims, nil
}

func TestUserInfo(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	p.AddUser(oidctest.User{Subject: "dora", PreferredUsername: "dora", Email: "dora@example.test", Groups: []string{"ops"},
		ExtraClaims: map[string]any{"email_verified": nil, "tenant": "acme"}})

	t.Run("Both", func(t *testing.T) {
		id, info, err := loginWithUserInfo(t, p, "dora")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []map[string]any{id, info} {
			if c["sub"] != "dora" || c["preferred_username"] != "dora" || c["email"] != "dora@example.test" ||
				c["tenant"] != "acme" || !slices.Equal(strs(c["groups"]), []string{"ops"}) {
				t.Errorf("got %v, want dora's claims", c)
			}
			if _, ok := c["email_verified"]; ok {
				t.Errorf("got email_verified in %v, want it removed by the nil extra claim", c)
			}
		}
		if p.UserInfoRequests() != 1 {
			t.Errorf("UserInfoRequests = %d, want 1", p.UserInfoRequests())
		}
	})

	t.Run("ClaimsInUserInfoOnly", func(t *testing.T) {
		p.SetClaimsInUserInfoOnly(true)
		defer p.SetClaimsInUserInfoOnly(false)
		id, info, err := loginWithUserInfo(t, p, "dora")
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"preferred_username", "email", "groups", "tenant", "name"} {
			if _, ok := id[k]; ok {
				t.Errorf("ID token has %s: %v", k, id)
			}
		}
		if id["sub"] != "dora" || info["sub"] != "dora" || info["email"] != "dora@example.test" || info["tenant"] != "acme" {
			t.Errorf("got ID token %v and UserInfo %v, want the subject in both and the rest in UserInfo", id, info)
		}
	})

	t.Run("Faults", func(t *testing.T) {
		p.NextUserInfoError(http.StatusInternalServerError)
		if _, _, err := loginWithUserInfo(t, p, "dora"); err == nil {
			t.Error("with an armed error: got no error")
		}
		p.NextUserInfoOverride(func(c map[string]any) { c["sub"] = "other" })
		if _, info, err := loginWithUserInfo(t, p, "dora"); err != nil || info["sub"] != "other" {
			t.Errorf("with an override: got %v, %v, want sub other", info, err)
		}
		if _, info, err := loginWithUserInfo(t, p, "dora"); err != nil || info["sub"] != "dora" {
			t.Errorf("faults are not one-shot: got %v, %v", info, err)
		}
	})

	t.Run("ErrUnknownToken", func(t *testing.T) {
		op, err := oidc.NewProvider(t.Context(), p.URL())
		if err != nil {
			t.Fatal(err)
		}
		_, err = op.UserInfo(context.Background(), oauth2.StaticTokenSource(&oauth2.Token{AccessToken: "forged", TokenType: "Bearer"}))
		if err == nil {
			t.Error("got no error for a forged access token")
		}
	})
}

func TestSetUserInfo(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)

	t.Run("RefusesTokens", func(t *testing.T) {
		p.SetUserInfoRefusesTokens(true)
		defer p.SetUserInfoRefusesTokens(false)
		_, _, err := loginWithUserInfo(t, p, "alice")
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("got %v, want a 401 for the provider's own access token", err)
		}
	})

	t.Run("Endpoint", func(t *testing.T) {
		defer p.SetUserInfoEndpoint(p.URL() + "/userinfo")
		for _, u := range []string{"", "http://127.0.0.1:9/userinfo"} {
			p.SetUserInfoEndpoint(u)
			op, err := oidc.NewProvider(t.Context(), p.URL())
			if err != nil {
				t.Fatal(err)
			}
			if got := op.UserInfoEndpoint(); got != u {
				t.Errorf("got userinfo_endpoint %q, want %q", got, u)
			}
		}
	})
}

func TestSetIssuer(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleInHeader)
	p.SetIssuer("https://elsewhere.example.test")
	var mismatch *oidc.IssuerMismatchError
	if _, err := oidc.NewProvider(t.Context(), p.URL()); !errors.As(err, &mismatch) || mismatch.Discovered != "https://elsewhere.example.test" {
		t.Fatalf("discovery: got %v, want an issuer mismatch naming the new issuer", err)
	}
	// With the issuer accepted as it is, the endpoints still work and tokens carry it.
	ctx := oidc.InsecureIssuerURLContext(t.Context(), p.Issuer())
	op, err := oidc.NewProvider(ctx, p.URL())
	if err != nil {
		t.Fatal(err)
	}
	rp.verifier = op.Verifier(&oidc.Config{ClientID: p.ClientID})
	idt, err := rp.login(t, p)
	if err != nil || idt.Issuer != "https://elsewhere.example.test" {
		t.Fatalf("got %v, %v, want a token from https://elsewhere.example.test", idt, err)
	}
}

func strs(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, s := range a {
			out = append(out, s.(string))
		}
	}
	return out
}
