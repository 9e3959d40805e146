package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/store"
)

var (
	errUserInfoFailed = &apiError{Status: http.StatusBadGateway, Code: "sso_userinfo_failed",
		Message: "The sign-in provider did not say who you are (its UserInfo endpoint failed); start again, and tell an administrator if it keeps failing."}
	errUserInfoRejected = &apiError{Status: http.StatusUnauthorized, Code: "invalid_userinfo",
		Message: "The sign-in provider's answer about who you are does not match its ID token; start again."}
)

// fillFromUserInfo asks the provider's UserInfo endpoint about the person the ID token names
// when the ID token lacks a claim the sign-in reads (see lacksClaims), and adds to claims every
// claim the ID token lacks: many providers (Zitadel, Okta, ...) send the username, e-mail and
// groups only there. The answer must be about the same subject. An ID token that has them all,
// a provider without the endpoint, or a token response without an access token adds nothing
// and asks nothing: a provider whose UserInfo refuses its own access tokens (one issued for an
// API) or is down does not stop sign-ins that never needed it.
func (s *server) fillFromUserInfo(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, subject string, claims map[string]any) error {
	if !s.oidc.opts.lacksClaims(claims) || p.UserInfoEndpoint() == "" || tok.AccessToken == "" {
		return nil
	}
	ui, err := p.UserInfo(oidc.ClientContext(ctx, s.oidc.httpClient), oauth2.StaticTokenSource(tok))
	var info map[string]any
	if err == nil {
		err = ui.Claims(&info)
	}
	if err != nil {
		s.log.WarnContext(ctx, "OIDC UserInfo request failed", "err", err)
		return errUserInfoFailed
	}
	if sub, _ := info["sub"].(string); sub != subject {
		s.log.WarnContext(ctx, "OIDC UserInfo rejected", "err", "its subject differs from the ID token's")
		return errUserInfoRejected
	}
	// An e-mail and whether it is verified go together: an address taken from UserInfo is
	// verified only if UserInfo says so, and UserInfo's verdict counts for the ID token's
	// address only when UserInfo gives that same address.
	hasEmail := claims["email"] != nil
	if !hasEmail {
		delete(claims, "email_verified")
	}
	idEmail, _ := claims["email"].(string)
	infoEmail, _ := info["email"].(string)
	for k, v := range info {
		if k == "email_verified" && hasEmail && (idEmail == "" || infoEmail != idEmail) {
			continue
		}
		if cur, ok := claims[k]; !ok || cur == nil {
			claims[k] = v
		}
	}
	return nil
}

// lacksClaims reports whether claims (the verified ID token's) lack one that identityFrom
// reads: the username claim, the e-mail or whether it is verified, or the groups claim when
// group rules (AllowedGroups, AdminGroups) are set. A claim present with an empty value is
// the provider's answer, not a lack.
func (o OIDCOptions) lacksClaims(claims map[string]any) bool {
	if claims["email"] == nil || claims["email_verified"] == nil {
		return true
	}
	if name := o.usernameClaim(); name != "email" && lookupClaim(claims, name) == nil {
		return true
	}
	return len(o.AllowedGroups)+len(o.AdminGroups) > 0 && lookupClaim(claims, o.GroupsClaim) == nil
}

// lookupClaim returns the claim named name or, when there is none of that name, the value at
// the dotted path name into nested objects (realm_access.roles); nil when there is neither.
// The whole name is tried first, so claims whose names hold dots (https://example.com/groups)
// still work.
func lookupClaim(claims map[string]any, name string) any {
	if v, ok := claims[name]; ok {
		return v
	}
	var cur any = claims
	for part := range strings.SplitSeq(name, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = m[part]
	}
	return cur
}

// followProviderUsername renames a returning person to the username the provider now reports
// for them (the first of id.Usernames, when it is not the fallback name), if no one else has
// it. The sign-in has succeeded either way; a name another user has is kept, and the log says why.
func (s *server) followProviderUsername(ctx context.Context, u store.User, id store.SSOIdentity) {
	if len(id.Usernames) < 2 || u.Username == id.Usernames[0] {
		return
	}
	want := id.Usernames[0]
	renamed, err := s.store.RenameSSOUser(ctx, u.ID, id.Issuer, id.Subject, want)
	switch {
	case err == nil:
		s.log.InfoContext(ctx, "username follows the sign-in provider", "user_id", u.ID, "from", u.Username, "to", renamed.Username)
	case errors.Is(err, store.ErrConflict):
		s.log.InfoContext(ctx, "kept the username: the one the sign-in provider now reports belongs to another user",
			"user_id", u.ID, "username", u.Username, "provider_username", want)
	default:
		s.log.WarnContext(ctx, "could not follow the sign-in provider's new username", "user_id", u.ID, "err", err)
	}
}
