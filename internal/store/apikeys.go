package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// lastUsedStale says, in SQL, that a key's last_used_at is due for a refresh: never set, or
// older than 30 seconds. Authenticating with a key writes it at most once per 30 seconds, so
// a busy key costs one read per request, not a write. The period is written into the
// statements rather than sent with each one.
const lastUsedStale = `(last_used_at IS NULL OR ` + lastUsedOld + `)`

// lastUsedOld is lastUsedStale's test of a key that has been used: NULL for one never used.
const lastUsedOld = `last_used_at < now() - interval '30 seconds'`

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
		k, secret, err = insertAPIKey(ctx, tx, userID, name, nil)
		return err
	})
	return k, secret, err
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

// AuthenticateAPIKey returns the owner of a live (neither revoked nor expired) key, or ErrNotFound. Every call reads the
// key and its owner from the database, so a revoked key, a deleted person or a changed role
// takes effect at once on every replica. The read writes nothing: last_used_at is refreshed
// by a second statement only when it is stale (lastUsedStale), so a key in steady
// use costs one read-only round trip per request and one write per period.
func (s *Store) AuthenticateAPIKey(ctx context.Context, secret string) (User, error) {
	row := apiKeyRows.Get().(*apiKeyRow)
	defer row.release()
	hash := row.hashOf(secret)
	u := &row.u
	lookup, err := s.apiKeyLookup(ctx)
	if err != nil {
		return User{}, err
	}
	err = s.pool.QueryRow(ctx, lookup, hash).Scan(&row.used, &u.ID, &u.Username, &u.Email,
		&row.role, &row.kind, &row.issuer, &row.subject, &u.HasPassword, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	if err != nil {
		return User{}, wrap(err, "authenticate API key")
	}
	u.Role, u.Kind = Role(row.role), Kind(row.kind)
	u.OIDCIssuer, u.OIDCSubject = row.issuer.String, row.subject.String
	if !row.used.Valid || row.used.Bool { // lastUsedStale: never used, or lastUsedOld
		// The condition is on the row itself, so that when requests on several replicas
		// find the key stale at once, the first write makes the others no-ops (each waits
		// for the first and re-checks the row).
		if _, err := s.pool.Exec(ctx, `UPDATE api_keys SET last_used_at = now()
			WHERE key_hash = $1 AND `+lastUsedStale, hash); err != nil {
			return User{}, wrap(err, "record API key use")
		}
	}
	return *u, nil
}

// apiKeyRow is what AuthenticateAPIKey needs on the heap: the key's hash, sent as the
// statement's argument, and every scan target (pgx takes them as interfaces, so each would
// be an allocation of its own), in plain types: Role and Kind would make pgx convert by
// reflection. They are kept in a pool, as they were about 500 of the 5,000 bytes an API-key
// request allocated (bench/README.md); pgx keeps none of them once the statement is done.
type apiKeyRow struct {
	secret          [64]byte // the secret, copied to be hashed: []byte(secret) would allocate
	hash            [sha256.Size]byte
	u               User
	role, kind      string
	used            pgtype.Bool
	issuer, subject pgtype.Text
}

var apiKeyRows = sync.Pool{New: func() any { return new(apiKeyRow) }}

// hashOf returns hashToken(secret): in the row when the secret fits in row.secret (every key
// the server makes does), else in a slice of its own.
func (row *apiKeyRow) hashOf(secret string) []byte {
	if len(secret) > len(row.secret) {
		return hashToken(secret)
	}
	n := copy(row.secret[:], secret)
	row.hash = sha256.Sum256(row.secret[:n])
	return row.hash[:]
}

// release clears the row, so that the pool holds neither a secret nor a person, and gives
// it back.
func (row *apiKeyRow) release() {
	row.clear()
	apiKeyRows.Put(row)
}

func (row *apiKeyRow) clear() { *row = apiKeyRow{} }

// authenticateAPIKeySQL finds a live key by the unique index on key_hash and joins its owner
// by primary key. Its WHERE clause says which keys are live; the first column says, by the
// database's clock, whether last_used_at is due for a refresh (NULL: never used). It is the
// statement every API-key request makes, so it asks Postgres for no more than it must: the
// user's columns as stored (NULL for no OIDC identity) rather than through coalesce, and
// lastUsedStale's test without its IS NULL, which the NULL answers; together these took
// about 1.5 us of Postgres CPU per request (bench/README.md).
const authenticateAPIKeySQL = `SELECT ` + lastUsedOld + `,
	u.id, u.username, u.email, u.role, u.kind, u.oidc_issuer, u.oidc_subject,
	u.password_hash IS NOT NULL, u.created_at
	FROM api_keys k JOIN users u ON u.id = k.user_id
	WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > now())`

// apiKeyOwnerCall is authenticateAPIKeySQL as a call of the function api_key_owner
// (migrations/00018_api_key_owner.sql), which answers the same columns from the same query;
// %s is the schema the server's objects are in, quoted (Store.apiKeyLookup). Both the name and
// the argument are pinned: where the lookup goes as a call, its argument reaches Postgres
// untyped (simple_protocol and exec send it as text; cache_describe asks Postgres its type),
// and Postgres prefers a text-typed overload for an untyped argument, so without the cast
// another role's api_key_owner(text) in the same schema would be called instead, with the
// server's rights and answering for any key; without the schema, one in a schema earlier in
// the search_path. The function's own search_path is pinned too (00019).
const apiKeyOwnerCall = `SELECT * FROM %s.api_key_owner($1::bytea)`

// apiKeyStatement says whether the API-key lookup goes as a call of api_key_owner in the
// statement mode pgx runs in. With pgx's default, the lookup is prepared once per connection
// and runs from its cached plan. In every other mode (behind a transaction-mode pooler above
// all) it would be parsed and planned on every request; the function's plan is kept by the
// server connection instead, which doubled the lookups Postgres answers a second behind
// PgBouncer (docs/pooler.md#figures). Directly, the prepared statement is the cheaper: the
// function adds a call to a plan already cached.
func apiKeyStatement(mode pgx.QueryExecMode) (callsFunction bool) {
	return mode != pgx.QueryExecModeCacheStatement
}

// apiKeyLookup returns AuthenticateAPIKey's statement: authenticateAPIKeySQL where pgx prepares
// and caches statements, else the call of api_key_owner in the schema the server's objects
// are in, current_schema(), read once per Store (a failed read is tried again by the next call).
func (s *Store) apiKeyLookup(ctx context.Context) (string, error) {
	if !s.apiKeyCalls {
		return authenticateAPIKeySQL, nil
	}
	if sql := s.apiKeyCall.Load(); sql != nil {
		return *sql, nil
	}
	var schema *string
	if err := s.pool.QueryRow(ctx, `SELECT pg_catalog.current_schema()`).Scan(&schema); err != nil {
		return "", wrap(err, "find the server's schema")
	}
	if schema == nil {
		return "", fmt.Errorf("find the server's schema: no schema of the search_path exists")
	}
	sql := fmt.Sprintf(apiKeyOwnerCall, pgx.Identifier{*schema}.Sanitize())
	s.apiKeyCall.Store(&sql)
	return sql, nil
}

// lockUser takes the user's row FOR UPDATE, before revokeUserKeys: a key create for the user
// in progress (IssueAPIKey holds the row FOR NO KEY UPDATE) commits first, and revokeUserKeys,
// a statement after this one, then sees its key; a create that comes later waits for this
// transaction and finds the credential it came with revoked. One UPDATE alone would miss the
// keys committed while it ran. A user who is gone is no error: there is nothing to revoke.
func lockUser(ctx context.Context, tx pgx.Tx, userID int64) error {
	_, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, userID)
	return wrap(err, "lock user")
}

// revokeUserKeys revokes every live key of the user and returns how many it revoked. Callers
// lock the user's row first (lockUser, or an UPDATE of the row in an earlier statement).
func revokeUserKeys(ctx context.Context, tx pgx.Tx, userID int64) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE api_keys SET revoked_at = now()
		WHERE user_id = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return 0, wrap(err, "revoke API keys")
	}
	return tag.RowsAffected(), nil
}
