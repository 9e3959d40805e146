package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// Deprovisioned is what DeprovisionSSOUser took from a person.
type Deprovisioned struct {
	UserID          int64
	WasAdmin        bool
	RevokedAPIKeys  int64
	RevokedSessions int64
}

// DeprovisionSSOUser disarms the person with this (issuer, subject) whom the provider no
// longer admits: in one transaction their role drops to member and every session and API key
// of theirs is revoked. Their account and data stay; a later admitted sign-in restores the
// role the provider's groups give. ErrNotFound when no such person has ever signed in.
// The person's row is locked before anything is revoked (see lockUser): a key being created
// for them meanwhile is revoked with the rest, and one asked for later with a credential of
// theirs is refused.
func (s *Store) DeprovisionSSOUser(ctx context.Context, issuer, subject, missingGroupsClaim string) (Deprovisioned, error) {
	var d Deprovisioned
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `
			WITH old AS (
				SELECT id, role FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2
					AND ($3 = '' OR oidc_groups_claim = $3)
				FOR UPDATE
			)
			UPDATE users u SET role = 'member' FROM old WHERE u.id = old.id
			RETURNING u.id, old.role = 'admin'`, issuer, subject, missingGroupsClaim).Scan(&d.UserID, &d.WasAdmin)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return wrap(err, "demote SSO user")
		}
		if d.RevokedAPIKeys, err = revokeUserKeys(ctx, tx, d.UserID); err != nil {
			return err
		}
		d.RevokedSessions, err = revokeUserSessions(ctx, tx, d.UserID)
		return err
	})
	if err != nil {
		return Deprovisioned{}, err
	}
	return d, nil
}
