package store

import (
	"context"
	"errors"
	"fmt"
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

// NewUser is what CreateUser needs.
type NewUser struct {
	Username string
	Email    string
	Role     Role
}

const userColumns = `u.id, u.username, u.email, u.role, u.kind, coalesce(u.oidc_issuer, ''),
	coalesce(u.oidc_subject, ''), u.password_hash IS NOT NULL, u.created_at`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Username, &u.Email, &u.Role, &u.Kind, &u.OIDCIssuer,
		&u.OIDCSubject, &u.HasPassword, &u.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, ErrNotFound
	}
	return u, err
}

// CreateUser adds a human user with no password and no OIDC identity.
// It returns ErrConflict when the username is taken.
func (s *Store) CreateUser(ctx context.Context, nu NewUser) (User, error) {
	if nu.Role == "" {
		nu.Role = RoleMember
	}
	if strings.EqualFold(nu.Username, PrincipalUsername) {
		return User{}, fmt.Errorf("username %q is reserved for the bootstrap principal: %w", nu.Username, ErrConflict)
	}
	u, err := scanUser(s.pool.QueryRow(ctx, `
		INSERT INTO users AS u (username, email, role, kind) VALUES ($1, $2, $3, 'human')
		RETURNING `+userColumns, nu.Username, nu.Email, nu.Role))
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

// Users lists every user, oldest first.
func (s *Store) Users(ctx context.Context) ([]User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userColumns+` FROM users u ORDER BY u.id`)
	if err != nil {
		return nil, wrap(err, "list users")
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (User, error) { return scanUser(r) })
	return users, wrap(err, "list users")
}

// DeleteUser removes a user with its keys and sessions. It returns ErrNotFound for an unknown
// id and ErrProtectedUser for the bootstrap principal, which only a reset may disarm.
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
// so that a changed password locks out whoever knew the old one.
func (s *Store) SetPasswordHash(ctx context.Context, id int64, hash string, keepSession string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE users SET password_hash = $2 WHERE id = $1`, id, hash)
		if err != nil {
			return wrap(err, "set password")
		}
		if tag.RowsAffected() == 0 {
			return ErrNotFound
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET revoked_at = now()
			WHERE user_id = $1 AND revoked_at IS NULL AND token_hash <> $2`, id, hashToken(keepSession))
		return wrap(err, "end other sessions")
	})
}

// PasswordHash returns the user's password hash, or ErrNotFound when the user has none.
func (s *Store) PasswordHash(ctx context.Context, id int64) (string, error) {
	var hash *string
	err := s.pool.QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1`, id).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && hash == nil {
		return "", ErrNotFound
	}
	if err != nil {
		return "", wrap(err, "get password")
	}
	return *hash, nil
}

// UserByUsername returns the user and password hash for a password sign-in.
// The hash is empty when the user has none; ErrNotFound when no such user exists.
func (s *Store) UserByUsername(ctx context.Context, username string) (User, string, error) {
	return s.UserForSignIn(ctx, username, GateOff, RateLimit{})
}

// UserForSignIn is UserByUsername for a password sign-in: the gate, the throttle on guessing
// and the lookup in one round trip, the same whether or not the user exists. With the gate on
// it returns ErrBootstrapPending while the install is unclaimed; past limit.Max failed
// sign-ins for the username within limit.Window (see RecordLoginFailure) it returns
// *RateLimitedError. It is the early answer, before any password is checked; CreateSession
// takes the gate's binding decision.
func (s *Store) UserForSignIn(ctx context.Context, username string, gate Gate, limit RateLimit) (User, string, error) {
	var hash *string
	var u User
	var open bool
	var failures int
	var retry time.Duration
	// One row whether or not the user exists: an absent user scans as id 0.
	err := s.pool.QueryRow(ctx, `
		SELECT g.open, f.failures, f.retry,
			coalesce(u.id, 0), coalesce(u.username, ''), coalesce(u.email, ''), coalesce(u.role, 'member'),
			coalesce(u.kind, 'human'), coalesce(u.oidc_issuer, ''), coalesce(u.oidc_subject, ''),
			u.password_hash IS NOT NULL, coalesce(u.created_at, 'epoch'), u.password_hash
		FROM (SELECT NOT $2 OR state = 'complete' AS open FROM bootstrap_state) g
		CROSS JOIN (
			SELECT count(*) AS failures, coalesce(min(at) + $4::interval - now(), '0'::interval) AS retry
			FROM (SELECT at FROM login_failures WHERE username = $3 AND at > now() - $4::interval
			      ORDER BY at DESC LIMIT $5) recent
		) f
		LEFT JOIN users u ON u.username = $1`,
		username, bool(gate), throttleKey(username), limit.Window, max(limit.Max, 0)).Scan(&open, &failures, &retry,
		&u.ID, &u.Username, &u.Email, &u.Role, &u.Kind, &u.OIDCIssuer, &u.OIDCSubject, &u.HasPassword, &u.CreatedAt, &hash)
	switch {
	case err != nil:
		return User{}, "", wrap(err, "find user")
	case !open:
		return User{}, "", ErrBootstrapPending
	case limit.Max > 0 && failures >= limit.Max:
		return User{}, "", &RateLimitedError{RetryAfter: max(retry, time.Second)}
	case u.ID == 0:
		return User{}, "", ErrNotFound
	case hash == nil:
		return u, "", nil
	}
	return u, *hash, nil
}
