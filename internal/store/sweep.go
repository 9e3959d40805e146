package store

import (
	"context"
	"time"
)

// sweepBatch bounds the rows one statement of Sweep deletes, so that no sweep holds many
// row locks or a long transaction.
const sweepBatch = 5000

// ExpiredKeyRetention is how long an expired API key stays listed to its owner, who can
// see why it stopped working, before Sweep deletes it. A revoked key goes at once.
const ExpiredKeyRetention = 7 * 24 * time.Hour

// SweepResult counts the rows a Sweep deleted, by table.
type SweepResult struct {
	Sessions   int64 // revoked or expired
	APIKeys    int64 // revoked, or expired for longer than ExpiredKeyRetention
	OIDCLogins int64 // sign-ins never finished, past their expiry
	// LoginAttempts are the password-guessing counts of usernames nobody tried within the
	// window given to Sweep: every check they hold is older than the window.
	LoginAttempts int64
	PasswordLinks int64 // set-password links past their expiry
}

// sweepStatement is one batched DELETE of Sweep: its first parameter is the batch size, args
// the rest.
type sweepStatement struct {
	sql  string
	args []any
}

// Sweep's statements for sessions, API keys and set-password links. Revoked and expired rows
// go in statements of their own, each served by its index (migration 00017) in that index's
// order, and deleted where they are (by ctid: a TID scan, no descent of the primary key for
// each row; the subquery's FOR UPDATE holds each row, so its ctid cannot change before the
// DELETE): a round reads what it deletes, never the whole table, and no statement deletes
// more than sweepBatch rows.
var (
	sweepSessions = []sweepStatement{
		{sql: `DELETE FROM sessions WHERE ctid = ANY(ARRAY(SELECT ctid FROM sessions WHERE revoked_at IS NOT NULL
			ORDER BY revoked_at LIMIT $1 FOR UPDATE SKIP LOCKED))`},
		{sql: `DELETE FROM sessions WHERE ctid = ANY(ARRAY(SELECT ctid FROM sessions WHERE expires_at <= now()
			ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))`},
	}
	sweepAPIKeys = []sweepStatement{
		{sql: `DELETE FROM api_keys WHERE ctid = ANY(ARRAY(SELECT ctid FROM api_keys WHERE revoked_at IS NOT NULL
			ORDER BY revoked_at LIMIT $1 FOR UPDATE SKIP LOCKED))`},
		{sql: `DELETE FROM api_keys WHERE ctid = ANY(ARRAY(SELECT ctid FROM api_keys
			WHERE expires_at <= now() - $2::interval ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))`,
			args: []any{ExpiredKeyRetention}},
	}
	sweepPasswordLinks = sweepStatement{sql: `DELETE FROM password_links WHERE user_id = ANY(ARRAY(
		SELECT user_id FROM password_links WHERE expires_at <= now()
		ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED))`}
)

// Sweep deletes the rows that can never be used again: revoked and expired sessions, revoked
// keys and keys long expired, sign-ins that were never finished, expired set-password links
// (a redemption that finds its link gone answers as for an expired one), and the guessing counts of
// usernames nobody tried within loginWindow (the window of the password sign-in limit). Replicas may sweep at the
// same time: each skips the rows another is deleting, so none waits and none fails.
func (s *Store) Sweep(ctx context.Context, loginWindow time.Duration) (SweepResult, error) {
	var res SweepResult
	var err error
	for _, st := range sweepSessions {
		n, err := s.sweep(ctx, st.sql, st.args...)
		res.Sessions += n
		if err != nil {
			return res, wrap(err, "sweep sessions")
		}
	}
	for _, st := range sweepAPIKeys {
		n, err := s.sweep(ctx, st.sql, st.args...)
		res.APIKeys += n
		if err != nil {
			return res, wrap(err, "sweep API keys")
		}
	}
	if res.OIDCLogins, err = s.sweep(ctx, `DELETE FROM oidc_logins WHERE state_hash IN (
		SELECT state_hash FROM oidc_logins WHERE expires_at <= now()
		LIMIT $1 FOR UPDATE SKIP LOCKED)`); err != nil {
		return res, wrap(err, "sweep sign-ins")
	}
	if res.LoginAttempts, err = s.sweep(ctx, `DELETE FROM login_attempts WHERE key IN (
		SELECT key FROM login_attempts WHERE touched_at < now() - $2::interval
		LIMIT $1 FOR UPDATE SKIP LOCKED)`, loginWindow); err != nil {
		return res, wrap(err, "sweep sign-in attempts")
	}
	if res.PasswordLinks, err = s.sweep(ctx, sweepPasswordLinks.sql); err != nil {
		return res, wrap(err, "sweep set-password links")
	}
	return res, nil
}

// sweep runs a batched delete (its first argument is the batch size) until a batch comes up
// short, and returns how many rows it deleted in all.
func (s *Store) sweep(ctx context.Context, query string, args ...any) (int64, error) {
	var total int64
	for {
		tag, err := s.pool.Exec(ctx, query, append([]any{sweepBatch}, args...)...)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < sweepBatch {
			return total, nil
		}
	}
}

// CapSSOAPIKeys brings the live keys of single sign-on people within maxTTL of their last
// single sign-on: a key without an expiry, or with a later one, gets that sign-in + maxTTL
// (already past for a person who has not signed in for that long). It applies the cap to keys
// issued before it existed or while it was longer, and returns how many keys it changed. A
// key it has capped is not changed again until the cap shrinks.
func (s *Store) CapSSOAPIKeys(ctx context.Context, maxTTL time.Duration) (int64, error) {
	// A person whom a replica older than the record of sign-ins created has none: their
	// creation was their last single sign-on, as in IssueAPIKey.
	tag, err := s.pool.Exec(ctx, `UPDATE api_keys k SET expires_at = cap.at
		FROM users u, LATERAL (SELECT coalesce(u.last_sso_at, u.created_at) + $1::interval AS at) cap
		WHERE u.id = k.user_id AND u.oidc_issuer IS NOT NULL AND k.revoked_at IS NULL
			AND (k.expires_at IS NULL OR k.expires_at > cap.at)`, maxTTL)
	if err != nil {
		return 0, wrap(err, "cap SSO API keys")
	}
	return tag.RowsAffected(), nil
}
