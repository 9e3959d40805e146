package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

var (
	// ErrTooManyAPIKeys means the user already holds APIKeyLimits.PerUser live keys.
	ErrTooManyAPIKeys = errors.New("too many API keys")
	// ErrExpiryTooLate means the key would outlive APIKeyLimits.SSOMaxTTL after the person's
	// last single sign-on.
	ErrExpiryTooLate = errors.New("API key expiry beyond the limit")
	// ErrSSOSignInTooOld means the person's last single sign-on is APIKeyLimits.SSOMaxTTL or
	// longer ago: a key for them would be dead at birth until they sign in again.
	ErrSSOSignInTooOld = errors.New("last single sign-on too long ago for a new API key")
	// ErrServiceUserKey means the key would belong to a machine user, such as the bootstrap
	// principal, whose keys come from a claim and nothing else.
	ErrServiceUserKey = errors.New("a machine user's API keys come only from a claim")
	// ErrCallerRevoked means the API key or session the request authenticated with was
	// revoked, or expired, before the key it asked for could be issued.
	ErrCallerRevoked = errors.New("the caller's credential is no longer live")
	// ErrSignInTooOld means the person behind the caller's session did not authenticate at
	// the provider within Caller.SignedInWithin, or the provider did not say when.
	ErrSignInTooOld = errors.New("the caller's sign-in is not recent enough")
)

// NewAPIKey is a key asked for: whose, its name, when it expires (nil: never, unless
// APIKeyLimits.SSOMaxTTL applies), and who asks.
type NewAPIKey struct {
	UserID    int64
	Name      string
	ExpiresAt *time.Time
	By        Caller
}

// Caller is who asks for a key, by the credential their request authenticated with: the
// secret of an API key or the token of a session. IssueAPIKey checks it again under the
// lock of the new key's user, the lock that resets, claims, deprovisioning and password
// changes take before they revoke, so that no key is issued on the strength of a credential
// that one of them has revoked by then. The zero Caller is this process itself (the command
// line, tests): there is nothing to check again.
type Caller struct {
	UserID  int64
	APIKey  string // the secret of the API key the request carried, or
	Session string // the token of its session cookie
	// SignedInWithin, when positive, requires the session's person to have authenticated at
	// the single sign-on provider within this long, by the time its ID token said
	// (SSOIdentity.AuthenticatedAt, kept as sessions.authenticated_at). When the session was
	// created does not count: a provider that remembers the person signs them in again
	// without asking anything.
	SignedInWithin time.Duration
}

// APIKeyLimits bound the keys a user may hold. A zero field bounds nothing.
type APIKeyLimits struct {
	// PerUser is how many live keys (neither revoked nor expired) one user may hold.
	PerUser int
	// SSOMaxTTL is how long a key of a person who signs in through single sign-on may live,
	// so that a person the provider stops admitting loses their keys within it even if they
	// never sign in again. Such a key without an expiry gets this one.
	SSOMaxTTL time.Duration
}

// IssueAPIKey issues a key within lim and returns it with its secret, shown once. It returns
// ErrNotFound when the user does not exist; ErrCallerRevoked when nk.By's key or session is no
// longer live, and ErrSignInTooOld when its person's authentication at the provider is older
// than nk.By.SignedInWithin, or unknown;
// ErrServiceUserKey for a machine user, whoever asks; ErrTooManyAPIKeys when the user holds
// lim.PerUser live keys; and, for a single sign-on person, ErrSSOSignInTooOld when their last
// single sign-on is lim.SSOMaxTTL or longer ago and ErrExpiryTooLate when the key would expire
// later than lim.SSOMaxTTL after it. The checks hold across replicas: creates for one user,
// and every revocation of the user's keys, are serialized on the user's row.
func (s *Store) IssueAPIKey(ctx context.Context, nk NewAPIKey, lim APIKeyLimits) (APIKey, string, error) {
	var k APIKey
	var secret string
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// FOR NO KEY UPDATE makes a concurrent create for the same user, and a reset, claim,
		// deprovisioning or password change of theirs (FOR UPDATE, or an UPDATE of the row),
		// wait until this one commits; unlike FOR UPDATE it does not hold up the foreign-key
		// checks of sign-ins inserting the user's sessions. The count and the caller's check
		// are statements of their own, after the lock: their snapshots then see every key
		// committed, and every revocation, by the transactions this one waited for.
		var service, sso, capLive bool
		var live int
		var latest time.Time
		found := true
		batch := &pgx.Batch{}
		// A person created by a replica older than the record of sign-ins has none: their
		// creation was their last single sign-on.
		batch.Queue(`SELECT kind = 'service', oidc_issuer IS NOT NULL, coalesce(last_sso_at, created_at) + $2::interval,
			coalesce(last_sso_at, created_at) + $2::interval > now() FROM users WHERE id = $1 FOR NO KEY UPDATE`,
			nk.UserID, lim.SSOMaxTTL).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&service, &sso, &latest, &capLive)
			if errors.Is(err, pgx.ErrNoRows) {
				found = false
				return nil
			}
			return err
		})
		batch.Queue(`SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, nk.UserID).QueryRow(func(row pgx.Row) error {
			return row.Scan(&live)
		})
		var caller callerCheck
		caller.queue(batch, nk.By)
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return wrap(err, "count API keys")
		}
		switch {
		case !found:
			return ErrNotFound
		case caller.err() != nil:
			return caller.err()
		case service:
			return ErrServiceUserKey
		case lim.PerUser > 0 && live >= lim.PerUser:
			return ErrTooManyAPIKeys
		}
		expires := nk.ExpiresAt
		if sso && lim.SSOMaxTTL > 0 {
			switch {
			case !capLive:
				return ErrSSOSignInTooOld
			case expires == nil:
				expires = &latest
			case expires.After(latest):
				return ErrExpiryTooLate
			}
		}
		var err error
		k, secret, err = insertAPIKey(ctx, tx, nk.UserID, nk.Name, expires)
		return err
	})
	return k, secret, err
}
