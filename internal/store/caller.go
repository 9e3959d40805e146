package store

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// callerCheck is the answer of a Caller's check: whether its credential is live and, for a
// session, whether its person authenticated at the provider within Caller.SignedInWithin.
type callerCheck struct{ live, recent bool }

// queue adds to batch the check of by's API key or session; the zero Caller is this process
// and passes.
func (c *callerCheck) queue(batch *pgx.Batch, by Caller) {
	if by.UserID == 0 {
		c.live, c.recent = true, true
		return
	}
	scan := func(row pgx.Row) error {
		err := row.Scan(&c.recent)
		c.live = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	}
	if by.Session != "" {
		batch.Queue(`SELECT $3::interval <= '0' OR coalesce(authenticated_at > now() - $3::interval, false)
			FROM sessions WHERE token_hash = $1 AND user_id = $2 AND revoked_at IS NULL AND expires_at > now()
			FOR SHARE`,
			hashToken(by.Session), by.UserID, by.SignedInWithin).QueryRow(scan)
		return
	}
	batch.Queue(`SELECT true FROM api_keys WHERE key_hash = $1 AND user_id = $2
		AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
		FOR SHARE`,
		hashToken(by.APIKey), by.UserID).QueryRow(scan)
}

// err is ErrCallerRevoked for a credential no longer live, ErrSignInTooOld for a session whose
// person's authentication at the provider is older than the caller's SignedInWithin (or
// unknown), and nil otherwise.
func (c callerCheck) err() error {
	switch {
	case !c.live:
		return ErrCallerRevoked
	case !c.recent:
		return ErrSignInTooOld
	}
	return nil
}

// checkCaller checks by in tx: see callerCheck.err. The credential's row is read FOR SHARE, so
// a revocation of it (an UPDATE of revoked_at) waits for tx, and tx acts only for a credential
// that no revocation committed before it.
func checkCaller(ctx context.Context, tx pgx.Tx, by Caller) error {
	var c callerCheck
	batch := &pgx.Batch{}
	c.queue(batch, by)
	if batch.Len() == 0 {
		return nil
	}
	if err := tx.SendBatch(ctx, batch).Close(); err != nil {
		return wrap(err, "check caller")
	}
	return c.err()
}
