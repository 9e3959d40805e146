package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// mustSSOUser signs a person in through single sign-on, as the callback does, and returns them.
func mustSSOUser(tb testing.TB, st *store.Store, subject string, role store.Role) store.User {
	tb.Helper()
	id := ssoIdentity(subject)
	id.Role = role
	u, _, _, err := splitSSO(st.SignInSSO(context.Background(), id, time.Hour, store.GateOff))
	if err != nil {
		tb.Fatalf("sign in %s: %v", subject, err)
	}
	return u
}

func TestAPIKeys_Issue(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	alice := mustUser(t, st, "alice", store.RoleMember)
	sso := mustSSOUser(t, st, "sso-sam", store.RoleMember)

	t.Run("Expiry", func(t *testing.T) {
		at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
		k, secret, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: alice.ID, Name: "ci", ExpiresAt: &at}, store.APIKeyLimits{})
		if err != nil || k.ExpiresAt == nil || !k.ExpiresAt.Equal(at) {
			t.Fatalf("got %+v, %v, want a key expiring at %v", k, err, at)
		}
		if u, err := st.AuthenticateAPIKey(ctx, secret); err != nil || u.ID != alice.ID {
			t.Fatalf("before it expires: got %+v, %v, want alice", u, err)
		}
		mustExec(t, st, `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID)
		if _, err := st.AuthenticateAPIKey(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("after it expired: got %v, want %v", err, store.ErrNotFound)
		}
		never, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: alice.ID, Name: "forever"}, store.APIKeyLimits{SSOMaxTTL: time.Hour})
		if err != nil || never.ExpiresAt != nil {
			t.Fatalf("a password user's key without expiry: got %+v, %v, want none", never, err)
		}
	})

	t.Run("SSOMaxTTL", func(t *testing.T) {
		lim := store.APIKeyLimits{SSOMaxTTL: 24 * time.Hour}
		before := time.Now()
		k, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sso.ID, Name: "default"}, lim)
		if err != nil || k.ExpiresAt == nil || k.ExpiresAt.Sub(before) < 23*time.Hour || k.ExpiresAt.Sub(before) > 25*time.Hour {
			t.Fatalf("an SSO key without expiry: got %+v, %v, want one expiring in 24h", k, err)
		}
		soon := time.Now().Add(time.Hour)
		if k, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sso.ID, Name: "soon", ExpiresAt: &soon}, lim); err != nil ||
			k.ExpiresAt == nil || k.ExpiresAt.Sub(soon).Abs() > time.Millisecond {
			t.Fatalf("an SSO key within the cap: got %+v, %v, want it expiring at %v", k, err, soon)
		}
		keys := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1`, sso.ID)
		late := time.Now().Add(25 * time.Hour)
		if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: sso.ID, Name: "late", ExpiresAt: &late}, lim); !errors.Is(err, store.ErrExpiryTooLate) {
			t.Fatalf("an SSO key past the cap: got %v, want %v", err, store.ErrExpiryTooLate)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1`, sso.ID); n != keys {
			t.Fatalf("keys after a refused one: got %d, want %d", n, keys)
		}
		if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: alice.ID, Name: "late", ExpiresAt: &late}, lim); err != nil {
			t.Fatalf("a password user's key past the SSO cap: got %v, want none", err)
		}
	})

	t.Run("PerUser", func(t *testing.T) {
		bob := mustUser(t, st, "bob", store.RoleMember)
		lim := store.APIKeyLimits{PerUser: 3}
		var first store.APIKey
		for i := range 3 {
			k, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: bob.ID, Name: "k"}, lim)
			if err != nil {
				t.Fatalf("key %d of 3: %v", i+1, err)
			}
			if i == 0 {
				first = k
			}
		}
		if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: bob.ID, Name: "k"}, lim); !errors.Is(err, store.ErrTooManyAPIKeys) {
			t.Fatalf("a 4th key: got %v, want %v", err, store.ErrTooManyAPIKeys)
		}
		// Revoked and expired keys free their place.
		if err := st.RevokeAPIKey(ctx, bob.ID, first.ID); err != nil {
			t.Fatal(err)
		}
		k, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: bob.ID, Name: "k"}, lim)
		if err != nil {
			t.Fatalf("a key after revoking one: %v", err)
		}
		mustExec(t, st, `UPDATE api_keys SET expires_at = now() - interval '1 second' WHERE id = $1`, k.ID)
		if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: bob.ID, Name: "k"}, lim); err != nil {
			t.Fatalf("a key after one expired: %v", err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1 AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())`, bob.ID); n != 3 {
			t.Fatalf("bob's live keys: got %d, want 3", n)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, _, err := st.IssueAPIKey(ctx, store.NewAPIKey{UserID: 424242, Name: "x"}, store.APIKeyLimits{PerUser: 1}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("got %v, want %v", err, store.ErrNotFound)
		}
	})
}
