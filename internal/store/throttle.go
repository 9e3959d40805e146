package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"time"
)

// Attempt is a password check reserved against the guessing limit (see UserForSignIn). It
// counts against the limit while its check runs, for limit.Lease at most, and becomes a failed
// guess only through FailedAttempt, once its password was checked and found wrong. A check
// whose outcome is never written (the database went away between the reservation and the
// outcome, as in a failover) costs nothing once its lease ends.
type Attempt struct {
	key    []byte
	at     *time.Time // nil when nothing was reserved (no limit)
	window time.Duration
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
// are failed guesses within the window $2 or still running (reserved within the lease $6, the
// longest a check takes), under the row's lock: concurrent reservations of one username, on
// any replica, wait for each other and each sees the others' (ON CONFLICT DO UPDATE works on
// the newest row version). It returns whether this one was admitted, its time (its identity
// for the release), and when the earliest of those counted stops counting. %s is the SELECT of
// the row to insert: none when nothing may be reserved (the gate is closed).
const reserveAttempt = `
	INSERT INTO login_attempts AS a (key, attempts, pending, admitted) %s
	ON CONFLICT (key) DO UPDATE SET (attempts, pending, admitted, touched_at) = (
		SELECT recent, CASE WHEN counted < $3 THEN running OPERATOR(pg_catalog.||) now() ELSE running END, counted < $3, now()
		FROM (SELECT recent, running, pg_catalog.cardinality(recent) + pg_catalog.cardinality(running) AS counted
			FROM (SELECT ARRAY(SELECT t FROM pg_catalog.unnest(a.attempts) t WHERE t > now() - $2::interval) AS recent,
				ARRAY(SELECT t FROM pg_catalog.unnest(a.pending) t WHERE t > now() - $6::interval) AS running) r) c)
	RETURNING a.admitted, now() AS at, coalesce(least(
		(SELECT min(t) FROM pg_catalog.unnest(a.attempts) t) + $2::interval,
		(SELECT min(t) FROM pg_catalog.unnest(a.pending) t) + $6::interval) - now(), '0'::interval) AS retry`

// sweepAttempts deletes a few rows of usernames nobody tried within the window $2 (other than
// $1's, which the same statement reserves), skipping rows others hold: each reservation
// sweeps a little, so the table holds about the usernames tried within one window. Only a
// statement with a limit ($3) over a window sweeps: without one, "nobody tried within the
// window" would be every other username, their live counts included.
const sweepAttempts = `DELETE FROM login_attempts WHERE key IN (
		SELECT key FROM login_attempts WHERE $3 > 0 AND $2::interval > '0'::interval
			AND touched_at < now() - $2::interval AND key <> $1
		LIMIT 8 FOR UPDATE SKIP LOCKED)`

// releaseAttempt removes one reserved time (parameter %[2]s) from a key's (%[1]s) running checks.
const releaseAttempt = `UPDATE login_attempts SET pending =
		pending[:pg_catalog.array_position(pending, %[2]s::timestamptz) - 1]
			OPERATOR(pg_catalog.||) pending[pg_catalog.array_position(pending, %[2]s::timestamptz) + 1:]
	WHERE key = %[1]s AND %[2]s::timestamptz = ANY(pending)`

// ReleaseAttempt gives back a reserved check that was not a failed guess: the password was
// right, or the check never ran. Releasing an attempt with nothing reserved does nothing. It
// need not succeed: a check never given back stops counting when its lease ends.
func (s *Store) ReleaseAttempt(ctx context.Context, a Attempt) error {
	if a.at == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, fmt.Sprintf(releaseAttempt, "$1", "$2"), a.key, *a.at)
	return wrap(err, "release sign-in attempt")
}

// FailedAttempt counts a reserved check whose password was checked and found wrong as a failed
// guess, for the limit's window from now, in place of its reservation. Counting an attempt with
// nothing reserved does nothing. The caller must not tell anyone that the password was wrong
// unless this returned nil: a wrong password that could not be counted is no answer at all.
func (s *Store) FailedAttempt(ctx context.Context, a Attempt) error {
	if a.at == nil {
		return nil
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO login_attempts AS a (key, attempts, admitted) VALUES ($1, ARRAY[now()], true)
		ON CONFLICT (key) DO UPDATE SET touched_at = now(),
			attempts = ARRAY(SELECT t FROM pg_catalog.unnest(a.attempts) t WHERE t > now() - $3::interval) OPERATOR(pg_catalog.||) now(),
			pending = CASE WHEN $2::timestamptz = ANY(a.pending) THEN
				a.pending[:pg_catalog.array_position(a.pending, $2::timestamptz) - 1]
					OPERATOR(pg_catalog.||) a.pending[pg_catalog.array_position(a.pending, $2::timestamptz) + 1:]
				ELSE a.pending END`,
		a.key, *a.at, a.window)
	return wrap(err, "count a failed sign-in attempt")
}
