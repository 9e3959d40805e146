package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/store"
)

var (
	errSSONotConfigured = &apiError{Status: http.StatusNotFound, Code: "sso_not_configured",
		Message: "Single sign-on is not configured on this server."}
	errInvalidState = errBadRequest("invalid_state",
		"This sign-in link is invalid, expired or already used, or was started in another browser; start again.")
	errTokenRejected = &apiError{Status: http.StatusUnauthorized, Code: "invalid_id_token",
		Message: "The sign-in provider's answer could not be verified; start again."}
	errGroupNotAllowed = &apiError{Status: http.StatusForbidden, Code: "group_not_allowed",
		Message: "Your account is not in a group allowed to use terdut-server."}
	loginHintPattern = regexp.MustCompile(`^[A-Za-z0-9._@+-]{1,128}$`)
)

func (s *server) handleOIDCLogin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.allowAddress(r, "oidc"); err != nil {
			s.fail(w, r, err)
			return
		}
		if s.oidc == nil {
			s.fail(w, r, errSSONotConfigured)
			return
		}
		// A sign-in is recorded only once the provider is known, so starts while it is down
		// take no place among those in progress. The gate still answers first: while pending,
		// nobody needs to hear about the provider.
		oauth, _, _, err := s.oidc.get(r.Context())
		if err != nil {
			if s.opts.Gate {
				if b, berr := s.store.Bootstrap(r.Context()); berr == nil && b.State != store.StateComplete {
					s.refusePending(w, r, "oidc")
					return
				}
			}
			s.fail(w, r, err)
			return
		}
		state, login := randomString(32), store.OIDCLogin{Nonce: randomString(32), CodeVerifier: oauth2.GenerateVerifier(),
			StepUp: r.URL.Query().Get("reauth") == "1"}
		evicted, err := s.store.SaveOIDCLogin(r.Context(), state, login, oidcLoginTTL, store.Gate(s.opts.Gate), s.opts.OIDCPendingLimit)
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if evicted > 0 {
			s.log.WarnContext(r.Context(), "single sign-ons in progress reached --oidc-pending-limit: the oldest were ended",
				"evicted", evicted, "oidc_pending_limit", s.opts.OIDCPendingLimit)
		}
		s.setStateCookie(w, r, state)
		opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(login.CodeVerifier), oauth2.SetAuthURLParam("nonce", login.Nonce)}
		if hint := r.URL.Query().Get("login_hint"); loginHintPattern.MatchString(hint) {
			opts = append(opts, oauth2.SetAuthURLParam("login_hint", hint))
		}
		if login.StepUp {
			// Both, as providers honour one or the other: OpenID Connect Core defines each.
			opts = append(opts, oauth2.SetAuthURLParam("max_age", "0"), oauth2.SetAuthURLParam("prompt", "login"))
		}
		http.Redirect(w, r, oauth.AuthCodeURL(state, opts...), http.StatusFound)
	})
}

func (s *server) handleOIDCCallback() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.oidc == nil {
			s.fail(w, r, errSSONotConfigured)
			return
		}
		id, err := s.finishOIDC(w, r)
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			if derr := s.disarmRefused(r, err); derr != nil {
				s.fail(w, r, derr)
				return
			}
			s.metrics.signinRefused.WithLabelValues("oidc", s.classify(err).Code).Inc()
			s.refusedEvent(r, "login.sso.refused", s.classify(err).Code)
			s.fail(w, r, err)
			return
		}
		si, err := s.store.SignInSSO(r.Context(), id, s.opts.SessionTTL, store.Gate(s.opts.Gate))
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		u, sess := si.User, si.Session
		s.ssoEvents(r, id.Issuer, si)
		if !si.Created {
			s.followProviderUsername(r.Context(), u, id)
		}
		s.setSessionCookie(w, sess)
		s.metrics.signins.WithLabelValues("oidc").Inc()
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// finishOIDC checks the callback against the sign-in it finishes and returns the verified
// identity. It creates nothing. While the gate is closed it returns store.ErrBootstrapPending,
// whatever the callback holds: the gate is read in the same round trip that consumes the
// sign-in, which happens only when the state matches this browser's cookie.
func (s *server) finishOIDC(w http.ResponseWriter, r *http.Request) (store.SSOIdentity, error) {
	q := r.URL.Query()
	state := q.Get("state")
	matches := state != "" && len(state) <= 128 && s.stateCookieMatches(r, state)
	if !matches {
		state = "" // no sign-in has this state: the lookup below only reads the gate
	}
	login, err := s.store.TakeOIDCLogin(r.Context(), state, store.Gate(s.opts.Gate))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.SSOIdentity{}, err
	}
	if matches {
		s.clearStateCookie(w, state)
	}
	if !matches || err != nil {
		return store.SSOIdentity{}, errInvalidState
	}
	if e := q.Get("error"); e != "" {
		return store.SSOIdentity{}, &apiError{Status: http.StatusUnauthorized, Code: "sso_provider_error",
			Message: "The sign-in provider did not sign you in (" + safeErrorCode(e) + ")."}
	}
	code := q.Get("code")
	if code == "" || len(code) > 2048 {
		return store.SSOIdentity{}, errBadRequest("missing_code", "The sign-in provider sent no authorization code.")
	}
	oauth, provider, verifier, err := s.oidc.get(r.Context())
	if err != nil {
		return store.SSOIdentity{}, err
	}
	tok, err := oauth.Exchange(s.oidc.exchangeContext(r.Context()), code, oauth2.VerifierOption(login.CodeVerifier))
	if err != nil {
		s.log.WarnContext(r.Context(), "OIDC code exchange failed", "err", err)
		return store.SSOIdentity{}, &apiError{Status: http.StatusUnauthorized, Code: "sso_exchange_failed",
			Message: "The sign-in provider did not accept the authorization code; start again."}
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := verifier.Verify(r.Context(), raw)
	if err != nil {
		s.log.WarnContext(r.Context(), "OIDC ID token rejected", "err", err)
		return store.SSOIdentity{}, errTokenRejected
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(login.Nonce)) != 1 {
		s.log.WarnContext(r.Context(), "OIDC ID token rejected", "err", "nonce mismatch")
		return store.SSOIdentity{}, errTokenRejected
	}
	// A person is their (issuer, subject): without a subject every such sign-in would be one
	// shared account. OpenID Connect caps sub at 255 characters; longer ones are refused too,
	// which keeps the subjects migration 00012 gave accounts made without one out of reach.
	if idt.Subject == "" || len(idt.Subject) > 255 {
		s.log.WarnContext(r.Context(), "OIDC ID token rejected", "err", "its sub claim is missing, empty or longer than 255 characters")
		return store.SSOIdentity{}, errTokenRejected
	}
	var c claimSet
	if err := idt.Claims(&c.id); err != nil {
		return store.SSOIdentity{}, errTokenRejected
	}
	at, err := authenticatedAt(c.id["auth_time"], login, time.Now())
	if err != nil {
		s.log.WarnContext(r.Context(), "OIDC step-up sign-in refused", "reason", s.classify(err).Code)
		return store.SSOIdentity{}, err
	}
	if err := s.fillFromUserInfo(r.Context(), provider, tok, idt.Subject, &c); err != nil {
		return store.SSOIdentity{}, err
	}
	id, err := s.identityFrom(idt.Issuer, idt.Subject, c)
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

// identityFrom applies the group rules to the person's claims and proposes usernames: the
// username claim, then a verified e-mail, then a stable name made from the identity. A
// missing groups claim refuses the sign-in like a group not allowed; whether it also disarms
// the person depends on whether they have had the claim before (see disarmRefused).
func (s *server) identityFrom(issuer, subject string, c claimSet) (store.SSOIdentity, error) {
	groupsClaim := c.get(s.oidc.opts.GroupsClaim)
	groups := stringsClaim(groupsClaim)
	if len(s.oidc.opts.AllowedGroups) > 0 && !intersects(groups, s.oidc.opts.AllowedGroups) {
		refusal := &groupRefusal{issuer: issuer, subject: subject}
		if groupsClaim == nil {
			refusal.missingClaim = s.oidc.opts.GroupsClaim
		}
		return store.SSOIdentity{}, refusal
	}
	role := store.RoleMember
	if intersects(groups, s.oidc.opts.AdminGroups) {
		role = store.RoleAdmin
	}
	// An address the provider says it has not verified is not stored; one it does not say it
	// verified is kept as contact, but never made a username.
	emailClaim, emailVerified := c.email()
	email, _ := emailClaim.(string)
	if validateEmail(email) != nil || unverified(emailVerified) {
		email = ""
	}
	verifiedEmail := ""
	if verified(emailVerified) {
		verifiedEmail = email
	}
	claimName := s.oidc.opts.usernameClaim()
	preferred, _ := c.get(claimName).(string)
	if claimName == "email" {
		preferred = verifiedEmail
	}
	var names []string
	for _, n := range []string{sanitizeUsername(preferred), sanitizeUsername(verifiedEmail)} {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	names = append(names, "user-"+hex.EncodeToString(sum[:4]))
	id := store.SSOIdentity{Issuer: issuer, Subject: subject, Email: email, Usernames: names, Role: role}
	if groupsClaim != nil {
		id.GroupsClaim = s.oidc.opts.GroupsClaim
	}
	return id, nil
}

// unverified reports whether the provider says the address is not verified; some send the
// claim as a string. A provider that omits it has not said so.
func unverified(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		return !strings.EqualFold(v, "true")
	}
	return false
}

// verified reports whether the provider says the address is verified: true, or the string
// "true" as Cognito sends it. A missing claim is not verified.
func verified(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case string:
		return strings.EqualFold(v, "true")
	}
	return false
}

// stringsClaim reads a groups claim: an array of strings (items of other types are skipped), a
// single string, or an object whose keys are the groups, as Zitadel sends a project's roles
// (urn:zitadel:iam:org:project:roles: {"admin": {"<org id>": "<org domain>"}}).
func stringsClaim(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, g := range v {
			if s, ok := g.(string); ok {
				out = append(out, s)
			}
		}
		return out
	case map[string]any:
		return slices.Sorted(maps.Keys(v))
	}
	return nil
}

func intersects(a, b []string) bool {
	return slices.ContainsFunc(a, func(x string) bool { return slices.Contains(b, x) })
}

// sanitizeUsername turns a claim into a valid username, or "" when too little of it is usable.
func sanitizeUsername(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 64; i++ {
		if c := s[i]; isAlnum(c) || c == '.' || c == '_' || c == '-' || c == '@' {
			b.WriteByte(c)
		}
	}
	out := strings.TrimLeft(b.String(), "._-@")
	if out == "" || validateUsername(out) != nil {
		return ""
	}
	return out
}
