package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// lastUsedResolution is how stale last_used_at may be: authenticating with a key writes
// it at most once per this period, so a busy key costs one read per request, not a write.
const lastUsedResolution = 30 * time.Second

// APIKey describes a key without its secret, which exists only at creation.
type APIKey struct {
	ID         int64
	UserID     int64
	Name       string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time // nil: the key never expires
}

const apiKeyColumns = `k.id, k.user_id, k.name, k.created_at, k.last_used_at, k.expires_at`

func scanAPIKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	err := row.Scan(&k.ID, &k.UserID, &k.Name, &k.CreatedAt, &k.LastUsedAt, &k.ExpiresAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return APIKey{}, ErrNotFound
	}
	return k, err
}

// CreateAPIKey issues a key for the user, without expiry and outside APIKeyLimits, and
// returns it with its secret, which is shown once: only its hash is stored. ErrNotFound when
// the user does not exist. Keys asked for over the API go through IssueAPIKey.
func (s *Store) CreateAPIKey(ctx context.Context, userID int64, name string) (APIKey, string, error) {
	var k APIKey
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		k, secret, err = createAPIKey(ctx, tx, userID, name)
		return err
	})
	return k, secret, err
}

func createAPIKey(ctx context.Context, tx pgx.Tx, userID int64, name string) (APIKey, string, error) {
	return insertAPIKey(ctx, tx, userID, name, nil)
}

// insertAPIKey issues a key that expires at expires (nil: never).
func insertAPIKey(ctx context.Context, tx pgx.Tx, userID int64, name string, expires *time.Time) (APIKey, string, error) {
	secret := newSecret()
	k, err := scanAPIKey(tx.QueryRow(ctx, `
		INSERT INTO api_keys AS k (user_id, name, key_hash, expires_at)
		SELECT id, $2, $3, $4 FROM users WHERE id = $1
		RETURNING `+apiKeyColumns, userID, name, hashToken(secret), expires))
	if err != nil {
		return APIKey{}, "", wrap(err, "create API key")
	}
	return k, secret, nil
}

// APIKeys lists the user's keys that are not revoked, oldest first, expired ones included
// (until Sweep removes them) so that their owner can see why they stopped working.
func (s *Store) APIKeys(ctx context.Context, userID int64) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+apiKeyColumns+` FROM api_keys k
		WHERE k.user_id = $1 AND k.revoked_at IS NULL ORDER BY k.id`, userID)
	if err != nil {
		return nil, wrap(err, "list API keys")
	}
	keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (APIKey, error) { return scanAPIKey(r) })
	return keys, wrap(err, "list API keys")
}

// RevokeAPIKey stops the user's key from working. ErrNotFound when the user has no such live key.
func (s *Store) RevokeAPIKey(ctx context.Context, userID, keyID int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now()
		WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL`, keyID, userID)
	if err != nil {
		return wrap(err, "revoke API key")
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("API key %d: %w", keyID, ErrNotFound)
	}
	return nil
}

// AuthenticateAPIKey returns the owner of a live (neither revoked nor expired) key, or ErrNotFound. It is one round trip:
// last_used_at is refreshed in the same statement, and only when it is older than
// lastUsedResolution, so steady use of a key does not write on every request.
func (s *Store) AuthenticateAPIKey(ctx context.Context, secret string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `
		WITH k AS (
			SELECT id, user_id, last_used_at FROM api_keys
			WHERE key_hash = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		), touch AS (
			UPDATE api_keys SET last_used_at = now() FROM k
			WHERE api_keys.id = k.id AND (k.last_used_at IS NULL OR k.last_used_at < now() - $2::interval)
		)
		SELECT `+userColumns+` FROM k JOIN users u ON u.id = k.user_id`,
		hashToken(secret), lastUsedResolution))
	return u, wrap(err, "authenticate API key")
}

// revokeUserKeys revokes every live key of the user and returns how many it revoked.
func revokeUserKeys(ctx context.Context, tx pgx.Tx, userID int64) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now()
		WHERE user_id = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return 0, wrap(err, "revoke API keys")
	}
	return tag.RowsAffected(), nil
}
