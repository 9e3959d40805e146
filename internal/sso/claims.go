package sso

import (
	"context"
	"errors"
	"strings"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/internal/store"
)

var (
	errUserInfoFailed = &Error{Kind: ProviderFailed, Code: "sso_userinfo_failed",
		Message: "The sign-in provider did not say who you are (its UserInfo endpoint failed); start again, and tell an administrator if it keeps failing."}
	errUserInfoRejected = &Error{Kind: Unauthenticated, Code: "invalid_userinfo",
		Message: "The sign-in provider's answer about who you are does not match its ID token; start again."}
)

// claimSet is what the provider said about a person: the verified ID token's claims and,
// when they lacked one the sign-in reads, UserInfo's answer about the same subject (nil
// otherwise). Each claim is read at one path (see claimPath), in the ID token, and in
// UserInfo only where the ID token lacks it: the two are never merged, so UserInfo can fill
// a gap but never override or shadow what the ID token says.
type claimSet struct {
	id, info map[string]any
}

// get returns the claim at the path name: the ID token's, or UserInfo's when the ID token
// has none (or null) there.
func (c claimSet) get(name string) any {
	if v := lookupClaim(c.id, name); v != nil {
		return v
	}
	return lookupClaim(c.info, name)
}

// email returns the person's e-mail and the provider's word on whether it is verified. The
// two go together: an address taken from UserInfo is verified only if UserInfo says so, and
// UserInfo's verdict counts for the ID token's address only when UserInfo gives that same
// address.
func (c claimSet) email() (email, verified any) {
	if email = c.id["email"]; email == nil {
		return c.info["email"], c.info["email_verified"]
	}
	if verified = c.id["email_verified"]; verified == nil {
		if s, _ := email.(string); s != "" && c.info["email"] == email {
			verified = c.info["email_verified"]
		}
	}
	return email, verified
}

// fillFromUserInfo asks the provider's UserInfo endpoint about the person the ID token names
// when the ID token lacks a claim the sign-in reads (see lacksClaims): many providers (Zitadel,
// Okta, ...) send the username, e-mail and groups only there. The answer must be about the
// same subject. An ID token that has them all, a provider without the endpoint, or a token
// response without an access token asks nothing: a provider whose UserInfo refuses its own
// access tokens (one issued for an API) or is down does not stop sign-ins that never needed it.
func (c *Client) fillFromUserInfo(ctx context.Context, p *oidc.Provider, tok *oauth2.Token, subject string, cs *claimSet) error {
	if !c.opts.lacksClaims(cs.id) || p.UserInfoEndpoint() == "" || tok.AccessToken == "" {
		return nil
	}
	ui, err := p.UserInfo(oidc.ClientContext(ctx, c.httpClient), oauth2.StaticTokenSource(tok))
	var info map[string]any
	if err == nil {
		err = ui.Claims(&info)
	}
	if err != nil {
		c.log.WarnContext(ctx, "OIDC UserInfo request failed", "err", err)
		return errUserInfoFailed
	}
	if sub, _ := info["sub"].(string); sub != subject {
		c.log.WarnContext(ctx, "OIDC UserInfo rejected", "err", "its subject differs from the ID token's")
		return errUserInfoRejected
	}
	cs.info = info
	return nil
}

// lacksClaims reports whether claims (the verified ID token's) lack one that identityFrom
// reads: the username claim, the e-mail or whether it is verified, or the groups claim when
// group rules (AllowedGroups, AdminGroups) are set. A claim present with an empty value is
// the provider's answer, not a lack.
func (o Options) lacksClaims(claims map[string]any) bool {
	if claims["email"] == nil || claims["email_verified"] == nil {
		return true
	}
	if name := o.usernameClaim(); name != "email" && lookupClaim(claims, name) == nil {
		return true
	}
	return len(o.AllowedGroups)+len(o.AdminGroups) > 0 && lookupClaim(claims, o.GroupsClaim) == nil
}

// lookupClaim returns the value at the claim path name, nil when there is none. A path has
// one meaning, whatever the claims hold: a name with a colon is a URI, one claim however many
// dots it has (Auth0's https://example.com/groups, Zitadel's urn:zitadel:iam:org:project:roles);
// any other name is split at its dots into nested objects (realm_access.roles,
// resource_access.terdut.roles), and a top-level claim literally named with those dots is
// never read in their place.
func lookupClaim(claims map[string]any, name string) any {
	if strings.Contains(name, ":") {
		return claims[name]
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

// FollowUsername renames a returning person to the username the provider now reports
// for them (the first of id.Usernames, when it is not the fallback name), if no one else has
// it. The sign-in has succeeded either way; a name another user has is kept, and the log says why.
func (c *Client) FollowUsername(ctx context.Context, u store.User, id store.SSOIdentity) {
	if len(id.Usernames) < 2 || u.Username == id.Usernames[0] {
		return
	}
	want := id.Usernames[0]
	renamed, err := c.store.RenameSSOUser(ctx, u.ID, id.Issuer, id.Subject, want)
	switch {
	case err == nil:
		c.log.InfoContext(ctx, "username follows the sign-in provider", "user_id", u.ID, "from", u.Username, "to", renamed.Username)
	case errors.Is(err, store.ErrConflict):
		c.log.InfoContext(ctx, "kept the username: the one the sign-in provider now reports belongs to another user",
			"user_id", u.ID, "username", u.Username, "provider_username", want)
	default:
		c.log.WarnContext(ctx, "could not follow the sign-in provider's new username", "user_id", u.ID, "err", err)
	}
}
