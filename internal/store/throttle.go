package store

import (
	"context"
	"strings"
	"time"
)

// CheckLoginThrottle returns *RateLimitedError when the username has had limit.Max failed
// password sign-ins within limit.Window, counted across every replica. It answers the same
// whether or not such a user exists. A zero limit never throttles.
func (s *Store) CheckLoginThrottle(ctx context.Context, username string, limit RateLimit) error {
	if limit.Max <= 0 {
		return nil
	}
	var n int
	var retry time.Duration
	err := s.pool.QueryRow(ctx, `
		SELECT count(*), coalesce(min(at) + $2::interval - now(), '0'::interval)
		FROM (SELECT at FROM login_failures
		      WHERE username = $1 AND at > now() - $2::interval
		      ORDER BY at DESC LIMIT $3) recent`, throttleKey(username), limit.Window, limit.Max).Scan(&n, &retry)
	if err != nil {
		return wrap(err, "count failed sign-ins")
	}
	if n < limit.Max {
		return nil
	}
	return &RateLimitedError{RetryAfter: max(retry, time.Second)}
}

// RecordLoginFailure counts a failed password sign-in for the username, and sweeps out
// failures older than window on the way.
func (s *Store) RecordLoginFailure(ctx context.Context, username string, window time.Duration) error {
	_, err := s.pool.Exec(ctx, `
		WITH sweep AS (DELETE FROM login_failures WHERE at < now() - $2::interval)
		INSERT INTO login_failures (username) VALUES ($1)`, throttleKey(username), window)
	return wrap(err, "record failed sign-in")
}

// throttleKey folds case, as usernames are unique regardless of case, and bounds the length
// of what an anonymous caller can make the database store.
func throttleKey(username string) string {
	k := strings.ToLower(username)
	if len(k) > 128 {
		k = k[:128]
	}
	return k
}
