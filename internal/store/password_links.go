package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	// ErrNoPassword means the user cannot have a password: a machine user, or a person who
	// signs in through single sign-on.
	ErrNoPassword = errors.New("this user cannot have a password")
	// ErrAdminsOwnPassword means the user is an admin who has a password: it is theirs to
	// change, never another's to set.
	ErrAdminsOwnPassword = errors.New("an admin's password is changed only by that admin")
	// ErrPasswordLinkInvalid means no live set-password link has that token: it never
	// existed, was used, was replaced, was revoked by a password change, or expired.
	ErrPasswordLinkInvalid = errors.New("no live set-password link with that token")
)

// PasswordLink is a set-password link just issued. Token exists only here: the database
// keeps its hash.
type PasswordLink struct {
	UserID    int64
	Token     string
	ExpiresAt time.Time
}

// IssuePasswordLink issues a set-password link for the user, valid for ttl, and replaces any
// earlier one of theirs. It returns ErrNotFound when the user does not exist; ErrNoPassword for
// a machine user or a single sign-on person; ErrAdminsOwnPassword for an admin who has a
// password; ErrCallerRevoked or ErrSignInTooOld when by's credential is no longer live or its
// session not recent enough. The user's row is locked, as a password change locks it, so a
// change that commits first is seen and one that commits after deletes the link.
func (s *Store) IssuePasswordLink(ctx context.Context, userID int64, by Caller, ttl time.Duration) (PasswordLink, error) {
	l := PasswordLink{UserID: userID, Token: newSecret()}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := passwordLinkTarget(ctx, tx, userID); err != nil {
			return err
		}
		if err := checkCaller(ctx, tx, by); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, `INSERT INTO password_links (user_id, token_hash, created_by, expires_at)
			VALUES ($1, $2, nullif($3, 0), now() + $4::interval)
			ON CONFLICT (user_id) DO UPDATE SET token_hash = excluded.token_hash, created_by = excluded.created_by,
				created_at = now(), expires_at = excluded.expires_at
			RETURNING expires_at`, userID, hashToken(l.Token), by.UserID, ttl).Scan(&l.ExpiresAt)
		return wrap(err, "issue set-password link")
	})
	if err != nil {
		return PasswordLink{}, err
	}
	return l, nil
}

// PasswordLinkLive returns ErrPasswordLinkInvalid unless a live link has token. It lets a
// redemption refuse a wrong token before it hashes a password; RedeemPasswordLink decides.
func (s *Store) PasswordLinkLive(ctx context.Context, token string) error {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM password_links WHERE token_hash = $1 AND expires_at > now())`,
		hashToken(token)).Scan(&ok)
	if err != nil {
		return wrap(err, "find set-password link")
	}
	if !ok {
		return ErrPasswordLinkInvalid
	}
	return nil
}

// PasswordLinkPerson returns the person a live link with token is for, so that the link's
// page can say whose password it sets; ErrPasswordLinkInvalid when no live link has token. It
// uses nothing: RedeemPasswordLink decides.
func (s *Store) PasswordLinkPerson(ctx context.Context, token string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
		JOIN password_links l ON l.user_id = u.id WHERE l.token_hash = $1 AND l.expires_at > now()`, hashToken(token)))
	if errors.Is(err, ErrNotFound) {
		return User{}, ErrPasswordLinkInvalid
	}
	return u, wrap(err, "find set-password link")
}

// RedeemPasswordLink uses the link with token, once: it sets hash as its person's password and
// ends every session of theirs, in the transaction that deletes the link, and returns the
// person. Of any number of redemptions at once, on any replicas, one succeeds: they queue on the
// person's row, and the others then find no link (ErrPasswordLinkInvalid, also for an expired
// link). It returns
// ErrNoPassword or ErrAdminsOwnPassword when the person can no longer be given a password this way.
func (s *Store) RedeemPasswordLink(ctx context.Context, token, hash string) (User, error) {
	var u User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The person's row first, as a password change and an issue lock it, then the link:
		// one order, so that none of them deadlocks another.
		err := tx.QueryRow(ctx, `SELECT user_id FROM password_links WHERE token_hash = $1`, hashToken(token)).Scan(&u.ID)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrPasswordLinkInvalid
		}
		if err != nil {
			return wrap(err, "find set-password link")
		}
		if err := passwordLinkTarget(ctx, tx, u.ID); err != nil {
			return err
		}
		var live bool
		err = tx.QueryRow(ctx, `DELETE FROM password_links WHERE token_hash = $1 AND user_id = $2
			RETURNING expires_at > now()`, hashToken(token), u.ID).Scan(&live)
		if errors.Is(err, pgx.ErrNoRows) || err == nil && !live {
			return ErrPasswordLinkInvalid
		}
		if err != nil {
			return wrap(err, "redeem set-password link")
		}
		if _, err := changePassword(ctx, tx, PasswordChange{UserID: u.ID, Hash: hash}); err != nil {
			return err
		}
		u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u WHERE u.id = $1`, u.ID))
		return wrap(err, "redeem set-password link")
	})
	if err != nil {
		return User{}, err
	}
	return u, nil
}

// passwordLinkTarget locks the user's row and says whether a set-password link may set their
// password (see IssuePasswordLink): as whether someone else may choose it (PasswordRule.ByOther).
func passwordLinkTarget(ctx context.Context, tx pgx.Tx, userID int64) error {
	return PasswordRule{ByOther: true}.check(ctx, tx, userID)
}
