package sso

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"slices"
	"strings"

	"github.com/terdut-server/terdut-server/internal/store"
)

// identityFrom applies the group rules to the person's claims and proposes usernames: the
// username claim, then a verified e-mail, then a stable name made from the identity. A
// missing groups claim refuses the sign-in like a group not allowed; whether it also disarms
// the person depends on whether they have had the claim before (see Deprovision).
func (c *Client) identityFrom(issuer, subject string, cs claimSet) (store.SSOIdentity, error) {
	groupsClaim := cs.get(c.opts.GroupsClaim)
	groups := stringsClaim(groupsClaim)
	if len(c.opts.AllowedGroups) > 0 && !intersects(groups, c.opts.AllowedGroups) {
		refusal := &groupRefusal{issuer: issuer, subject: subject}
		if groupsClaim == nil {
			refusal.missingClaim = c.opts.GroupsClaim
		}
		return store.SSOIdentity{}, refusal
	}
	role := store.RoleMember
	if intersects(groups, c.opts.AdminGroups) {
		role = store.RoleAdmin
	}
	// An address the provider says it has not verified is not stored; one it does not say it
	// verified is kept as contact, but never made a username.
	emailClaim, emailVerified := cs.email()
	email, _ := emailClaim.(string)
	if !c.validEmail(email) || unverified(emailVerified) {
		email = ""
	}
	verifiedEmail := ""
	if verified(emailVerified) {
		verifiedEmail = email
	}
	claimName := c.opts.usernameClaim()
	preferred, _ := cs.get(claimName).(string)
	if claimName == "email" {
		preferred = verifiedEmail
	}
	var names []string
	for _, n := range []string{c.sanitizeUsername(preferred), c.sanitizeUsername(verifiedEmail)} {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	sum := sha256.Sum256([]byte(issuer + "\x00" + subject))
	names = append(names, "user-"+hex.EncodeToString(sum[:4]))
	id := store.SSOIdentity{Issuer: issuer, Subject: subject, Email: email, Usernames: names, Role: role}
	if groupsClaim != nil {
		id.GroupsClaim = c.opts.GroupsClaim
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
func (c *Client) sanitizeUsername(s string) string {
	var b strings.Builder
	for i := 0; i < len(s) && b.Len() < 64; i++ {
		if ch := s[i]; isAlnum(ch) || ch == '.' || ch == '_' || ch == '-' || ch == '@' {
			b.WriteByte(ch)
		}
	}
	out := strings.TrimLeft(b.String(), "._-@")
	if out == "" || !c.validUsername(out) {
		return ""
	}
	return out
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
