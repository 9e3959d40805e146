package store

import (
	"context"
	"fmt"
	"strings"
)

// RenameSSOUser gives the user with this id and OIDC identity (issuer, subject) a new username,
// when the provider reports another one for them. It never takes another user's name: it
// returns ErrConflict when the name, in any spelling of case, belongs to someone else or is
// the bootstrap principal's, and ErrNotFound when no user has this id and identity.
func (s *Store) RenameSSOUser(ctx context.Context, id int64, issuer, subject, username string) (User, error) {
	if strings.EqualFold(username, PrincipalUsername) {
		return User{}, fmt.Errorf("username %q is reserved for the bootstrap principal: %w", username, ErrConflict)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `UPDATE users u SET username = $4
		WHERE u.id = $1 AND u.oidc_issuer = $2 AND u.oidc_subject = $3 RETURNING `+userColumns,
		id, issuer, subject, username))
	if isUniqueViolation(err, "users_username_key") || isUniqueViolation(err, "users_username_lower_key") {
		return User{}, fmt.Errorf("username %q: %w", username, ErrConflict)
	}
	return u, wrap(err, "rename SSO user")
}
