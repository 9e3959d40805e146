package sso

import (
	"context"
	"crypto/subtle"
	"net/url"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/store"
)

var errTokenRejected = &Error{Kind: Unauthenticated, Code: "invalid_id_token",
	Message: "The sign-in provider's answer could not be verified; start again."}

// Finish finishes the sign-in login, which the callback's state named and the caller has
// taken (store.TakeOIDCLogin) after checking the state against the browser's cookie: it
// reads the provider's answer in the callback's query q, exchanges the code, verifies the ID
// token and its nonce, reads the person's claims (asking UserInfo for those it lacks) and
// returns the verified identity, with the role and the usernames the provider's word gives.
// It creates nothing. A refusal is an Error; a refusal for the person's groups is one that
// Deprovision acts on.
func (c *Client) Finish(ctx context.Context, login store.OIDCLogin, q url.Values) (store.SSOIdentity, error) {
	if e := q.Get("error"); e != "" {
		return store.SSOIdentity{}, &Error{Kind: Unauthenticated, Code: "sso_provider_error",
			Message: "The sign-in provider did not sign you in (" + safeErrorCode(e) + ")."}
	}
	code := q.Get("code")
	if code == "" || len(code) > 2048 {
		return store.SSOIdentity{}, &Error{Kind: Invalid, Code: "missing_code", Message: "The sign-in provider sent no authorization code."}
	}
	oauth, provider, verifier, err := c.get(ctx)
	if err != nil {
		return store.SSOIdentity{}, err
	}
	tok, err := oauth.Exchange(c.exchangeContext(ctx), code, oauth2.VerifierOption(login.CodeVerifier))
	if err != nil {
		c.log.WarnContext(ctx, "OIDC code exchange failed", "err", err)
		return store.SSOIdentity{}, &Error{Kind: Unauthenticated, Code: "sso_exchange_failed",
			Message: "The sign-in provider did not accept the authorization code; start again."}
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		c.log.WarnContext(ctx, "OIDC ID token rejected", "err", err)
		return store.SSOIdentity{}, errTokenRejected
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(login.Nonce)) != 1 {
		c.log.WarnContext(ctx, "OIDC ID token rejected", "err", "nonce mismatch")
		return store.SSOIdentity{}, errTokenRejected
	}
	// A person is their (issuer, subject): without a subject every such sign-in would be one
	// shared account. OpenID Connect caps sub at 255 characters; longer ones are refused too,
	// which keeps the subjects migration 00012 gave accounts made without one out of reach.
	if idt.Subject == "" || len(idt.Subject) > 255 {
		c.log.WarnContext(ctx, "OIDC ID token rejected", "err", "its sub claim is missing, empty or longer than 255 characters")
		return store.SSOIdentity{}, errTokenRejected
	}
	var cs claimSet
	if err := idt.Claims(&cs.id); err != nil {
		return store.SSOIdentity{}, errTokenRejected
	}
	at, err := authenticatedAt(cs.id["auth_time"], login, time.Now())
	if err != nil {
		c.log.WarnContext(ctx, "OIDC step-up sign-in refused", "reason", codeOf(err))
		return store.SSOIdentity{}, err
	}
	if err := c.fillFromUserInfo(ctx, provider, tok, idt.Subject, &cs); err != nil {
		return store.SSOIdentity{}, err
	}
	id, err := c.identityFrom(idt.Issuer, idt.Subject, cs)
	id.AuthenticatedAt = at
	return id, err
}

// safeErrorCode passes on a provider's error code only if it looks like one.
func safeErrorCode(e string) string {
	if len(e) <= 64 && strings.Trim(e, "abcdefghijklmnopqrstuvwxyz_") == "" {
		return e
	}
	return "unknown error"
}
