package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// GroupsClaim is the name of the groups claim this sign-in carried, "" when it carried
	// none. It is remembered on the person (see DeprovisionSSOUser): a later sign-in without
	// it is then a removal from every group, not a configuration problem.
	GroupsClaim string
	// AuthenticatedAt is when the provider says the person last authenticated there (the ID
	// token's auth_time); nil when it did not say. It is kept on the session: see
	// Caller.SignedInWithin.
	AuthenticatedAt *time.Time
}

// maxUsernameSuffix bounds the search for a free username for a new SSO user.
const maxUsernameSuffix = 100

// SSOSignIn is what a single sign-on did: the person, their new session, whether they were
// provisioned by it, and the role they had before it (their role now when provisioned).
type SSOSignIn struct {
	User         User
	Session      Session
	Created      bool
	PreviousRole Role
}

// SignInSSO finds the user with this (issuer, subject), or creates one (createSSOUser), and
// signs them in, in one transaction. With the gate on it returns ErrBootstrapPending and
// creates neither user nor session while the install is unclaimed; the decision is taken under
// the same share lock as CreateSession's. An existing user's e-mail and role follow the provider,
// and the time of the sign-in is recorded: their API keys live at most APIKeyLimits.SSOMaxTTL
// past it.
func (s *Store) SignInSSO(ctx context.Context, id SSOIdentity, ttl time.Duration, gate Gate) (SSOSignIn, error) {
	var u User
	var sess Session
	var created bool
	var previous Role
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The gate's share lock and the lookup travel in one round trip; if the gate is
		// closed, the transaction rolls back and the lookup's update is undone.
		open := true
		var err error
		batch := &pgx.Batch{}
		// Sign-ins of one identity take turns (a lock of the transaction, keyed by the identity):
		// twenty first sign-ins of one new person at once raced their inserts into users' two
		// unique indexes, and about one run in forty Postgres broke a deadlock between them by
		// failing a sign-in (TestSSO_SignIn/Concurrent). Other people's sign-ins do not wait.
		batch.Queue(`SELECT pg_advisory_xact_lock(pg_catalog.hashtextextended($1 || chr(10) || $2, 0))`, id.Issuer, id.Subject)
		batch.Queue(`SELECT ` + gateChecked) // this transaction decides the gate, on or off
		if gate == GateOn {
			batch.Queue(`SELECT state = 'complete' FROM bootstrap_state FOR SHARE`).
				QueryRow(func(row pgx.Row) error { return row.Scan(&open) })
		}
		batch.Queue(`WITH old AS (
				SELECT id, role FROM users WHERE oidc_issuer = $1 AND oidc_subject = $2 FOR NO KEY UPDATE
			)
			UPDATE users u SET email = $3, role = $4, last_sso_at = now(),
				oidc_groups_claim = coalesce(nullif($5, ''), u.oidc_groups_claim)
			FROM old WHERE u.id = old.id
			RETURNING `+userColumns+`, old.role`,
			id.Issuer, id.Subject, id.Email, id.Role, id.GroupsClaim).
			QueryRow(func(row pgx.Row) error { u, err = scanUser(row, &previous); return nil })
		if berr := tx.SendBatch(ctx, batch).Close(); berr != nil {
			return wrap(berr, "find SSO user")
		}
		if !open {
			return ErrBootstrapPending
		}
		if errors.Is(err, ErrNotFound) {
			u, created, err = createSSOUser(ctx, tx, id)
			previous = u.Role
		}
		if err != nil {
			return wrap(err, "find SSO user")
		}
		sess, err = createSession(ctx, tx, u.ID, ttl, id.AuthenticatedAt)
		return err
	})
	if err != nil {
		return SSOSignIn{}, err
	}
	return SSOSignIn{User: u, Session: sess, Created: created, PreviousRole: previous}, nil
}

// createSSOUser provisions a person on first sign-in. Usernames already taken, including
// the bootstrap principal's, are skipped; a concurrent first sign-in of the same identity
// is resolved by the (issuer, subject) unique constraint, and the loser returns that user
// with created false.
func createSSOUser(ctx context.Context, tx pgx.Tx, id SSOIdentity) (u User, created bool, err error) {
	if len(id.Usernames) == 0 {
		return User{}, false, errors.New("create SSO user: no username candidates")
	}
	candidates := slices.Clone(id.Usernames)
	for n := 2; n <= maxUsernameSuffix; n++ {
		candidates = append(candidates, fmt.Sprintf("%s-%d", id.Usernames[0], n))
	}
	for _, name := range candidates {
		if strings.EqualFold(name, PrincipalUsername) {
			continue
		}
		u, err = scanUser(tx.QueryRow(ctx, `
			INSERT INTO users AS u (username, email, role, kind, oidc_issuer, oidc_subject, last_sso_at, oidc_groups_claim)
			VALUES ($1, $2, $3, 'human', $4, $5, now(), nullif($6, ''))
			ON CONFLICT DO NOTHING
			RETURNING `+userColumns, name, id.Email, id.Role, id.Issuer, id.Subject, id.GroupsClaim))
		if !errors.Is(err, ErrNotFound) {
			return u, err == nil, err
		}
		// Nothing inserted: either the name is taken, or the same person signed in concurrently.
		u, err = scanUser(tx.QueryRow(ctx, `SELECT `+userColumns+` FROM users u
			WHERE u.oidc_issuer = $1 AND u.oidc_subject = $2`, id.Issuer, id.Subject))
		if !errors.Is(err, ErrNotFound) {
			return u, false, err
		}
	}
	return User{}, false, fmt.Errorf("create SSO user: no free username near %q: %w", id.Usernames[0], ErrConflict)
}

// OIDCLogin is a sign-in in progress: what the callback needs to finish it on any replica.
type OIDCLogin struct {
	Nonce        string
	CodeVerifier string
	// StepUp marks a sign-in that asked the provider to authenticate the person again.
	StepUp bool
	// StartedAt is when the sign-in began; set by TakeOIDCLogin, ignored by SaveOIDCLogin.
	StartedAt time.Time
}

// SaveOIDCLogin records a sign-in started with this state, valid for ttl. With the gate on
// it returns ErrBootstrapPending and records nothing while the install is unclaimed. With
// limit > 0 it keeps at most limit unexpired sign-ins in progress: in the same statement as
// the insert, it removes the oldest ones beyond limit-1 and reports how many it evicted, so a
// flood of starts ends the oldest sign-ins rather than refusing everyone's. (Starts at the
// same instant on several replicas may each see the same rows, so the table may briefly
// hold limit plus those.) Expired rows are swept out on the way.
func (s *Store) SaveOIDCLogin(ctx context.Context, state string, l OIDCLogin, ttl time.Duration, gate Gate, limit int) (evicted int, err error) {
	var open bool
	err = s.pool.QueryRow(ctx, `
		WITH g AS (SELECT NOT $5 OR state = 'complete' AS open FROM bootstrap_state),
		sweep AS (DELETE FROM oidc_logins WHERE expires_at < now()),
		evict AS (
			DELETE FROM oidc_logins WHERE $6 > 0 AND (SELECT open FROM g) AND state_hash IN (
				SELECT state_hash FROM oidc_logins WHERE expires_at >= now()
				ORDER BY expires_at DESC, created_at DESC OFFSET greatest($6 - 1, 0))
			RETURNING 1
		),
		ins AS (
			INSERT INTO oidc_logins (state_hash, nonce, code_verifier, expires_at, step_up)
			SELECT $1, $2, $3, now() + $4::interval, $7 FROM g WHERE g.open
		)
		SELECT g.open, (SELECT count(*) FROM evict) FROM g`,
		hashToken(state), l.Nonce, l.CodeVerifier, ttl, bool(gate), max(limit, 0), l.StepUp).Scan(&open, &evicted)
	switch {
	case err != nil:
		return 0, wrap(err, "save sign-in")
	case !open:
		return 0, ErrBootstrapPending
	}
	return evicted, nil
}

// TakeOIDCLogin consumes the sign-in started with this state: it can be finished once.
// ErrNotFound when the state is unknown, used or expired. With the gate on it returns
// ErrBootstrapPending, and consumes nothing, while the install is unclaimed.
func (s *Store) TakeOIDCLogin(ctx context.Context, state string, gate Gate) (OIDCLogin, error) {
	var l OIDCLogin
	var open bool
	var live *bool
	var nonce, verifier *string
	var stepUp *bool
	var started *time.Time
	err := s.pool.QueryRow(ctx, `
		WITH g AS (SELECT NOT $2 OR state = 'complete' AS open FROM bootstrap_state),
		d AS (
			DELETE FROM oidc_logins WHERE state_hash = $1 AND (SELECT open FROM g)
			RETURNING nonce, code_verifier, expires_at > now() AS live, step_up, created_at
		)
		SELECT g.open, d.nonce, d.code_verifier, d.live, d.step_up, d.created_at FROM g LEFT JOIN d ON true`,
		hashToken(state), bool(gate)).Scan(&open, &nonce, &verifier, &live, &stepUp, &started)
	switch {
	case err != nil:
		return OIDCLogin{}, wrap(err, "take sign-in")
	case !open:
		return OIDCLogin{}, ErrBootstrapPending
	case live == nil || !*live:
		return OIDCLogin{}, ErrNotFound
	}
	l.Nonce, l.CodeVerifier, l.StepUp, l.StartedAt = *nonce, *verifier, *stepUp, *started
	return l, nil
}
