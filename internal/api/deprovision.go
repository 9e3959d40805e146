package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/terdut-server/terdut-server/internal/store"
)

// groupRefusal is errGroupNotAllowed for a person the provider has just vouched for: the
// callback disarms whatever that person holds here (see disarmRefused).
type groupRefusal struct {
	issuer, subject string
}

func (e *groupRefusal) Error() string { return errGroupNotAllowed.Error() }
func (e *groupRefusal) Unwrap() error { return errGroupNotAllowed }

// disarmRefused acts on a refused sign-in: when the provider vouched for the person but their
// groups no longer admit them, it revokes their sessions and API keys and drops them to member
// (store.DeprovisionSSOUser), and says so in the log. It returns an error only when that
// failed; any other refusal, or a person who never signed in here, needs nothing. A client
// that goes away must not stop the revocation half-way: it runs to the end regardless.
func (s *server) disarmRefused(r *http.Request, refusal error) error {
	ctx := context.WithoutCancel(r.Context())
	var gr *groupRefusal
	if !errors.As(refusal, &gr) {
		return nil
	}
	d, err := s.store.DeprovisionSSOUser(ctx, gr.issuer, gr.subject)
	if errors.Is(err, store.ErrNotFound) {
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
