package bench

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// scalePassword is every bulk-loaded person's password, hashed at bcrypt's minimum cost
// (the servers of the scale side run with that cost, so no sign-in rehashes it).
const scalePassword = "scale-password"

// scaleDB is one database of the scale side: its people, loaded in bulk, and who acts on them.
type scaleDB struct {
	name   string
	url    string
	people int            // bulk-loaded, named person-1…person-N
	admin  apitest.Person // an admin with an API key, created through the store
	st     *store.Store
	loaded time.Duration // how long the bulk load took, VACUUM ANALYZE included
	steps  string        // and how long each of its steps
	ids    []int64       // a random sample of the people's ids
	names  []string      // and their usernames
}

// scaleKey is the API key of the bulk-loaded person with id: what the load stores the SHA-256
// of, as the server stores a key it issues (64 lowercase hex digits).
func scaleKey(id int64) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "scale key %d", id))
	return hex.EncodeToString(sum[:])
}

// newScaleDB creates, migrates and claims a database and loads people into it, each with a
// password, an API key, a live session and two audit rows (their creation by the admin, their
// key's creation by themselves), the way a bulk load is fast: one INSERT … SELECT FROM
// generate_series a table, the tables after users in parallel, then VACUUM ANALYZE (so that
// the planner and index-only scans see what an install that has run for a while would).
func newScaleDB(tb testing.TB, ctx context.Context, c interface{ URL(string) string }, name string, people int) (*scaleDB, error) {
	tb.Helper()
	db := &scaleDB{name: name, people: people}
	var err error
	if db.url, db.st, db.admin, err = newClaimedDB(tb, ctx, c, name); err != nil {
		return nil, err
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(scalePassword), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	if err := db.load(ctx, string(hash)); err != nil {
		return nil, fmt.Errorf("load %d people into %s: %w", people, name, err)
	}
	db.loaded = time.Since(start)
	rows, err := db.st.Pool().Query(ctx, `SELECT id, username FROM users WHERE username LIKE 'person-%' ORDER BY random() LIMIT 1000`)
	if err != nil {
		return nil, err
	}
	var id int64
	var username string
	if _, err := pgx.ForEachRow(rows, []any{&id, &username}, func() error {
		db.ids, db.names = append(db.ids, id), append(db.names, username)
		return nil
	}); err != nil {
		return nil, err
	}
	if len(db.ids) == 0 {
		return nil, fmt.Errorf("%s: no person loaded", name)
	}
	return db, nil
}

// newClaimedDB creates and migrates the database name on the cluster c, claims the install and
// makes an admin with an API key, through the store, whose Store it returns.
func newClaimedDB(tb testing.TB, ctx context.Context, c interface{ URL(string) string }, name string) (
	url string, st *store.Store, admin apitest.Person, err error) {
	tb.Helper()
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", nil, admin, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, admin, fmt.Errorf("create database %s: %w", name, err)
	}
	url = c.URL(name)
	if _, err := store.Migrate(ctx, url); err != nil {
		return "", nil, admin, fmt.Errorf("migrate %s: %w", name, err)
	}
	st = apitest.OpenStore(tb, url)
	if _, err := st.Claim(ctx, store.AuditInfo{Actor: store.ActorOperator, RemoteAddr: "127.0.0.1"}); err != nil {
		return "", nil, admin, fmt.Errorf("claim %s: %w", name, err)
	}
	return url, st, apitest.MustPerson(tb, st, "scale-admin", store.RoleAdmin), nil
}

func (db *scaleDB) load(ctx context.Context, hash string) error {
	pool := db.st.Pool()
	// The gate's trigger (migration 00010) admits rows to users and sessions from a
	// transaction marked as this version's, which decides the gate itself.
	marked := func(sql string, args ...any) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT set_config('terdut.gate', 'checked', true)`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, sql, args...)
			return err
		})
	}
	start := time.Now()
	if err := marked(`INSERT INTO users (username, email, password_hash)
		SELECT 'person-' || i, 'person-' || i || '@example.test', $2 FROM generate_series(1, $1) i`, db.people, hash); err != nil {
		return fmt.Errorf("users: %w", err)
	}
	// The rows below are right by construction (each person's own, from users), so their
	// loads skip the per-row triggers: the foreign keys' checks and audit_events' insert
	// trigger, which sets at to now(), as the column's default does
	// (session_replication_role = replica, for these transactions only).
	bulk := func(sql string, args ...any) func() error {
		return func() error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, sql, args...)
				return err
			})
		}
	}
	const people = `FROM users WHERE username LIKE 'person-%'`
	loads := []func() error{
		bulk(`INSERT INTO api_keys (user_id, name, key_hash)
			SELECT id, 'laptop', sha256(convert_to(encode(sha256(convert_to('scale key ' || id, 'UTF8')), 'hex'), 'UTF8')) ` + people),
		bulk(`INSERT INTO sessions (user_id, token_hash, expires_at)
			SELECT id, sha256(convert_to('scale session ' || id, 'UTF8')), now() + interval '1 day' ` + people),
		bulk(`INSERT INTO audit_events (event, actor_kind, actor_id, actor_name, target_id, target_name)
			SELECT 'user.created', 'user', $1, $2, id, username `+people, db.admin.User.ID, db.admin.User.Username),
		bulk(`INSERT INTO audit_events (event, actor_kind, actor_id, actor_name, target_id, target_name)
			SELECT 'api_key.created', 'user', id, username, id, username ` + people),
	}
	usersDone := time.Now()
	if err := parallel(loads...); err != nil {
		return err
	}
	rowsDone := time.Now()
	_, err := pool.Exec(ctx, `VACUUM ANALYZE users, api_keys, sessions, audit_events`)
	if err == nil {
		// The load's writes reach the disk now, not during the first rounds.
		_, err = pool.Exec(ctx, `CHECKPOINT`)
	}
	db.steps = fmt.Sprintf("users %s, then keys, sessions and audit rows %s, VACUUM ANALYZE %s",
		usersDone.Sub(start).Round(100*time.Millisecond), rowsDone.Sub(usersDone).Round(100*time.Millisecond),
		time.Since(rowsDone).Round(100*time.Millisecond))
	return err
}

// parallel runs fs at once and returns the first error.
func parallel(fs ...func() error) error {
	errs := make([]error, len(fs))
	var wg sync.WaitGroup
	for i, f := range fs {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = f() }()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// expireSome marks n more rows for the sweep, untimed: n sessions of random people expired,
// and n new API keys of random people revoked. The tables keep their size over the rounds.
func (db *scaleDB) expireSome(ctx context.Context, n int) error {
	pool := db.st.Pool()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('terdut.gate', 'checked', true)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sessions (user_id, token_hash, expires_at)
			SELECT id, sha256(convert_to('expired ' || gen_random_uuid(), 'UTF8')), now() - interval '1 minute'
			FROM unnest($1::bigint[]) id`, db.sample(n)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO api_keys (user_id, name, key_hash, revoked_at)
			SELECT id, 'revoked', sha256(convert_to('revoked ' || gen_random_uuid(), 'UTF8')), now()
			FROM unnest($1::bigint[]) id`, db.sample(n))
		return err
	})
}

// sample returns n ids from the random sample of people, cycling through it.
func (db *scaleDB) sample(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = db.ids[i%len(db.ids)]
	}
	return out
}
