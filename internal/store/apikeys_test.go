package store_test

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

func TestAPIKeys_Create(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)

	t.Run("OK", func(t *testing.T) {
		k, secret, err := st.CreateAPIKey(ctx, alice.ID, "ci")
		if err != nil {
			t.Fatal(err)
		}
		if k.UserID != alice.ID || k.Name != "ci" || k.LastUsedAt != nil || len(secret) != 64 {
			t.Fatalf("got %+v with a %d-character secret, want alice's unused key ci with 64", k, len(secret))
		}
		var hash []byte
		if err := st.Pool().QueryRow(ctx, `SELECT key_hash FROM api_keys WHERE id = $1`, k.ID).Scan(&hash); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(secret))
		if string(hash) != string(sum[:]) {
			t.Fatalf("stored key_hash: got %x, want the SHA-256 of the key %x", hash, sum)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys k WHERE strpos(k::text, $1) > 0`, secret); n != 0 {
			t.Fatalf("rows holding the key in clear: got %d, want 0", n)
		}
		u, err := st.AuthenticateAPIKey(ctx, secret)
		if err != nil || u.ID != alice.ID {
			t.Fatalf("AuthenticateAPIKey: got %+v, %v, want alice", u, err)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, _, err := st.CreateAPIKey(ctx, 424242, "x"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("key for an unknown user: got %v, want %v", err, store.ErrNotFound)
		}
		if _, err := st.AuthenticateAPIKey(ctx, "0000000000000000000000000000000000000000000000000000000000000000"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown key: got %v, want %v", err, store.ErrNotFound)
		}
	})
}

func TestAPIKeys_Revoke(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)
	bob := mustUser(t, st, "bob", store.RoleMember)

	t.Run("OK", func(t *testing.T) {
		k, secret := mustKey(t, st, alice.ID)
		kept, _ := mustKey(t, st, alice.ID)
		if err := st.RevokeAPIKey(ctx, alice.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := st.AuthenticateAPIKey(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoked key: got %v, want %v", err, store.ErrNotFound)
		}
		keys, err := st.APIKeys(ctx, alice.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0].ID != kept.ID {
			t.Fatalf("alice's keys: got %+v, want only %d", keys, kept.ID)
		}
		if err := st.RevokeAPIKey(ctx, alice.ID, k.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("revoke again: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		k, secret := mustKey(t, st, bob.ID)
		// Naming someone else's key under your own id finds nothing and changes nothing.
		if err := st.RevokeAPIKey(ctx, alice.ID, k.ID); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another user's key: got %v, want %v", err, store.ErrNotFound)
		}
		if _, err := st.AuthenticateAPIKey(ctx, secret); err != nil {
			t.Fatalf("bob's key after alice tried to revoke it: got %v, want nil", err)
		}
		if err := st.RevokeAPIKey(ctx, alice.ID, 424242); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown key: got %v, want %v", err, store.ErrNotFound)
		}
	})
}

func TestAPIKeys_LastUsed(t *testing.T) {
	forEachStatementMode(t, testAPIKeysLastUsed)
}

func testAPIKeysLastUsed(t *testing.T, open opener) {
	ctx := context.Background()
	st := open(t, pgtest.MustDatabase(t))
	alice := mustUser(t, st, "alice", store.RoleMember)
	k, secret := mustKey(t, st, alice.ID)

	lastUsed := func(t *testing.T) *time.Time {
		t.Helper()
		var at *time.Time
		if err := st.Pool().QueryRow(ctx, `SELECT last_used_at FROM api_keys WHERE id = $1`, k.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	authenticate := func(t *testing.T) {
		t.Helper()
		if _, err := st.AuthenticateAPIKey(ctx, secret); err != nil {
			t.Fatal(err)
		}
	}

	authenticate(t)
	first := lastUsed(t)
	if first == nil {
		t.Fatalf("last_used_at after the first use: got nil, want a time")
	}
	for range 3 {
		authenticate(t)
	}
	if again := lastUsed(t); again == nil || !again.Equal(*first) {
		t.Fatalf("last_used_at after more uses within the window: got %v, want %v (unchanged)", again, first)
	}
	// Once the stored time is older than the window, the next use refreshes it.
	mustExec(t, st, `UPDATE api_keys SET last_used_at = now() - interval '1 hour' WHERE id = $1`, k.ID)
	stale := lastUsed(t)
	authenticate(t)
	if fresh := lastUsed(t); fresh == nil || !fresh.After(*stale) || !fresh.After(first.Add(-time.Second)) {
		t.Fatalf("last_used_at after a use past the window: got %v, want later than %v", fresh, stale)
	}

}

// TestAPIKeys_LastUsedWrites counts the writes that authentication makes, over two replicas
// (two stores, each with its own pool, on one database) using one key at once: none while
// last_used_at is fresh, and exactly one each time it has gone stale, however many requests
// on either replica find it stale together. A trigger counts every write to the key's row.
func TestAPIKeys_LastUsedWrites(t *testing.T) {
	forEachStatementMode(t, testAPIKeysLastUsedWrites)
}

func testAPIKeysLastUsedWrites(t *testing.T, open opener) {
	ctx := context.Background()
	url := pgtest.MustDatabase(t)
	replicas := []*store.Store{open(t, url), open(t, url)}
	st := replicas[0]
	alice := mustUser(t, st, "alice", store.RoleMember)
	k, secret := mustKey(t, st, alice.ID)
	mustExec(t, st, `CREATE TABLE key_writes (at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	mustExec(t, st, `CREATE FUNCTION count_key_write() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN INSERT INTO key_writes DEFAULT VALUES; RETURN NEW; END $$`)
	mustExec(t, st, `CREATE TRIGGER count_key_write AFTER UPDATE ON api_keys FOR EACH ROW
		EXECUTE FUNCTION count_key_write()`)
	writes := func() int { return mustCount(t, st, `SELECT count(*) FROM key_writes`) }

	// useAtOnce authenticates perReplica times on each replica, all released together.
	const perReplica = 8
	useAtOnce := func(t *testing.T) {
		t.Helper()
		start := make(chan struct{})
		errs := make(chan error, perReplica*len(replicas))
		var wg sync.WaitGroup
		for _, r := range replicas {
			for range perReplica {
				wg.Go(func() {
					<-start
					u, err := r.AuthenticateAPIKey(ctx, secret)
					if err == nil && u.ID != alice.ID {
						err = fmt.Errorf("got user %d, want alice (%d)", u.ID, alice.ID)
					}
					errs <- err
				})
			}
		}
		close(start)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("AuthenticateAPIKey: %v", err)
			}
		}
	}

	const rounds = 20
	for round := range rounds {
		// Stale (never used in round 0, an hour old after): the uses write once between them.
		useAtOnce(t)
		if got := writes(); got != 1 {
			t.Fatalf("round %d: writes by %d uses of a stale key on 2 replicas: got %d, want 1", round, perReplica*2, got)
		}
		var fresh bool
		if err := st.Pool().QueryRow(ctx, `SELECT last_used_at > now() - interval '25 seconds' FROM api_keys
			WHERE id = $1`, k.ID).Scan(&fresh); err != nil || !fresh {
			t.Fatalf("round %d: last_used_at refreshed: got %v (%v), want true", round, fresh, err)
		}
		// Fresh: further uses on either replica write nothing.
		useAtOnce(t)
		useAtOnce(t)
		if got := writes(); got != 1 {
			t.Fatalf("round %d: writes after more uses of a fresh key: got %d, want still 1", round, got)
		}
		mustExec(t, st, `UPDATE api_keys SET last_used_at = now() - interval '1 hour' WHERE id = $1`, k.ID)
		mustExec(t, st, `TRUNCATE key_writes`)
	}
}

// TestAPIKeys_AuthenticateReturnsTheUser: the API-key lookup has a statement of its own, the
// hottest one (and, where pgx caches no statement, a function: api_key_owner); the user it
// returns is field for field the one User returns, for a person with and without a password
// or an OIDC identity, an admin and the service principal; a revoked, an expired and an
// unknown key, and a deleted person's, find nobody.
func TestAPIKeys_AuthenticateReturnsTheUser(t *testing.T) {
	forEachStatementMode(t, testAPIKeysAuthenticateReturnsTheUser)
}

func testAPIKeysAuthenticateReturnsTheUser(t *testing.T, open opener) {
	ctx := context.Background()
	st := open(t, pgtest.MustDatabase(t))
	plain := mustUser(t, st, "plain", store.RoleMember)
	withPassword := mustUser(t, st, "withpassword", store.RoleAdmin)
	if err := st.SetPasswordHash(ctx, withPassword.ID, "$2a$04$notarealhashbutstoredasone", ""); err != nil {
		t.Fatal(err)
	}
	sso := mustSSOUser(t, st, "sso-subject", store.RoleAdmin)
	principal := mustClaim(t, st).Principal
	for _, u := range []store.User{plain, withPassword, sso, principal} {
		want, err := st.User(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, secret := mustKey(t, st, u.ID)
		for range 2 { // never used, then used
			got, err := st.AuthenticateAPIKey(ctx, secret)
			if err != nil {
				t.Fatalf("%s: %v", u.Username, err)
			}
			if got != want {
				t.Fatalf("%s: AuthenticateAPIKey returned\n%+v\nUser returns\n%+v", u.Username, got, want)
			}
		}
	}
	if sso.OIDCIssuer == "" || sso.OIDCSubject == "" || plain.OIDCSubject != "" {
		t.Fatalf("the SSO user has no identity (%q, %q), or the plain one has (%q)", sso.OIDCIssuer, sso.OIDCSubject, plain.OIDCSubject)
	}

	revoked, revokedSecret := mustKey(t, st, plain.ID)
	if err := st.RevokeAPIKey(ctx, plain.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	expired, expiredSecret := mustKey(t, st, plain.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, expired.ID)
	future, futureSecret := mustKey(t, st, plain.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() + interval '1 hour' WHERE id = $1`, future.ID)
	gone := mustUser(t, st, "gone", store.RoleMember)
	_, goneSecret := mustKey(t, st, gone.ID)
	if err := st.DeleteUser(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	for name, secret := range map[string]string{"revoked": revokedSecret, "expired": expiredSecret, "deleted person's": goneSecret,
		"unknown": strings.Repeat("0", 64)} {
		if u, err := st.AuthenticateAPIKey(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("%s key: got %+v, %v, want %v", name, u, err, store.ErrNotFound)
		}
	}
	if u, err := st.AuthenticateAPIKey(ctx, futureSecret); err != nil || u.ID != plain.ID {
		t.Fatalf("a key that expires in an hour: got %+v, %v, want plain", u, err)
	}
}

// TestAPIKeys_LookupFormsAgree holds the two forms of the API-key lookup, the statement and
// the function api_key_owner, to the same answer for a key at the edges of last_used_at's
// 30-second window (29.999 s and 30.001 s old, and never used) and for a revoked and an
// expired key: each case set and read in one transaction, where now() stands still.
func TestAPIKeys_LookupFormsAgree(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)
	k, secret := mustKey(t, st, alice.ID)
	sum := sha256.Sum256([]byte(secret))
	for _, c := range []struct {
		name, set string
		found     bool
		stale     *bool
	}{
		{"used 29.999 s ago", `last_used_at = now() - interval '29.999 seconds'`, true, new(false)},
		{"used 30.001 s ago", `last_used_at = now() - interval '30.001 seconds'`, true, new(true)},
		{"never used", `last_used_at = NULL`, true, nil},
		{"revoked", `revoked_at = now()`, false, nil},
		{"expired", `revoked_at = NULL, expires_at = now()`, false, nil},
		{"expiring", `expires_at = now() + interval '1 microsecond'`, true, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := st.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, `UPDATE api_keys SET `+c.set+` WHERE id = $1`, k.ID); err != nil {
				t.Fatal(err)
			}
			var answers []string
			for _, sql := range []string{store.AuthenticateAPIKeySQL, store.APIKeyOwnerSQL} {
				var stale *bool
				var id int64
				var rest [8]any
				err := tx.QueryRow(ctx, sql, sum[:]).Scan(append([]any{&stale, &id}, rest[:]...)...)
				switch {
				case errors.Is(err, pgx.ErrNoRows):
					if c.found {
						t.Fatalf("%s: found nothing, want alice", sql)
					}
					answers = append(answers, "none")
				case err != nil:
					t.Fatalf("%s: %v", sql, err)
				default:
					if !c.found || id != alice.ID || (stale == nil) != (c.stale == nil) || (stale != nil && *stale != *c.stale) {
						t.Fatalf("%s: found %d (stale %v), want found %v with stale %v", sql, id, stale, c.found, c.stale)
					}
					answers = append(answers, fmt.Sprintf("%d %v %v", id, stale != nil, stale != nil && *stale))
				}
			}
			if answers[0] != answers[1] {
				t.Fatalf("the statement answered %s, the function %s", answers[0], answers[1])
			}
		})
	}
}

// opener opens a store on the database at url, closed when tb ends.
type opener func(tb testing.TB, url string) *store.Store

// forEachStatementMode runs test once for each way the store may send its statements: pgx's
// default (statements prepared and cached: the API-key lookup is authenticateAPIKeySQL),
// behind a transaction-mode pooler (simple_protocol), and the URL's exec and cache_describe
// (in these three the lookup calls api_key_owner). Both forms of the lookup must answer alike.
func forEachStatementMode(t *testing.T, test func(t *testing.T, open opener)) {
	modes := []struct {
		name string
		mode string // default_query_exec_mode in the URL; "" for none
		opts []store.Option
	}{
		{name: "default"},
		{name: "pooler=transaction", opts: []store.Option{store.WithPooler(store.PoolerTransaction)}},
		{name: "exec", mode: "exec"},
		{name: "cache_describe", mode: "cache_describe"},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			test(t, func(tb testing.TB, dbURL string) *store.Store {
				tb.Helper()
				if m.mode != "" {
					u, err := url.Parse(dbURL)
					if err != nil {
						tb.Fatal(err)
					}
					q := u.Query()
					q.Set("default_query_exec_mode", m.mode)
					u.RawQuery = q.Encode()
					dbURL = u.String()
				}
				st, err := store.Open(context.Background(), dbURL, m.opts...)
				if err != nil {
					tb.Fatalf("open store (%s): %v", m.name, err)
				}
				tb.Cleanup(st.Close)
				return st
			})
		})
	}
}

// TestAPIKeys_AuthenticateConcurrent authenticates the keys of people unlike each other (SSO or
// not, a password or none) from many goroutines at once, each call's answer held to its own
// person: AuthenticateAPIKey scans into rows it reuses (apiKeyRow), and a row two calls
// shared would answer one of them with someone else's.
func TestAPIKeys_AuthenticateConcurrent(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	withPassword := mustUser(t, st, "withpassword", store.RoleAdmin)
	if err := st.SetPasswordHash(ctx, withPassword.ID, "$2a$04$notarealhashbutstoredasone", ""); err != nil {
		t.Fatal(err)
	}
	people := []store.User{mustUser(t, st, "plain", store.RoleMember), withPassword,
		mustSSOUser(t, st, "sso-subject", store.RoleAdmin)}
	type key struct {
		secret string
		want   store.User
	}
	var keys []key
	for _, u := range people {
		want, err := st.User(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		_, secret := mustKey(t, st, u.ID)
		keys = append(keys, key{secret, want})
	}
	unknown := fmt.Sprintf("%064x", 1)
	var wg sync.WaitGroup
	for g := range 12 {
		wg.Go(func() {
			for i := range 150 {
				if (g+i)%7 == 0 {
					if _, err := st.AuthenticateAPIKey(ctx, unknown); !errors.Is(err, store.ErrNotFound) {
						t.Errorf("an unknown key: %v, want ErrNotFound", err)
						return
					}
					continue
				}
				k := keys[(g+i)%len(keys)]
				got, err := st.AuthenticateAPIKey(ctx, k.secret)
				if err != nil {
					t.Error(err)
					return
				}
				if got != k.want {
					t.Errorf("AuthenticateAPIKey returned\n%+v\nfor the key of\n%+v", got, k.want)
					return
				}
			}
		})
	}
	wg.Wait()
}
