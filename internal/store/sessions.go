package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Session is a signed-in browser's session. Its token exists only when it is created;
// the database keeps its hash.
type Session struct {
	Token     string
	UserID    int64
	ExpiresAt time.Time
}

// Gate says whether a sign-in must be refused while the install is unclaimed.
type Gate bool

// The two gate settings.
const (
	GateOn  Gate = true
	GateOff Gate = false
)

// CreateSession signs the user in for ttl. With the gate on it returns ErrBootstrapPending
// and creates nothing while the install is unclaimed. The state is read under a share lock
// in the same statement (so the same transaction) as the insert: a concurrent claim either
// commits first (this sees complete and signs in) or waits for this statement to finish
// (which saw pending and inserted nothing). One round trip, gate on or off.
func (s *Store) CreateSession(ctx context.Context, userID int64, ttl time.Duration, gate Gate) (Session, error) {
	sess := Session{Token: newSecret(), UserID: userID}
	var open bool
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH gate AS (SELECT `+gateChecked+` AND (NOT $4 OR state = 'complete') AS open FROM bootstrap_state FOR SHARE),
		ins AS (
			INSERT INTO sessions (user_id, token_hash, expires_at)
			SELECT u.id, $2, now() + $3::interval FROM users u, gate WHERE u.id = $1 AND gate.open
			RETURNING expires_at
		)
		SELECT gate.open, ins.expires_at FROM gate LEFT JOIN ins ON true`,
		userID, hashToken(sess.Token), ttl, bool(gate)).Scan(&open, &expires)
	switch {
	case err != nil:
		return Session{}, wrap(err, "create session")
	case !open:
		return Session{}, ErrBootstrapPending
	case expires == nil:
		return Session{}, ErrNotFound
	}
	sess.ExpiresAt = *expires
	return sess, nil
}

// CreatePasswordSession is CreateSession for a password sign-in: it signs the user in only if
// their password hash is still checkedHash, the one the password was checked against, and
// releases the attempt the check reserved (see UserForSignIn), all in one statement. Its
// caller checked the password and found it right, so the attempt is released whatever the
// statement finds: also when the gate closed during the check (counting a right password that
// met a reset would lock the person out once the install is claimed again) and when the
// password was replaced meanwhile (it was right when checked; kept, it would hold a place
// under the limit until its lease ends). The user's
// row is read under a share lock, so a password change either commits first (this sees the new
// hash and returns ErrNotFound) or waits for this statement, and then revokes the session it
// created. It returns ErrBootstrapPending like CreateSession, and ErrNotFound when the user is
// gone or their password changed.
func (s *Store) CreatePasswordSession(ctx context.Context, userID int64, checkedHash string, a Attempt,
	ttl time.Duration, gate Gate) (Session, error) {
	sess := Session{Token: newSecret(), UserID: userID}
	var open bool
	var expires *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH gate AS (SELECT `+gateChecked+` AND (NOT $4 OR state = 'complete') AS open FROM bootstrap_state FOR SHARE),
		u AS (SELECT id FROM users WHERE id = $1 AND password_hash = $5 FOR SHARE),
		ins AS (
			INSERT INTO sessions (user_id, token_hash, expires_at)
			SELECT u.id, $2, now() + $3::interval FROM u, gate WHERE gate.open
			RETURNING expires_at
		),
		released AS (`+fmt.Sprintf(releaseAttempt, "$6", "$7")+`)
		SELECT gate.open, ins.expires_at FROM gate LEFT JOIN ins ON true`,
		userID, hashToken(sess.Token), ttl, bool(gate), checkedHash, a.key, a.at).Scan(&open, &expires)
	switch {
	case err != nil:
		return Session{}, wrap(err, "create session")
	case !open:
		return Session{}, ErrBootstrapPending
	case expires == nil:
		return Session{}, ErrNotFound
	}
	sess.ExpiresAt = *expires
	return sess, nil
}

// createSession signs the user in for ttl; authenticatedAt is when the single sign-on
// provider says they authenticated (nil: unknown).
func createSession(ctx context.Context, tx pgx.Tx, userID int64, ttl time.Duration, authenticatedAt *time.Time) (Session, error) {
	sess := Session{Token: newSecret(), UserID: userID}
	err := tx.QueryRow(ctx, `INSERT INTO sessions (user_id, token_hash, expires_at, authenticated_at)
		SELECT id, $2, now() + $3::interval, $4 FROM users WHERE id = $1 RETURNING expires_at`,
		userID, hashToken(sess.Token), ttl, authenticatedAt).Scan(&sess.ExpiresAt)
	if err == pgx.ErrNoRows {
		return Session{}, ErrNotFound
	}
	return sess, wrap(err, "create session")
}

// AuthenticateSession returns the user of a live, unexpired session, or ErrNotFound.
func (s *Store) AuthenticateSession(ctx context.Context, token string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+`
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`, hashToken(token)))
	return u, wrap(err, "authenticate session")
}

// EndSession revokes the session with this token. Ending an unknown or ended session is not an error.
func (s *Store) EndSession(ctx context.Context, token string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sessions SET revoked_at = now()
		WHERE token_hash = $1 AND revoked_at IS NULL`, hashToken(token))
	return wrap(err, "end session")
}

func revokeUserSessions(ctx context.Context, tx pgx.Tx, userID int64) (int64, error) {
	tag, err := tx.Exec(ctx, `UPDATE sessions SET revoked_at = now()
		WHERE user_id = $1 AND revoked_at IS NULL`, userID)
	if err != nil {
		return 0, wrap(err, "revoke sessions")
	}
	return tag.RowsAffected(), nil
}
