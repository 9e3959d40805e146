package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// Attempt is a password check reserved against the guessing limit (see UserForSignIn). Until
// ReleaseAttempt or CreatePasswordSession releases it, it counts as a failed guess, so a check
// whose caller goes away, or fails, is counted whatever happens to the request.
type Attempt struct {
	key []byte
	at  *time.Time // nil when nothing was reserved (no limit)
}

// throttleKey names a username in login_attempts: a SHA-256 of it lower-cased, as usernames
// are unique regardless of case. Any input becomes 32 bytes, so nothing an anonymous caller
// types (often a password, typed into the wrong box) is stored, and no length or encoding of
// it can fail the query.
func throttleKey(username string) []byte {
	sum := sha256.Sum256([]byte(strings.ToLower(username)))
	return sum[:]
}

// reserveAttempt is the upsert that reserves a check for the key $1 when fewer than $3 checks
// were reserved within the window $2, under the row's lock: concurrent reservations of one
// username, on any replica, wait for each other and each sees the others' (ON CONFLICT DO
// UPDATE works on the newest row version). It returns whether this one was admitted, its time
// (its identity for the release), and when the oldest check in the window expires. %s is the
// SELECT of the row to insert: none when nothing may be reserved (the gate is closed).
const reserveAttempt = `
	INSERT INTO login_attempts AS a (key, attempts, admitted) %s
	ON CONFLICT (key) DO UPDATE SET (attempts, admitted, touched_at) = (
		SELECT CASE WHEN cardinality(recent) < $3 THEN recent || now() ELSE recent END, cardinality(recent) < $3, now()
		FROM (SELECT ARRAY(SELECT t FROM unnest(a.attempts) t WHERE t > now() - $2::interval) AS recent) r)
	RETURNING a.admitted, now() AS at,
		coalesce((SELECT min(t) FROM unnest(a.attempts) t) + $2::interval - now(), '0'::interval) AS retry`

// sweepAttempts deletes a few rows of usernames nobody tried within the window $2 (other than
// $1's, which the same statement reserves), skipping rows others hold: each reservation
// sweeps a little, so the table holds about the usernames tried within one window.
const sweepAttempts = `DELETE FROM login_attempts WHERE key IN (
		SELECT key FROM login_attempts WHERE touched_at < now() - $2::interval AND key <> $1
		LIMIT 8 FOR UPDATE SKIP LOCKED)`

// releaseAttempt removes one reserved time (parameter %[2]s) from a key's (%[1]s) checks.
const releaseAttempt = `UPDATE login_attempts SET attempts =
		attempts[:array_position(attempts, %[2]s::timestamptz) - 1] || attempts[array_position(attempts, %[2]s::timestamptz) + 1:]
	WHERE key = %[1]s AND %[2]s::timestamptz = ANY(attempts)`

// ReleaseAttempt gives back a reserved check that was not a failed guess: the password was
// right, or the check never ran. Releasing an attempt with nothing reserved does nothing.
func (s *Store) ReleaseAttempt(ctx context.Context, a Attempt) error {
	if a.at == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, fmt.Sprintf(releaseAttempt, "$1", "$2"), a.key, *a.at)
	return wrap(err, "release sign-in attempt")
}
