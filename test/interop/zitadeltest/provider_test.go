package zitadeltest_test

import (
	"crypto/rand"
	"net/url"
	"testing"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/test/interop/zitadeltest"
)

const callback = "http://rp.example.test/callback"

// TestModes signs in with go-oidc and shows where each mode puts the person's claims.
func TestModes(t *testing.T) {
	for _, inIDToken := range []bool{true, false} {
		p := zitadeltest.New(t, zitadeltest.Options{ClaimsInIDToken: inIDToken, RedirectURI: callback})
		p.AddUser(zitadeltest.User{Subject: "sub-ada", Username: "ada", Email: "ada@example.test", EmailVerified: "true",
			Claims: map[string]any{"groups": []string{"ops"}}})
		op, err := oidc.NewProvider(t.Context(), p.URL())
		if err != nil {
			t.Fatal(err)
		}
		cfg := oauth2.Config{ClientID: p.ClientID, ClientSecret: p.ClientSecret, Endpoint: op.Endpoint(), RedirectURL: callback,
			Scopes: []string{oidc.ScopeOpenID, "profile", "email"}}
		state, nonce, verifier := rand.Text(), rand.Text(), oauth2.GenerateVerifier()
		cb, err := p.TryAuthorize(t.Context(), cfg.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier),
			oauth2.SetAuthURLParam("login_hint", "sub-ada")))
		if err != nil {
			t.Fatal(err)
		}
		u, _ := url.Parse(cb)
		if u.Query().Get("state") != state || u.Query().Get("code") == "" {
			t.Fatalf("callback %s: want code and state", cb)
		}
		tok, err := cfg.Exchange(t.Context(), u.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		idt, err := op.Verifier(&oidc.Config{ClientID: p.ClientID}).Verify(t.Context(), tok.Extra("id_token").(string))
		if err != nil || idt.Nonce != nonce || idt.Subject != "sub-ada" {
			t.Fatalf("ID token: got %+v, %v", idt, err)
		}
		var id map[string]any
		_ = idt.Claims(&id)
		if _, has := id["preferred_username"]; has != inIDToken {
			t.Errorf("claims in ID token %v: got ID token %v", inIDToken, id)
		}
		if _, has := id["groups"]; has != inIDToken {
			t.Errorf("claims in ID token %v: got ID token %v", inIDToken, id)
		}
		info, err := op.UserInfo(t.Context(), oauth2.StaticTokenSource(tok))
		var ui map[string]any
		if err == nil {
			err = info.Claims(&ui)
		}
		if err != nil || ui["sub"] != "sub-ada" || ui["preferred_username"] != "ada" || ui["email_verified"] != "true" || ui["groups"] == nil {
			t.Errorf("UserInfo: got %v, %v, want ada's claims", ui, err)
		}
	}
}
