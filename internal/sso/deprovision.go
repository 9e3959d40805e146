package sso

import (
	"context"
	"errors"

	"github.com/terdut-server/terdut-server/internal/store"
)

// errGroupNotAllowed refuses a person whose groups do not admit them.
var errGroupNotAllowed = &Error{Kind: Forbidden, Code: "group_not_allowed",
	Message: "Your account is not in a group allowed to use terdut-server."}

// groupRefusal is errGroupNotAllowed for a person the provider has just vouched for: the
// callback disarms whatever that person holds here (see Deprovision). missingClaim names
// the groups claim when the sign-in carried none.
type groupRefusal struct {
	issuer, subject, missingClaim string
}

func (e *groupRefusal) Error() string { return errGroupNotAllowed.Error() }
func (e *groupRefusal) Unwrap() error { return errGroupNotAllowed }

// Deprovision acts on a refused sign-in: when the provider vouched for the person but their
// groups no longer admit them, it revokes their sessions and API keys and drops them to member
// (store.DeprovisionSSOUser), and returns what it did with the provider's issuer, which the
// caller records. Any other refusal, or a person who never signed in here, needs nothing: it
// returns a zero store.Deprovisioned and no error.
//
// A sign-in without the groups claim disarms a person whose earlier sign-ins carried it:
// providers omit an empty groups claim, so they were dropped from every group. For anyone
// else it disarms nothing and logs a warning: a claim never seen is more likely the
// provider's or our configuration (a scope not granted, a misspelt claim name). Pass a
// context that a client going away does not cancel: the revocation must not stop half-way.
func (c *Client) Deprovision(ctx context.Context, refusal error) (d store.Deprovisioned, issuer string, err error) {
	var gr *groupRefusal
	if !errors.As(refusal, &gr) {
		return store.Deprovisioned{}, "", nil
	}
	d, err = c.store.DeprovisionSSOUser(ctx, gr.issuer, gr.subject, gr.missingClaim)
	if errors.Is(err, store.ErrNotFound) {
		if gr.missingClaim != "" {
			c.log.WarnContext(ctx, "single sign-on refused a person whose ID token and UserInfo carry no groups claim, and whose earlier sign-ins never did: check --oidc-groups-claim and the provider's scopes",
				"oidc_groups_claim", gr.missingClaim)
		}
		return store.Deprovisioned{}, "", nil
	}
	if err != nil {
		return store.Deprovisioned{}, "", err
	}
	return d, gr.issuer, nil
}
