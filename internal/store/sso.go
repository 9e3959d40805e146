package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// SSOIdentity is a person as an OIDC provider vouched for them.
type SSOIdentity struct {
	Issuer  string
	Subject string
	Email   string
	// Usernames are tried in order for a new user; the first free one wins, and when all
	// are taken the first gets a numeric suffix.
	Usernames []string
	Role      Role
}

// maxUsernameSuffix bounds the search for a free username for a new SSO user.
const maxUsernameSuffix = 100

// SignInSSO finds the user with this (issuer, subject), or creates one (createSSOUser), and
// signs them in, in one transaction. With the gate on it returns ErrBootstrapPending and
// creates neither user nor session while the install is unclaimed; the decision is taken under
// the same share lock as CreateSession's. An existing user's e-mail and role follow the provider.
func (s *Store) SignInSSO(ctx context.Context, id SSOIdentity, ttl time.Duration, gate Gate) (User, Session, bool, error) {
	var u User
	var sess Session
	var created bool
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := checkGate(ctx, tx, gate); err != nil {
			return err
		}
		var err error
		u, err = scanUser(tx.QueryRow(ctx, `UPDATE users u SET email = $3, role = $4
			WHERE oidc_issuer = $1 AND oidc_subject = $2 RETURNING `+userColumns,
			id.Issuer, id.Subject, id.Email, id.Role))
		if errors.Is(err, ErrNotFound) {
			u, err = createSSOUser(ctx, tx, id)
			created = err == nil
		}
		if err != nil {
			return wrap(err, "find SSO user")
		}
		sess, err = createSession(ctx, tx, u.ID, ttl)
		return err
	})
	if err != nil {
		return User{}, Session{}, false, err
	}
	return u, sess, created, nil
}

// createSSOUser provisions a person on first sign-in. Usernames already taken, including
// the bootstrap principal's, are skipped; a concurrent first sign-in of the same identity
// is resolved by the (issuer, subject) unique constraint, and the loser returns that user.
func createSSOUser(ctx context.Context, tx pgx.Tx, id SSOIdentity) (User, error) {
	if len(id.Usernames) == 0 {
		return User{}, errors.New("create SSO user: no username candidates")
	}
	candidates := slices.Clone(id.Usernames)
	for n := 2; n <= maxUsernameSuffix; n++ {
		candidates = append(candidates, fmt.Sprintf("%s-%d", id.Usernames[0], n))
	}
	for _, name := range candidates {
		if name == PrincipalUsername {
			continue
		}
		u, err := scanUser(tx.QueryRow(ctx, `
			INSERT INTO users AS u (username, email, role, kind, oidc_issuer, oidc_subject)
			VALUES ($1, $2, $3, 'human', $4, $5)
			ON CONFLICT DO NOTHING
			RETURNING `+userColumns, name, id.Email, id.Role, id.Issuer, id.Subject))
		if !errors.Is(err, ErrNotFound) {
			return u, err
		}
		// Nothing inserted: either the name is taken, or the same person signed in concurrently.
		u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
			WHERE u.oidc_issuer = $1 AND u.oidc_subject = $2`, id.Issuer, id.Subject))
		if !errors.Is(err, ErrNotFound) {
			return u, err
		}
	}
	return User{}, fmt.Errorf("create SSO user: no free username near %q: %w", id.Usernames[0], ErrConflict)
}

// OIDCLogin is a sign-in in progress: what the callback needs to finish it on any replica.
type OIDCLogin struct {
	Nonce        string
	CodeVerifier string
}

// SaveOIDCLogin records a sign-in started with this state, valid for ttl.
// Expired rows are swept out on the way.
func (s *Store) SaveOIDCLogin(ctx context.Context, state string, l OIDCLogin, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, `
		WITH sweep AS (DELETE FROM oidc_logins WHERE expires_at < now() - interval '1 hour')
		INSERT INTO oidc_logins (state_hash, nonce, code_verifier, expires_at)
		VALUES ($1, $2, $3, now() + $4::interval)`, hashToken(state), l.Nonce, l.CodeVerifier, ttl)
	return wrap(err, "save sign-in")
}

// TakeOIDCLogin consumes the sign-in started with this state: it can be finished once.
// ErrNotFound when the state is unknown, used or expired.
func (s *Store) TakeOIDCLogin(ctx context.Context, state string) (OIDCLogin, error) {
	var l OIDCLogin
	var live bool
	err := s.pool.QueryRow(ctx, `DELETE FROM oidc_logins WHERE state_hash = $1
		RETURNING nonce, code_verifier, expires_at > now()`, hashToken(state)).Scan(&l.Nonce, &l.CodeVerifier, &live)
	if errors.Is(err, pgx.ErrNoRows) || err == nil && !live {
		return OIDCLogin{}, ErrNotFound
	}
	return l, wrap(err, "take sign-in")
}
