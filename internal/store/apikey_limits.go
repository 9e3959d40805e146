package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	// ErrTooManyAPIKeys means the user already holds APIKeyLimits.PerUser live keys.
	ErrTooManyAPIKeys = errors.New("too many API keys")
	// ErrExpiryTooLate means the key would outlive APIKeyLimits.SSOMaxTTL.
	ErrExpiryTooLate = errors.New("API key expiry beyond the limit")
)

// NewAPIKey is a key asked for: whose, its name, and when it expires (nil: never, unless
// APIKeyLimits.SSOMaxTTL applies).
type NewAPIKey struct {
	UserID    int64
	Name      string
	ExpiresAt *time.Time
}

// APIKeyLimits bound the keys a user may hold. A zero field bounds nothing.
type APIKeyLimits struct {
	// PerUser is how many live keys (neither revoked nor expired) one user may hold.
	PerUser int
	// SSOMaxTTL is how long a key of a person who signs in through single sign-on may live,
	// so that a person the provider stops admitting loses their keys within it even if they
	// never sign in again. Such a key without an expiry gets this one.
	SSOMaxTTL time.Duration
}

// IssueAPIKey issues a key within lim and returns it with its secret, shown once. It returns
// ErrNotFound when the user does not exist, ErrTooManyAPIKeys when they hold lim.PerUser live
// keys, and ErrExpiryTooLate when the key of a single sign-on person would expire later than
// lim.SSOMaxTTL from now. The limits hold across replicas: creates for one user are
// serialized on the user's row.
func (s *Store) IssueAPIKey(ctx context.Context, nk NewAPIKey, lim APIKeyLimits) (APIKey, string, error) {
	var k APIKey
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// FOR NO KEY UPDATE makes a concurrent create for the same user wait until this one
		// commits; unlike FOR UPDATE it does not hold up the foreign-key checks of sign-ins
		// inserting the user's sessions. The count is a statement of its own, after the lock:
		// its snapshot then sees every key that the creates this one waited for committed.
		var sso bool
		var live int
		var latest time.Time
		found := true
		batch := &pgx.Batch{}
		batch.Queue(`SELECT oidc_issuer IS NOT NULL, now() + $2::interval FROM users WHERE id = $1 FOR NO KEY UPDATE`,
			nk.UserID, lim.SSOMaxTTL).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&sso, &latest)
			if errors.Is(err, pgx.ErrNoRows) {
				found = false
				return nil
			}
			return err
		})
		batch.Queue(`SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, nk.UserID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&live)
		})
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return wrap(err, "count API keys")
		}
		if !found {
			return ErrNotFound
		}
		if lim.PerUser > 0 && live >= lim.PerUser {
			return ErrTooManyAPIKeys
		}
		expires := nk.ExpiresAt
		if sso && lim.SSOMaxTTL > 0 {
			switch {
			case expires == nil:
				expires = &latest
			case expires.After(latest):
				return ErrExpiryTooLate
			}
		}
		var err error
		k, secret, err = insertAPIKey(ctx, tx, nk.UserID, nk.Name, expires)
		return err
	})
	return k, secret, err
}
