package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RateLimit bounds how many resets (or failed password checks) may happen in a sliding
// window, across every replica: resets are counted from the audit table under the claim
// row's lock, password checks in login_attempts.
type RateLimit struct {
	Max    int
	Window time.Duration
	// Lease, for password checks only, is how long a reserved check counts against Max before
	// its outcome is written (see Attempt); zero: DefaultCheckLease.
	Lease time.Duration
}

// DefaultCheckLease is the Lease of a password check when its RateLimit names none.
const DefaultCheckLease = time.Minute

// RateLimitedError is returned when a reset or a password check would exceed its RateLimit.
type RateLimitedError struct {
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return fmt.Sprintf("rate limited; retry in %s", e.RetryAfter.Round(time.Second))
}

// ResetResult is what a reset did.
type ResetResult struct {
	Generation      int64
	RevokedAPIKeys  int64
	RevokedSessions int64
	// RevokedIntegrationKeys are the live integration keys the principal had created.
	RevokedIntegrationKeys int64
}

// Reset reopens the claim: it revokes the bootstrap principal's keys, sessions and the
// integration keys it created, and sets the
// state to pending, in one transaction with its audit row. No other user, and nothing of
// theirs, is changed. Resetting a pending install succeeds and revokes nothing.
// With a non-zero limit it returns *RateLimitedError past limit.Max resets in limit.Window.
func (s *Store) Reset(ctx context.Context, who AuditInfo, limit RateLimit) (ResetResult, error) {
	var res ResetResult
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		b, err := lockBootstrap(ctx, tx)
		if err != nil {
			return err
		}
		if err := checkResetLimit(ctx, tx, limit); err != nil {
			return err
		}
		res.Generation = b.Generation
		if b.PrincipalID != nil {
			if err := lockUser(ctx, tx, *b.PrincipalID); err != nil {
				return err
			}
			if res.RevokedAPIKeys, err = revokeUserKeys(ctx, tx, *b.PrincipalID); err != nil {
				return err
			}
			if res.RevokedSessions, err = revokeUserSessions(ctx, tx, *b.PrincipalID); err != nil {
				return err
			}
			if res.RevokedIntegrationKeys, err = revokeIntegrationKeysBy(ctx, tx, *b.PrincipalID); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, `UPDATE bootstrap_state SET state = 'pending', last_reset_at = now()`)
		if err != nil {
			return wrap(err, "mark pending")
		}
		detail := fmt.Sprintf("was %s; revoked %d API keys, %d sessions", b.State, res.RevokedAPIKeys, res.RevokedSessions)
		if res.RevokedIntegrationKeys > 0 {
			detail += fmt.Sprintf(", %d integration keys", res.RevokedIntegrationKeys)
		}
		return appendAudit(ctx, tx, "reset", who, b.Generation, StatePending, detail)
	})
	if err != nil {
		return ResetResult{}, err
	}
	return res, nil
}

func checkResetLimit(ctx context.Context, tx pgx.Tx, limit RateLimit) error {
	if limit.Max <= 0 {
		return nil
	}
	var n int
	var retry time.Duration
	err := tx.QueryRow(ctx, `
		SELECT count(*), coalesce(min(at) + $1::interval - now(), '0'::interval)
		FROM (SELECT at FROM bootstrap_audit
		      WHERE action = 'reset' AND at > now() - $1::interval
		      ORDER BY at DESC LIMIT $2) recent`, limit.Window, limit.Max).Scan(&n, &retry)
	if err != nil {
		return wrap(err, "count recent resets")
	}
	if n < limit.Max {
		return nil
	}
	return &RateLimitedError{RetryAfter: max(retry, time.Second)}
}

// AuditEntry is one row of the append-only bootstrap audit.
type AuditEntry struct {
	ID         int64
	At         time.Time
	Action     string
	Actor      Actor
	RemoteAddr string
	Generation int64
	State      State
	Detail     string
	Method     AuthMethod
	Subject    string
	Pod        string
}

// BootstrapAudit returns the audit, oldest first.
func (s *Store) BootstrapAudit(ctx context.Context) ([]AuditEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, at, action, actor, remote_addr, generation, state, detail,
		auth_method, subject, pod FROM bootstrap_audit ORDER BY id`)
	if err != nil {
		return nil, wrap(err, "read audit")
	}
	entries, err := pgx.CollectRows(rows, pgx.RowToStructByPos[AuditEntry])
	return entries, wrap(err, "read audit")
}
