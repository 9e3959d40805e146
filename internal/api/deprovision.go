package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/terdut-server/terdut-server/internal/store"
)

// groupRefusal is errGroupNotAllowed for a person the provider has just vouched for: the
// callback disarms whatever that person holds here (see disarmRefused). missingClaim names
// the groups claim when the sign-in carried none.
type groupRefusal struct {
	issuer, subject, missingClaim string
}

func (e *groupRefusal) Error() string { return errGroupNotAllowed.Error() }
func (e *groupRefusal) Unwrap() error { return errGroupNotAllowed }

// disarmRefused acts on a refused sign-in: when the provider vouched for the person but their
// groups no longer admit them, it revokes their sessions and API keys and drops them to member
// (store.DeprovisionSSOUser), and says so in the log. It returns an error only when that
// failed; any other refusal, or a person who never signed in here, needs nothing.
//
// A sign-in without the groups claim disarms a person whose earlier sign-ins carried it:
// providers omit an empty groups claim, so they were dropped from every group. For anyone
// else it disarms nothing and logs a warning: a claim never seen is more likely the
// provider's or our configuration (a scope not granted, a misspelt claim name). A client
// that goes away must not stop the revocation half-way: it runs to the end regardless.
func (s *server) disarmRefused(r *http.Request, refusal error) error {
	ctx := context.WithoutCancel(r.Context())
	var gr *groupRefusal
	if !errors.As(refusal, &gr) {
		return nil
	}
	d, err := s.store.DeprovisionSSOUser(ctx, gr.issuer, gr.subject, gr.missingClaim)
	if errors.Is(err, store.ErrNotFound) {
		if gr.missingClaim != "" {
			s.log.WarnContext(ctx, "single sign-on refused a person whose ID token and UserInfo carry no groups claim, and whose earlier sign-ins never did: check --oidc-groups-claim and the provider's scopes",
				"oidc_groups_claim", gr.missingClaim)
		}
		return nil
	}
	if err != nil {
		return err
	}
	if d.WasAdmin || d.RevokedAPIKeys > 0 || d.RevokedSessions > 0 {
		s.log.WarnContext(ctx, "single sign-on refused this person for their groups: revoked their sessions and API keys",
			"event", "user.deprovisioned", "user_id", d.UserID, "was_admin", d.WasAdmin, "revoked_api_keys", d.RevokedAPIKeys,
			"revoked_sessions", d.RevokedSessions, "request_id", requestID(ctx))
		s.audit(r, store.Event{Event: "user.deprovisioned", ActorKind: store.ActorKindProvider, ActorName: gr.issuer,
			TargetID: d.UserID, Detail: fmt.Sprintf("was admin: %v; revoked %d API keys, %d sessions",
				d.WasAdmin, d.RevokedAPIKeys, d.RevokedSessions)})
	}
	return nil
}
