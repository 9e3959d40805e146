package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Role is what a user may do: admins manage everyone, members manage themselves.
type Role string

// The roles a user can have.
const (
	RoleAdmin  Role = "admin"
	RoleMember Role = "member"
)

// Kind separates people from machine users such as the bootstrap principal.
type Kind string

// The kinds of user.
const (
	KindHuman   Kind = "human"
	KindService Kind = "service"
)

// User is a person or machine user. Password hashes never leave the store through it.
type User struct {
	ID          int64
	Username    string
	Email       string
	Role        Role
	Kind        Kind
	OIDCIssuer  string
	OIDCSubject string
	HasPassword bool
	CreatedAt   time.Time
}

// SSO reports whether the user signs in through single sign-on: whether they have an issuer.
// The database holds an issuer and a subject together, neither empty (migration 00012).
func (u User) SSO() bool { return u.OIDCIssuer != "" }

// NewUser is what CreateUser needs: the person, and who asks (checked again in the
// transaction that creates them; the zero Caller is this process).
type NewUser struct {
	Username string
	Email    string
	Role     Role
	By       Caller
}

const userColumns = `u.id, u.username, u.email, u.role, u.kind, coalesce(u.oidc_issuer, ''),
	coalesce(u.oidc_subject, ''), u.password_hash IS NOT NULL, u.created_at`

// scanUser scans userColumns, then any columns after them into extra.
func scanUser(row pgx.Row, extra ...any) (User, error) {
	var u User
	err := row.Scan(append([]any{&u.ID, &u.Username, &u.Email, &u.Role, &u.Kind, &u.OIDCIssuer,
		&u.OIDCSubject, &u.HasPassword, &u.CreatedAt}, extra...)...)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	return u, err
}

// CreateUser adds a human user with no password and no OIDC identity. It returns ErrConflict
// when the username is taken, and ErrCallerRevoked or ErrSignInTooOld when nu.By's credential
// is no longer live or its session not recent enough (see Caller).
func (s *Store) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	if nu.Role == "" {
		nu.Role = RoleMember
	}
	if strings.EqualFold(nu.Username, PrincipalUsername) {
		return User{}, fmt.Errorf("username %q is reserved for the bootstrap principal: %w", nu.Username, ErrConflict)
	}
	var u User
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkCaller(ctx, tx, nu.By); err != nil {
			return err
		}
		// Not a sign-in: an admin may add people while the install is pending (after a reset).
		var err error
		u, err = scanUser(tx.QueryRow(ctx, `
			WITH marked AS (SELECT `+gateChecked+` AS ok)
			INSERT INTO users AS u (username, email, role, kind) SELECT $1, $2, $3, 'human' FROM marked WHERE marked.ok
			RETURNING `+userColumns, nu.Username, nu.Email, nu.Role))
		return err
	})
	if isUniqueViolation(err, "users_username_key") || isUniqueViolation(err, "users_username_lower_key") {
		return User{}, fmt.Errorf("username %q: %w", nu.Username, ErrConflict)
	}
	return u, wrap(err, "create user")
}

// User returns the user with the given id, or ErrNotFound.
func (s *Store) User(ctx context.Context, id int64) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `SELECT `+userColumns+` FROM users u WHERE u.id = $1`, id))
	return u, wrap(err, "get user")
}

// Users lists every user, oldest first, all at once: for tests and tools on small tables. The
// API lists with UsersAfter, a page at a time.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	return s.UsersAfter(ctx, 0, math.MaxInt32)
}

// usersAfterQuery reads a page of users in keyset order: by the primary key, from just after
// the last one of the page before, so that a page costs the same however deep it is.
const usersAfterQuery = `SELECT ` + userColumns + ` FROM users u WHERE u.id > $1 ORDER BY u.id LIMIT $2`

// UsersAfter lists at most limit users whose id is above after (0: from the first), in the
// order of their ids (oldest first). Each call is one short statement, outside any
// transaction: a list read page by page holds no connection between pages, and shows each
// user who exists from its first page to its last exactly once.
func (s *Store) UsersAfter(ctx context.Context, after int64, limit int) ([]User, error) {
	rows, err := s.pool.Query(ctx, usersAfterQuery, after, limit)
	if err != nil {
		return nil, wrap(err, "list users")
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
	return users, wrap(err, "list users")
}

// DeleteUser removes a user with its keys, sessions and days of the on-call schedule, and
// unassigns the incidents given to them (their timelines keep the names they showed). It
// returns ErrNotFound for an unknown id and ErrProtectedUser for the bootstrap principal,
// which only a reset may disarm.
func (s *Store) DeleteUser(ctx context.Context, id int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var protected bool
		err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM bootstrap_state WHERE principal_id = $1)`, id).
			Scan(&protected)
		if err != nil {
			return wrap(err, "delete user")
		}
		if protected {
			return ErrProtectedUser
		}
		// Their days first, then the person (the foreign keys' cascade would take the other
		// order): in the order a new incident locks them (createIncident), so that an
		// incident being given to them today either comes first, and the deletion then
		// unassigns it, or finds nobody on call, never a deadlock.
		if _, err := tx.Exec(ctx, `DELETE FROM schedule WHERE user_id = $1`, id); err != nil {
			return wrap(err, "delete user's schedule")
		}
		tag, err := tx.Exec(ctx, `DELETE FROM users WHERE id = $1`, id)
		if err != nil {
			return wrap(err, "delete user")
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		return nil
	})
}

// SetPasswordHash stores a new password hash for the user and ends every session but keep,
// so that a changed password locks out whoever knew the old one. It is ChangePassword
// without revoking API keys.
func (s *Store) SetPasswordHash(ctx context.Context, id int64, hash string, keepSession string) error {
	_, err := s.ChangePassword(ctx, PasswordChange{UserID: id, Hash: hash, KeepSession: keepSession})
	return err
}

// PasswordChange is a new password hash for a user, and what else the change ends.
type PasswordChange struct {
	UserID      int64
	Hash        string
	KeepSession string // the token of the one session left alive (the changer's own); "": none
	// RevokeAPIKeys also revokes every API key of the user, so that a key someone made with a
	// stolen session dies with the password they knew or the cookie they took.
	RevokeAPIKeys bool
	// Rule, when not nil, is what a change someone asked for was decided on: ChangePassword
	// checks it again, on the person's row locked, before it writes. Nil for a change this
	// process makes itself.
	Rule *PasswordRule
}

// ErrPasswordChanged means the person's password hash was replaced after the change being
// made was decided on: by another change, and then the password its caller proved to know is
// no longer current, or by a sign-in storing the same password at another cost.
var ErrPasswordChanged = errors.New("the password changed meanwhile")

// PasswordRule is what a password change through the API was decided on. The API reads the
// person, checks its rules, then hashes the new password (a quarter of a second at the
// default cost) before it writes: long enough for another change or a set-password link's
// use to commit in between. ChangePassword checks the rule again with the row locked, so a
// change that raced another is refused as it would have been had it come second.
type PasswordRule struct {
	// ByOther says someone other than the person chooses it (an admin's API key): refused
	// with ErrAdminsOwnPassword when the person is, by then, an admin who has a password.
	ByOther bool
	// Proven is, for the person's own change, the password hash they proved to know with
	// their current password, "" when they had none: refused with ErrPasswordChanged when
	// the stored hash is, by then, another.
	Proven string
}

// neverHasPassword is true of a users row that can never have a password: a machine user, who
// acts only through API keys, or a single sign-on person, whose provider's rules a password
// would get around.
const neverHasPassword = `(kind = 'service' OR oidc_issuer IS NOT NULL)`

// check locks the user's row for a change of their password and says whether r still
// allows it: ErrNotFound, ErrNoPassword (a machine user or a single sign-on person, who
// never have one), ErrAdminsOwnPassword or ErrPasswordChanged when not.
func (r PasswordRule) check(ctx context.Context, tx pgx.Tx, userID int64) error {
	var noPassword, admin bool
	var hash string
	err := tx.QueryRow(ctx, `SELECT `+neverHasPassword+`, role = 'admin', coalesce(password_hash, '')
		FROM users WHERE id = $1 FOR UPDATE`, userID).Scan(&noPassword, &admin, &hash)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return wrap(err, "lock user")
	case noPassword:
		return ErrNoPassword
	case r.ByOther && admin && hash != "":
		return ErrAdminsOwnPassword
	case !r.ByOther && hash != r.Proven:
		return ErrPasswordChanged
	}
	return nil
}

// ChangePassword stores c.Hash as the user's password hash and, in the same transaction, ends
// every session of theirs but c.KeepSession and, with c.RevokeAPIKeys, revokes every API key of
// theirs; it returns how many keys it revoked. The UPDATE of the user's row comes first, so a
// key being created for them meanwhile is revoked with the rest (see lockUser), and one asked
// for later from a session this ends is refused. ErrNotFound when the user does not exist;
// with c.Rule, the errors of PasswordRule.check when it no longer allows the change.
func (s *Store) ChangePassword(ctx context.Context, c PasswordChange) (revokedKeys int64, err error) {
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if c.Rule != nil {
			if err := c.Rule.check(ctx, tx, c.UserID); err != nil {
				return err
			}
		}
		revokedKeys, err = changePassword(ctx, tx, c)
		return err
	})
	if err != nil {
		return 0, err
	}
	return revokedKeys, nil
}

// changePassword is ChangePassword in tx. It also deletes the person's set-password link: a
// link issued before the change would undo it.
func changePassword(ctx context.Context, tx pgx.Tx, c PasswordChange) (revokedKeys int64, err error) {
	tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, c.UserID, c.Hash)
	if err != nil {
		return 0, wrap(err, "set password")
	}
	if tag.RowsAffected() == 0 {
		return 0, ErrNotFound
	}
	_, err = tx.Exec(ctx, `UPDATE sessions SET revoked_at = now()
		WHERE user_id = $1 AND revoked_at IS NULL AND token_hash <> $2`, c.UserID, hashToken(c.KeepSession))
	if err != nil {
		return 0, wrap(err, "end other sessions")
	}
	if _, err = tx.Exec(ctx, `DELETE FROM password_links WHERE user_id = $1`, c.UserID); err != nil {
		return 0, wrap(err, "delete set-password link")
	}
	if c.RevokeAPIKeys {
		revokedKeys, err = revokeUserKeys(ctx, tx, c.UserID)
	}
	return revokedKeys, err
}

// PasswordHash returns the user's password hash as it is now, and reserves nothing and
// deletes nothing (UserForSignIn does both): "" when they have none, or are a machine user
// or a single sign-on person, who never have one; ErrNotFound when the user does not exist.
func (s *Store) PasswordHash(ctx context.Context, userID int64) (string, error) {
	var hash string
	err := s.pool.QueryRow(ctx, `SELECT CASE WHEN `+neverHasPassword+` THEN '' ELSE coalesce(password_hash, '') END
		FROM users WHERE id = $1`, userID).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrNotFound
	}
	return hash, wrap(err, "read password hash")
}

// RehashPassword replaces the user's password hash with newHash, the same password hashed at
// another cost, if the stored hash is still oldHash; sessions are kept, as the password is
// the same. It returns ErrNotFound when the hash changed meanwhile (or the user is gone).
func (s *Store) RehashPassword(ctx context.Context, id int64, oldHash, newHash string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE users SET password_hash = $3 WHERE id = $1 AND password_hash = $2`,
		id, oldHash, newHash)
	if err != nil {
		return wrap(err, "rehash password")
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// userForSignIn is the gate, the reservation of a check against the guessing limit (see
// reserveAttempt) and the lookup, in one statement. One row whether or not the user exists
// (an absent user scans as id 0); no reservation while the gate is closed or without a limit.
var userForSignIn = `
	WITH g AS (SELECT NOT $4 OR state = 'complete' AS open FROM bootstrap_state),
	sweep AS (` + sweepAttempts + `),
	r AS (` + fmt.Sprintf(reserveAttempt, `SELECT $1, '{}'::timestamptz[], ARRAY[now()], true FROM g WHERE g.open AND $3 > 0`) + `)
	SELECT g.open, coalesce(r.admitted, true), r.at, coalesce(r.retry, '0'::interval),
		coalesce(u.id, 0), coalesce(u.username, ''), coalesce(u.email, ''), coalesce(u.role, 'member'),
		coalesce(u.kind, 'human'), coalesce(u.oidc_issuer, ''), coalesce(u.oidc_subject, ''),
		u.password_hash IS NOT NULL, coalesce(u.created_at, 'epoch'), u.password_hash
	FROM g LEFT JOIN r ON true LEFT JOIN users u ON u.username = $5`

// UserForSignIn returns the user and password hash for a password check (the hash is empty
// when the user has none; ErrNotFound when no such user exists): the gate, the throttle on
// guessing and the lookup in one round trip, the same whether or not the user exists. With the gate on
// it returns ErrBootstrapPending while the install is unclaimed. With a limit it reserves the
// check first, under a lock on the username that every replica shares: past limit.Max checks
// reserved for the username within limit.Window it returns *RateLimitedError (with the user
// who has the name, if any, for the log line), however many arrive at once. The reserved
// Attempt counts while its check runs (limit.Lease at most), and as a failed guess only once
// FailedAttempt says its password was wrong; CreatePasswordSession or ReleaseAttempt give it
// back sooner. It is returned with ErrNotFound too, as a name that does not exist is throttled
// like one that does. CreateSession and
// CreatePasswordSession take the gate's binding decision.
func (s *Store) UserForSignIn(ctx context.Context, username string, gate Gate, limit RateLimit) (User, string, Attempt, error) {
	var hash *string
	var u User
	var open, admitted bool
	var retry time.Duration
	a := Attempt{key: throttleKey(username), window: limit.Window}
	lease := limit.Lease
	if lease <= 0 {
		lease = DefaultCheckLease
	}
	err := s.pool.QueryRow(ctx, userForSignIn, a.key, limit.Window, max(limit.Max, 0), bool(gate), username, lease).Scan(
		&open, &admitted, &a.at, &retry,
		&u.ID, &u.Username, &u.Email, &u.Role, &u.Kind, &u.OIDCIssuer, &u.OIDCSubject, &u.HasPassword, &u.CreatedAt, &hash)
	switch {
	case err != nil:
		return User{}, "", Attempt{}, wrap(err, "find user")
	case !open:
		return User{}, "", Attempt{}, ErrBootstrapPending
	case !admitted:
		return u, "", Attempt{}, &RateLimitedError{RetryAfter: max(retry, time.Second)}
	case u.ID == 0:
		return User{}, "", a, ErrNotFound
	case hash == nil:
		return u, "", a, nil
	}
	return u, *hash, a, nil
}
