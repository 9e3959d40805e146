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

// mustDeadSessions inserts n sessions of the user, revoked when revoked, else expired.
func mustDeadSessions(tb testing.TB, st *store.Store, userID int64, n int, revoked bool, tag string) {
	tb.Helper()
	mustExecMarked(tb, st, `INSERT INTO sessions (user_id, token_hash, expires_at, revoked_at)
		SELECT $1, sha256(($4 || g)::bytea),
			CASE WHEN $3 THEN now() + interval '1 hour' ELSE now() - interval '1 second' END,
			CASE WHEN $3 THEN now() END
		FROM generate_series(1, $2) g`, userID, n, revoked, tag)
}

func TestSweep(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)

	live, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOff)
	if err != nil {
		t.Fatal(err)
	}
	mustDeadSessions(t, st, alice.ID, 3, true, "revoked")
	mustDeadSessions(t, st, alice.ID, 2, false, "expired")

	_, liveKey := mustKey(t, st, alice.ID)
	revoked, _ := mustKey(t, st, alice.ID)
	if err := st.RevokeAPIKey(ctx, alice.ID, revoked.ID); err != nil {
		t.Fatal(err)
	}
	lately, _ := mustKey(t, st, alice.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() - interval '1 day' WHERE id = $1`, lately.ID)
	long, _ := mustKey(t, st, alice.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() - $2::interval - interval '1 minute' WHERE id = $1`,
		long.ID, store.ExpiredKeyRetention)

	for _, state := range []string{"state-a", "state-b", "state-c"} {
		if _, err := st.SaveOIDCLogin(ctx, state, store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, store.GateOff, 0); err != nil {
			t.Fatal(err)
		}
	}
	mustExec(t, st, `UPDATE oidc_logins SET expires_at = now() - interval '1 second'
		WHERE state_hash IN (SELECT state_hash FROM oidc_logins LIMIT 2)`)

	// Three set-password links, one of them expired.
	var linked []store.User
	for _, name := range []string{"lee", "lou", "lin"} {
		u := mustUser(t, st, name, store.RoleMember)
		if _, err := st.IssuePasswordLink(ctx, u.ID, store.Caller{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		linked = append(linked, u)
	}
	mustExec(t, st, `UPDATE password_links SET expires_at = now() - interval '1 second' WHERE user_id = $1`, linked[0].ID)

	const loginWindow = 15 * time.Minute
	for _, name := range []string{"mallory", "bob", "carol"} {
		if _, _, _, err := st.UserForSignIn(ctx, name, store.GateOff, store.RateLimit{Max: 10, Window: loginWindow}); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	// Two usernames nobody tried within the window, one tried a minute before it ends.
	mustExec(t, st, `UPDATE login_attempts SET touched_at = now() - $1::interval - interval '1 second',
		attempts = ARRAY[now() - $1::interval - interval '1 second']
		WHERE key IN (SELECT key FROM login_attempts ORDER BY key LIMIT 2)`, loginWindow)
	mustExec(t, st, `UPDATE login_attempts SET touched_at = now() - $1::interval + interval '1 minute',
		attempts = ARRAY[now() - $1::interval + interval '1 minute']
		WHERE key = (SELECT key FROM login_attempts ORDER BY key DESC LIMIT 1)`, loginWindow)

	res, err := st.Sweep(ctx, loginWindow)
	if want := (store.SweepResult{Sessions: 5, APIKeys: 2, OIDCLogins: 2, LoginAttempts: 2, PasswordLinks: 1}); err != nil || res != want {
		t.Fatalf("got %+v, %v, want %+v", res, err, want)
	}
	if u, err := st.AuthenticateSession(ctx, live.Token); err != nil || u.ID != alice.ID {
		t.Errorf("the live session after the sweep: got %+v, %v, want alice", u, err)
	}
	if u, err := st.AuthenticateAPIKey(ctx, liveKey); err != nil || u.ID != alice.ID {
		t.Errorf("the live key after the sweep: got %+v, %v, want alice", u, err)
	}
	keys, err := st.APIKeys(ctx, alice.ID)
	if err != nil || len(keys) != 2 || keys[1].ID != lately.ID {
		t.Errorf("keys listed after the sweep: got %+v, %v, want the live key and the one expired yesterday", keys, err)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM sessions`); n != 1 {
		t.Errorf("sessions left: got %d, want 1", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM oidc_logins`); n != 1 {
		t.Errorf("sign-ins left: got %d, want 1", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM login_attempts`); n != 1 {
		t.Errorf("guessing counts left: got %d, want 1 (the username tried within the window)", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM password_links WHERE user_id <> $1 AND expires_at > now()`, linked[0].ID); n != 2 {
		t.Errorf("live set-password links left: got %d, want 2", n)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM password_links`); n != 2 {
		t.Errorf("set-password links left: got %d, want 2 (the live ones)", n)
	}
	if res, err := st.Sweep(ctx, loginWindow); err != nil || res != (store.SweepResult{}) {
		t.Errorf("a second sweep: got %+v, %v, want nothing swept", res, err)
	}
}

// TestSweep_Replicas sweeps from two replicas at once, over more rows than one batch: neither
// fails or waits on the other, and every dead row is deleted exactly once.
func TestSweep_Replicas(t *testing.T) {
	ctx := context.Background()
	url := pgtest.MustDatabase(t)
	a, b := mustOpen(t, url), mustOpen(t, url)
	alice := mustUser(t, a, "alice", store.RoleMember)
	const rounds, dead = 3, 12000
	for round := range rounds {
		mustDeadSessions(t, a, alice.ID, dead/2, true, "revoked-"+string(rune('a'+round)))
		mustDeadSessions(t, a, alice.ID, dead/2, false, "expired-"+string(rune('a'+round)))
		var wg sync.WaitGroup
		results := make([]store.SweepResult, 2)
		errs := make([]error, 2)
		for i, st := range []*store.Store{a, b} {
			wg.Go(func() { results[i], errs[i] = st.Sweep(ctx, 15*time.Minute) })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: got errors %v and %v, want none", round, errs[0], errs[1])
		}
		if got := results[0].Sessions + results[1].Sessions; got != dead {
			t.Fatalf("round %d: sessions swept by both: got %d (%d + %d), want %d", round, got,
				results[0].Sessions, results[1].Sessions, dead)
		}
		if n := mustCount(t, a, `SELECT count(*) FROM sessions`); n != 0 {
			t.Fatalf("round %d: sessions left: got %d, want 0", round, n)
		}
	}
}

func TestCapSSOAPIKeys(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	sso := mustSSOUser(t, st, "sso-sam", store.RoleMember)
	pw := mustUser(t, st, "alice", store.RoleMember)
	never, _ := mustKey(t, st, sso.ID)
	late, _ := mustKey(t, st, sso.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() + interval '1 year' WHERE id = $1`, late.ID)
	early, _ := mustKey(t, st, sso.ID)
	mustExec(t, st, `UPDATE api_keys SET expires_at = now() + interval '1 hour' WHERE id = $1`, early.ID)
	pwKey, _ := mustKey(t, st, pw.ID)

	n, err := st.CapSSOAPIKeys(ctx, 24*time.Hour)
	if err != nil || n != 2 {
		t.Fatalf("got %d, %v, want 2 keys capped", n, err)
	}
	expiresIn := func(id int64) *time.Duration {
		var d *time.Duration
		if err := st.Pool().QueryRow(ctx, `SELECT expires_at - now() FROM api_keys WHERE id = $1`, id).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	for _, k := range []store.APIKey{never, late} {
		if d := expiresIn(k.ID); d == nil || *d > 24*time.Hour || *d < 23*time.Hour {
			t.Errorf("key %d: got expiry in %v, want in 24h", k.ID, d)
		}
	}
	if d := expiresIn(early.ID); d == nil || *d > time.Hour {
		t.Errorf("the key expiring within the cap: got expiry in %v, want unchanged (1h)", d)
	}
	if d := expiresIn(pwKey.ID); d != nil {
		t.Errorf("a password user's key: got expiry in %v, want none", *d)
	}
	if n, err := st.CapSSOAPIKeys(ctx, 24*time.Hour); err != nil || n != 0 {
		t.Errorf("again: got %d, %v, want nothing to cap", n, err)
	}
}
