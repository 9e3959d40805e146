package store

import (
	"context"
	"strings"
	"time"
)

// RecordLoginFailure counts a failed password sign-in for the username, for the throttle in
// UserForSignIn, and sweeps out failures older than window on the way.
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
