package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestAPIKeys_IssueChecksTheCaller: IssueAPIKey takes the caller's credential again under the
// user's lock, and refuses machine users whoever asks.
func TestAPIKeys_IssueChecksTheCaller(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)
	issue := func(by store.Caller) error {
		_, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: alice.ID, Name: "k", By: by}, store.APIKeyLimits{})
		return err
	}

	t.Run("LiveKey", func(t *testing.T) {
		_, secret := mustKey(t, st, alice.ID)
		if err := issue(store.Caller{UserID: alice.ID, APIKey: secret}); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	})
	t.Run("RevokedKey", func(t *testing.T) {
		k, secret := mustKey(t, st, alice.ID)
		if err := st.RevokeAPIKey(ctx, alice.ID, k.ID); err != nil {
			t.Fatal(err)
		}
		if err := issue(store.Caller{UserID: alice.ID, APIKey: secret}); !errors.Is(err, store.ErrCallerRevoked) {
			t.Fatalf("got %v, want %v", err, store.ErrCallerRevoked)
		}
	})
	t.Run("ExpiredKey", func(t *testing.T) {
		k, secret := mustKey(t, st, alice.ID)
		mustExec(t, st, `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID)
		if err := issue(store.Caller{UserID: alice.ID, APIKey: secret}); !errors.Is(err, store.ErrCallerRevoked) {
			t.Fatalf("got %v, want %v", err, store.ErrCallerRevoked)
		}
	})
	t.Run("AnotherUsersKey", func(t *testing.T) {
		bob := mustUser(t, st, "bob", store.RoleMember)
		_, secret := mustKey(t, st, bob.ID)
		if err := issue(store.Caller{UserID: alice.ID, APIKey: secret}); !errors.Is(err, store.ErrCallerRevoked) {
			t.Fatalf("alice's request with bob's key: got %v, want %v", err, store.ErrCallerRevoked)
		}
	})
	t.Run("Session", func(t *testing.T) {
		sess, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOff)
		if err != nil {
			t.Fatal(err)
		}
		by := store.Caller{UserID: alice.ID, Session: sess.Token, SignedInWithin: 10 * time.Minute}
		if err := issue(by); !errors.Is(err, store.ErrSignInTooOld) {
			t.Fatalf("a new session with no time of authentication at the provider: got %v, want %v", err, store.ErrSignInTooOld)
		}
		mustExec(t, st, `UPDATE sessions SET authenticated_at = now() - interval '1 minute' WHERE user_id = $1`, alice.ID)
		if err := issue(by); err != nil {
			t.Fatalf("an authentication of a minute ago: got %v, want nil", err)
		}
		mustExec(t, st, `UPDATE sessions SET authenticated_at = now() - interval '11 minutes' WHERE user_id = $1`, alice.ID)
		if err := issue(by); !errors.Is(err, store.ErrSignInTooOld) {
			t.Fatalf("an authentication of 11 minutes ago, in a new session: got %v, want %v", err, store.ErrSignInTooOld)
		}
		by.SignedInWithin = 0
		if err := issue(by); err != nil {
			t.Fatalf("the same with no window: got %v, want nil", err)
		}
		if err := st.EndSession(ctx, sess.Token); err != nil {
			t.Fatal(err)
		}
		if err := issue(by); !errors.Is(err, store.ErrCallerRevoked) {
			t.Fatalf("an ended session: got %v, want %v", err, store.ErrCallerRevoked)
		}
	})
	t.Run("ErrServiceUserKey", func(t *testing.T) {
		claim := mustClaim(t, st)
		before := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1`, claim.Principal.ID)
		for name, by := range map[string]store.Caller{
			"ItsOwnKey": {UserID: claim.Principal.ID, APIKey: claim.Secret},
			"NoCaller":  {},
		} {
			_, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: claim.Principal.ID, Name: "mine", By: by}, store.APIKeyLimits{})
			if !errors.Is(err, store.ErrServiceUserKey) {
				t.Errorf("%s: got %v, want %v", name, err, store.ErrServiceUserKey)
			}
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1`, claim.Principal.ID); n != before {
			t.Errorf("the principal's keys: got %d, want %d", n, before)
		}
	})
}

// TestAPIKeys_SSOCapFromLastSignIn: a single sign-on person's key expires at most SSOMaxTTL
// after their last single sign-on, not after its own making, so that minting keys from keys
// cannot outlast it; a new sign-in moves the bound.
func TestAPIKeys_SSOCapFromLastSignIn(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	sam := mustSSOUser(t, st, "sso-sam", store.RoleMember)
	lim := store.APIKeyLimits{SSOMaxTTL: 24 * time.Hour}
	lastSignIn := func() time.Time {
		var at time.Time
		if err := st.Pool().QueryRow(ctx, `SELECT last_sso_at FROM users WHERE id = $1`, sam.ID).Scan(&at); err != nil {
			t.Fatal(err)
		}
		return at
	}
	mustExec(t, st, `UPDATE users SET last_sso_at = now() - interval '20 hours' WHERE id = $1`, sam.ID)
	signedIn := lastSignIn()

	k, secret, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sam.ID, Name: "first"}, lim)
	if err != nil || k.ExpiresAt == nil || !k.ExpiresAt.Equal(signedIn.Add(24*time.Hour)) {
		t.Fatalf("a key 20h after the sign-in: got %+v, %v, want it expiring at %v", k, err, signedIn.Add(24*time.Hour))
	}
	// A key made with that key, as a person the provider dropped would rotate them.
	k2, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sam.ID, Name: "rotated", By: store.Caller{UserID: sam.ID, APIKey: secret}}, lim)
	if err != nil || k2.ExpiresAt == nil || k2.ExpiresAt.After(*k.ExpiresAt) {
		t.Fatalf("a key made from the first: got %+v, %v, want it expiring by %v", k2, err, k.ExpiresAt)
	}
	late := time.Now().Add(5 * time.Hour)
	if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sam.ID, Name: "late", ExpiresAt: &late}, lim); !errors.Is(err, store.ErrExpiryTooLate) {
		t.Fatalf("an expiry 5h from now, 25h after the sign-in: got %v, want %v", err, store.ErrExpiryTooLate)
	}

	mustExec(t, st, `UPDATE users SET last_sso_at = now() - interval '25 hours' WHERE id = $1`, sam.ID)
	if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sam.ID, Name: "stale"}, lim); !errors.Is(err, store.ErrSSOSignInTooOld) {
		t.Fatalf("25h after the sign-in: got %v, want %v", err, store.ErrSSOSignInTooOld)
	}

	// Signing in again extends what new keys may get.
	mustSSOUser(t, st, "sso-sam", store.RoleMember)
	if d := time.Since(lastSignIn()); d < 0 || d > time.Minute {
		t.Fatalf("last_sso_at after a new sign-in: %v ago, want now", d)
	}
	if k, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sam.ID, Name: "late", ExpiresAt: &late}, lim); err != nil ||
		!k.ExpiresAt.Equal(late.Truncate(time.Microsecond)) {
		t.Fatalf("an expiry 5h from now after a new sign-in: got %+v, %v, want it", k, err)
	}
}

// TestCapSSOAPIKeys_FromLastSignIn: the sweep brings keys within SSOMaxTTL of the last single
// sign-on, also keys made before the sign-ins were recorded; a person created by an older
// replica, with no sign-in recorded, counts from their creation.
func TestCapSSOAPIKeys_FromLastSignIn(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	sam := mustSSOUser(t, st, "sso-sam", store.RoleMember)
	old := mustSSOUser(t, st, "sso-old", store.RoleMember)
	mustExec(t, st, `UPDATE users SET last_sso_at = now() - interval '30 hours' WHERE id = $1`, sam.ID)
	mustExec(t, st, `UPDATE users SET last_sso_at = NULL, created_at = now() - interval '2 hours' WHERE id = $1`, old.ID)
	stale, secret := mustKey(t, st, sam.ID)
	older, _ := mustKey(t, st, old.ID)
	n, err := st.CapSSOAPIKeys(ctx, 24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("got %d, %v, want 2 keys capped", n, err)
	}
	if _, err := st.AuthenticateAPIKey(ctx, secret); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a key of a person last signed in 30h ago, cap 24h: got %v, want %v", err, store.ErrNotFound)
	}
	for id, want := range map[int64]time.Duration{stale.ID: -6 * time.Hour, older.ID: 22 * time.Hour} {
		var d time.Duration
		if err := st.Pool().QueryRow(ctx, `SELECT expires_at - now() FROM api_keys WHERE id = $1`, id).Scan(&d); err != nil {
			t.Fatal(err)
		}
		if (d - want).Abs() > time.Minute {
			t.Errorf("key %d: expires in %v, want %v", id, d, want)
		}
	}
	if n, err := st.CapSSOAPIKeys(ctx, 24*time.Hour); err != nil || n != 0 {
		t.Errorf("again: got %d, %v, want nothing to cap", n, err)
	}
}

// TestChangePassword_RevokeAPIKeysRacesMinting: keys minted, each with the newest key held,
// while the password changes with RevokeAPIKeys: once the change returns, none is live, as the
// change locks the row before it revokes and each mint checks its key again under that lock.
func TestChangePassword_RevokeAPIKeysRacesMinting(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	var minted, survivors int
	for round := range 20 {
		u := mustUser(t, st, "pat-"+string(rune('a'+round)), store.RoleMember)
		_, leaked := mustKey(t, st, u.ID)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 6 {
			wg.Go(func() {
				newest := leaked
				for {
					select {
					case <-stop:
						return
					default:
					}
					_, secret, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: u.ID, Name: "minted",
						By: store.Caller{UserID: u.ID, APIKey: newest}}, store.APIKeyLimits{})
					if err == nil {
						newest = secret
						mu.Lock()
						minted++
						mu.Unlock()
					} else if !errors.Is(err, store.ErrCallerRevoked) {
						t.Errorf("mint: got %v, want nil or %v", err, store.ErrCallerRevoked)
						return
					}
				}
			})
		}
		time.Sleep(5 * time.Millisecond)
		revoked, err := st.ChangePassword(ctx, store.PasswordChange{UserID: u.ID, Hash: "new-hash", RevokeAPIKeys: true})
		if err != nil || revoked == 0 {
			t.Fatalf("round %d: change: got %d, %v, want some keys revoked", round, revoked, err)
		}
		live := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL`, u.ID)
		close(stop)
		wg.Wait()
		survivors += live
		if live != 0 {
			t.Errorf("round %d: live keys once the change returned: got %d, want 0", round, live)
		}
	}
	t.Logf("%d keys minted over 20 rounds, %d outlived the password change", minted, survivors)
	if minted == 0 {
		t.Errorf("keys minted: got 0, want some: nothing raced the change")
	}
}

// TestMigrate_LastSSOBackfill: at the upgrade, single sign-on people get the upgrade as their
// last sign-in (their keys all expire before it plus the cap already), others none; the Down
// migration takes the column away.
func TestMigrate_LastSSOBackfill(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustEmptyDatabase(t)
	p := mustGoose(t, url)
	mustMigrateTo(t, p, 7)
	st := mustOpen(t, url)
	mustExec(t, st, `INSERT INTO users (username, oidc_issuer, oidc_subject, created_at)
		VALUES ('sso', 'https://idp.example.test', 'sub-1', now() - interval '1 year')`)
	mustExec(t, st, `INSERT INTO users (username, password_hash) VALUES ('pw', 'hash')`)
	mustMigrateTo(t, p, 8)
	if n := mustCount(t, st, `SELECT count(*) FROM users
		WHERE username = 'sso' AND last_sso_at BETWEEN now() - interval '1 minute' AND now()`); n != 1 {
		t.Errorf("the SSO person's last_sso_at after the upgrade: got %d rows at the upgrade, want 1", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM users WHERE username = 'pw' AND last_sso_at IS NULL`); n != 1 {
		t.Errorf("the password user's last_sso_at after the upgrade: got %d rows NULL, want 1", n)
	}
	if _, err := p.DownTo(ctx, 7); err != nil {
		t.Fatalf("down to 7: %v", err)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM information_schema.columns
		WHERE table_name = 'users' AND column_name = 'last_sso_at'`); n != 0 {
		t.Errorf("last_sso_at after down: got %d columns, want 0", n)
	}
}
