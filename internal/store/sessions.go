package store

import (
	"context"
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
// and creates nothing while the install is unclaimed: the state is read under a share lock
// in the same transaction as the insert, so a concurrent claim either commits first (the
// session is created) or waits for this transaction (which saw pending and created nothing).
func (s *Store) CreateSession(ctx context.Context, userID int64, ttl time.Duration, gate Gate) (Session, error) {
	var sess Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkGate(ctx, tx, gate); err != nil {
			return err
		}
		var err error
		sess, err = createSession(ctx, tx, userID, ttl)
		return err
	})
	return sess, err
}

func createSession(ctx context.Context, tx pgx.Tx, userID int64, ttl time.Duration) (Session, error) {
	sess := Session{Token: newSecret(), UserID: userID}
	err := tx.QueryRow(ctx, `INSERT INTO sessions (user_id, token_hash, expires_at)
		SELECT id, $2, now() + $3::interval FROM users WHERE id = $1 RETURNING expires_at`,
		userID, hashToken(sess.Token), ttl).Scan(&sess.ExpiresAt)
	if err == pgx.ErrNoRows {
		return Session{}, ErrNotFound
	}
	return sess, wrap(err, "create session")
}

// checkGate returns ErrBootstrapPending when the gate is on and the install is unclaimed.
// With the gate off it takes no lock at all.
func checkGate(ctx context.Context, tx pgx.Tx, gate Gate) error {
	if gate == GateOff {
		return nil
	}
	var state string
	err := tx.QueryRow(ctx, `SELECT state FROM bootstrap_state FOR SHARE`).Scan(&state)
	if err != nil {
		return wrap(err, "read bootstrap state")
	}
	if state != string(StatePending) {
		return nil
	}
	return ErrBootstrapPending
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
