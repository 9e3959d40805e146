package store

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// IntegrationKeyPrefix starts every integration key, so that a secret scanner tells one from a
// person's API key (64 hexadecimal characters, no prefix) and a key pasted in the wrong place
// is refused by its shape.
const IntegrationKeyPrefix = "terdut_am_"

// MaxLiveIntegrationKeys is how many live keys an integration may hold: two, for a rotation with
// no gap (add the new key, move Alertmanager to it, revoke the old one).
const MaxLiveIntegrationKeys = 2

// DefaultExpireAfter is how long a firing alert an integration stops re-sending stays firing:
// longer than Alertmanager's default repeat_interval (4h) and group_interval (5m) together.
const DefaultExpireAfter = 4*time.Hour + 30*time.Minute

// ErrTooManyIntegrationKeys means the integration holds MaxLiveIntegrationKeys live keys already.
var ErrTooManyIntegrationKeys = errors.New("the integration has two live keys already")

// Integration is one sender of Alertmanager's webhooks, and the namespace of its alerts.
type Integration struct {
	ID             int64
	Name           string
	ExpireAfter    time.Duration
	CreatedAt      time.Time
	LastDeliveryAt *time.Time
	LastError      string
	LastErrorAt    *time.Time
	Keys           []IntegrationKey
}

// IntegrationKey is a key of an integration as it may be shown: never its secret.
type IntegrationKey struct {
	ID         int64
	Hint       string // the secret's last four characters
	CreatedAt  time.Time
	LastUsedAt *time.Time
}

// NewIntegration is what CreateIntegration needs.
type NewIntegration struct {
	Name        string
	ExpireAfter time.Duration // 0: DefaultExpireAfter
	CreatedBy   int64
}

// newIntegrationSecret returns a fresh key: the prefix and 32 random bytes in hexadecimal.
func newIntegrationSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return IntegrationKeyPrefix + hex.EncodeToString(b)
}

// CreateIntegration creates an integration and its first key, returned once with its secret.
// A live integration of the same name is ErrConflict.
func (s *Store) CreateIntegration(ctx context.Context, ni NewIntegration) (Integration, string, error) {
	if ni.ExpireAfter <= 0 {
		ni.ExpireAfter = DefaultExpireAfter
	}
	var in Integration
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `INSERT INTO integrations (name, expire_after, created_by)
			VALUES ($1, $2::interval, $3) RETURNING id, name, created_at`,
			ni.Name, ni.ExpireAfter.String(), nullID(ni.CreatedBy)).Scan(&in.ID, &in.Name, &in.CreatedAt)
		if isUniqueViolation(err, "integrations_live_name_key") {
			return ErrConflict
		}
		if err != nil {
			return wrap(err, "create integration")
		}
		in.ExpireAfter = ni.ExpireAfter
		k, sec, err := addIntegrationKey(ctx, tx, in.ID, ni.CreatedBy)
		if err != nil {
			return err
		}
		in.Keys, secret = []IntegrationKey{k}, sec
		return nil
	})
	return in, secret, err
}

// AddIntegrationKey adds a key to a live integration and returns it with its secret, shown
// once; ErrNotFound for no such integration, ErrTooManyIntegrationKeys past two live keys.
func (s *Store) AddIntegrationKey(ctx context.Context, integrationID, by int64) (IntegrationKey, string, error) {
	var k IntegrationKey
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The integration's row, locked, orders concurrent additions: the count below sees
		// every key added before this one.
		var live int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM integration_keys
				WHERE integration_id = i.id AND revoked_at IS NULL)
			FROM integrations i WHERE i.id = $1 AND i.deleted_at IS NULL FOR NO KEY UPDATE`, integrationID).Scan(&live)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return wrap(err, "read integration")
		}
		if live >= MaxLiveIntegrationKeys {
			return ErrTooManyIntegrationKeys
		}
		k, secret, err = addIntegrationKey(ctx, tx, integrationID, by)
		return err
	})
	return k, secret, err
}

func addIntegrationKey(ctx context.Context, tx pgx.Tx, integrationID, by int64) (IntegrationKey, string, error) {
	secret := newIntegrationSecret()
	k := IntegrationKey{Hint: secret[len(secret)-4:]}
	err := tx.QueryRow(ctx, `INSERT INTO integration_keys (integration_id, key_hash, hint, created_by)
		VALUES ($1, $2, $3, $4) RETURNING id, created_at`,
		integrationID, hashToken(secret), k.Hint, nullID(by)).Scan(&k.ID, &k.CreatedAt)
	return k, secret, wrap(err, "add integration key")
}

// RevokeIntegrationKey revokes a live key of a live integration; ErrNotFound when there is
// none such.
func (s *Store) RevokeIntegrationKey(ctx context.Context, integrationID, keyID int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE integration_keys k SET revoked_at = now()
		FROM integrations i WHERE k.id = $2 AND k.integration_id = $1 AND k.revoked_at IS NULL
			AND i.id = k.integration_id AND i.deleted_at IS NULL`, integrationID, keyID)
	if err != nil {
		return wrap(err, "revoke integration key")
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteIntegration deletes a live integration: its keys are revoked and it takes no more
// deliveries; its alerts and incidents stay. ErrNotFound when there is none such.
func (s *Store) DeleteIntegration(ctx context.Context, id int64) (string, error) {
	var name string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE integrations SET deleted_at = now()
			WHERE id = $1 AND deleted_at IS NULL RETURNING name`, id).Scan(&name)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return wrap(err, "delete integration")
		}
		_, err = tx.Exec(ctx, `UPDATE integration_keys SET revoked_at = now()
			WHERE integration_id = $1 AND revoked_at IS NULL`, id)
		return wrap(err, "revoke integration keys")
	})
	return name, err
}

// Integrations returns every live integration with its live keys, in order of creation.
func (s *Store) Integrations(ctx context.Context) ([]Integration, error) {
	rows, err := s.pool.Query(ctx, `SELECT i.id, i.name, pg_catalog.date_part('epoch', i.expire_after)::bigint,
			i.created_at, i.last_delivery_at, coalesce(i.last_error, ''), i.last_error_at,
			k.id, coalesce(k.hint, ''), k.created_at, k.last_used_at
		FROM integrations i
		LEFT JOIN integration_keys k ON k.integration_id = i.id AND k.revoked_at IS NULL
		WHERE i.deleted_at IS NULL ORDER BY i.id, k.id`)
	if err != nil {
		return nil, wrap(err, "read integrations")
	}
	defer rows.Close()
	out := []Integration{}
	for rows.Next() {
		var in Integration
		var seconds int64
		var keyID *int64
		var k IntegrationKey
		var keyCreated *time.Time
		if err := rows.Scan(&in.ID, &in.Name, &seconds, &in.CreatedAt, &in.LastDeliveryAt, &in.LastError,
			&in.LastErrorAt, &keyID, &k.Hint, &keyCreated, &k.LastUsedAt); err != nil {
			return nil, wrap(err, "read integrations")
		}
		if len(out) == 0 || out[len(out)-1].ID != in.ID {
			in.ExpireAfter = time.Duration(seconds) * time.Second
			in.Keys = []IntegrationKey{}
			out = append(out, in)
		}
		if keyID != nil {
			k.ID, k.CreatedAt = *keyID, *keyCreated
			last := &out[len(out)-1]
			last.Keys = append(last.Keys, k)
		}
	}
	return out, wrap(rows.Err(), "read integrations")
}

// IntegrationCaller is the integration a webhook's key stands for.
type IntegrationCaller struct {
	IntegrationID int64
	KeyID         int64
	Name          string
	ExpireAfter   time.Duration
	// touchedRecently says the integration's last delivery and the key's last use were
	// recorded within the last second, when the key was authenticated.
	touchedRecently bool
}

// IsIntegrationKey reports whether secret is shaped as an integration's key (live or not).
func IsIntegrationKey(secret string) bool {
	return strings.HasPrefix(secret, IntegrationKeyPrefix) && len(secret) == len(IntegrationKeyPrefix)+64
}

// AuthenticateIntegration returns the live integration whose live key secret is, or ErrNotFound
// (also for anything not shaped as an integration key, such as a person's API key).
func (s *Store) AuthenticateIntegration(ctx context.Context, secret string) (IntegrationCaller, error) {
	c, _, _, err := s.AuthenticateDelivery(ctx, secret, nil)
	return c, err
}

// AuthenticateDelivery is AuthenticateIntegration for a webhook's delivery whose body, read
// already, has the SHA-256 sum (nil: not read): in the same round trip, it reports as
// ReplayedBody does whether that body is its group's last notification, applied just before,
// byte for byte, and then records the delivery and returns how many alerts the body held.
func (s *Store) AuthenticateDelivery(ctx context.Context, secret string, sum []byte) (c IntegrationCaller, alerts int, replay bool, err error) {
	if !IsIntegrationKey(secret) {
		return c, 0, false, ErrNotFound
	}
	var seconds int64
	var bodyAlerts *int
	query, args := authenticateIntegrationSQL, []any{hashToken(secret)}
	if sum != nil {
		query, args = authenticateDeliverySQL, append(args, sum)
	}
	err = s.pool.QueryRow(ctx, query, args...).Scan(&c.IntegrationID, &c.KeyID, &c.Name, &seconds, &c.touchedRecently, &bodyAlerts)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, 0, false, ErrNotFound
	}
	if err != nil {
		return c, 0, false, wrap(err, "authenticate integration")
	}
	c.ExpireAfter = time.Duration(seconds) * time.Second
	if bodyAlerts == nil {
		return c, 0, false, nil
	}
	return c, *bodyAlerts, true, s.recordReplay(ctx, c)
}

// authenticateIntegrationSQL finds the live integration of the live key whose hash is $1, and
// whether both recorded a delivery within the second; authenticateDeliverySQL adds the count
// of alerts of the body whose SHA-256 is $2 if it is a replay (replayedBodySQL), else NULL.
var (
	authenticateIntegrationSQL = authenticateSQL("NULL::integer")
	authenticateDeliverySQL    = authenticateSQL("(" + replayedBodyOf("i.id") + ")")
)

func authenticateSQL(replay string) string {
	return `SELECT i.id, k.id, i.name, pg_catalog.date_part('epoch', i.expire_after)::bigint,
			coalesce(i.last_delivery_at >= now() - interval '1 second' AND k.last_used_at >= now() - interval '1 second', false),
			` + replay + `
		FROM integration_keys k JOIN integrations i ON i.id = k.integration_id
		WHERE k.key_hash = $1 AND k.revoked_at IS NULL AND i.deleted_at IS NULL`
}

// RecordIntegrationError keeps the last refusal of a delivery that carried a live key (a bad
// body, one too large), so that "is Alertmanager sending?" is answered by GET /api/integrations.
// msg is cut to 512 bytes; it must hold no caller input beyond what the API chose to show.
func (s *Store) RecordIntegrationError(ctx context.Context, integrationID int64, msg string) error {
	_, err := s.pool.Exec(ctx, `UPDATE integrations SET last_error = $2, last_error_at = now() WHERE id = $1`,
		integrationID, clip(msg, 512))
	return wrap(err, "record integration error")
}

// RevokeIntegrationKeysBy revokes every live integration key the user created: a reset of the
// claim revokes what its principal created, as it revokes its API keys. It returns how many.
func revokeIntegrationKeysBy(ctx context.Context, tx pgx.Tx, userID int64) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE integration_keys SET revoked_at = now()
		WHERE created_by = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return 0, fmt.Errorf("revoke integration keys: %w", err)
	}
	return tag.RowsAffected(), nil
}
