package client_test

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// mustReconcile runs one reconcile and checks what it did.
func mustReconcile(t *testing.T, c *client.Client, heldKey string, want client.Action, wantGen int64) client.ReconcileResult {
	t.Helper()
	res, err := c.Reconcile(t.Context(), heldKey)
	if err != nil {
		t.Fatalf("reconcile: got %v, want %s", err, want)
	}
	if res.Action != want || res.Generation != wantGen {
		t.Fatalf("reconcile: got %s at generation %d, want %s at %d", res.Action, res.Generation, want, wantGen)
	}
	newKey := want != client.ActionNone
	if got := res.APIKey.Key != ""; got != newKey {
		t.Fatalf("reconcile %s: got a new key %v, want %v", want, got, newKey)
	}
	if newKey && !mustCheckKey(t, c, res.APIKey.Key) {
		t.Fatalf("reconcile %s: the new key got 401, want it working", want)
	}
	return res
}

func TestClient_Reconcile(t *testing.T) {
	t.Parallel()
	t.Run("Claimed", func(t *testing.T) {
		c := operator(t, newServer(t, nil))
		res := mustReconcile(t, c, "", client.ActionClaimed, 1)
		if res.User.Username != store.PrincipalUsername || res.APIKey.UserID != res.User.ID || res.RevokedAPIKeys != 0 {
			t.Errorf("got %+v, want a key of the bootstrap principal and nothing revoked", res)
		}
		if st := mustStatus(t, c); st.State != client.StateComplete || st.Generation != 1 {
			t.Errorf("status: got %+v, want complete at 1", st)
		}
	})
	t.Run("None", func(t *testing.T) {
		srv := newServer(t, nil)
		c := operator(t, srv)
		held := mustReconcile(t, c, "", client.ActionClaimed, 1).APIKey.Key
		res := mustReconcile(t, c, held, client.ActionNone, 1)
		if res.User != (client.User{}) || res.RevokedAPIKeys != 0 {
			t.Errorf("got %+v, want nothing but the action and the generation", res)
		}
		if !mustCheckKey(t, c, held) {
			t.Error("the held key: got 401, want it still working")
		}
		// Nothing needing the operator token was called: a client with a wrong one does the same.
		wrong := mustClient(t, srv.URL, client.WithOperatorToken("not-the-operator-token-0123456789abcdef"))
		mustReconcile(t, wrong, held, client.ActionNone, 1)
	})
	t.Run("ResetAndClaimed", func(t *testing.T) {
		srv := newServer(t, nil)
		c := operator(t, srv)
		person := apitest.MustPerson(t, srv.Store, "alice", store.RoleAdmin)
		lost := mustReconcile(t, c, "", client.ActionClaimed, 1).APIKey.Key
		cookie := srv.MustLogin(t, "alice", person.Password)

		// The operator lost its key (say, its Secret was deleted): it holds none.
		res := mustReconcile(t, c, "", client.ActionResetAndClaimed, 2)
		if res.RevokedAPIKeys != 1 || res.User.Username != store.PrincipalUsername {
			t.Errorf("got %+v, want the principal's one key revoked and a new one", res)
		}
		if mustCheckKey(t, c, lost) {
			t.Error("the lost key: got working, want revoked")
		}
		// The operator holds a key that no longer works (say, revoked by a reset from the CLI).
		res = mustReconcile(t, c, lost, client.ActionResetAndClaimed, 3)
		if res.RevokedAPIKeys != 1 {
			t.Errorf("revoked: got %d, want 1", res.RevokedAPIKeys)
		}
		mustReconcile(t, c, res.APIKey.Key, client.ActionNone, 3)

		// People are untouched: the key and the session of the person still work.
		if _, err := c.Whoami(t.Context(), person.APIKey); err != nil {
			t.Errorf("the person's key: got %v, want it working", err)
		}
		// A person's working key is no proof of the claim: held by mistake, it gets the claim
		// reset and retaken rather than taken for the operator's.
		mustReconcile(t, c, person.APIKey, client.ActionResetAndClaimed, 4)
		me := srv.MustDo(t, apitest.Request{Method: "GET", Path: "/api/me", Cookie: cookie})
		if me.Status != 200 {
			t.Errorf("the person's session: got %d %s, want 200", me.Status, me.Body)
		}
	})
	t.Run("ErrRateLimited", func(t *testing.T) {
		srv := newServer(t, func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 1, Window: time.Hour} })
		c := operator(t, srv)
		mustReconcile(t, c, "", client.ActionClaimed, 1)
		held := mustReconcile(t, c, "", client.ActionResetAndClaimed, 2).APIKey.Key
		_, err := c.Reconcile(t.Context(), "")
		var e *client.Error
		if !errors.Is(err, client.ErrRateLimited) || !errors.As(err, &e) || e.RetryAfter <= 0 {
			t.Fatalf("got %v, want ErrRateLimited with a RetryAfter", err)
		}
		// The refused reset changed nothing.
		if st := mustStatus(t, c); st.State != client.StateComplete || st.Generation != 2 || !mustCheckKey(t, c, held) {
			t.Errorf("after the refused reset: got %+v, want complete at 2 with the held key working", st)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		srv := newServer(t, nil)
		wrong := mustClient(t, srv.URL, client.WithOperatorToken("not-the-operator-token-0123456789abcdef"))
		if _, err := wrong.Reconcile(t.Context(), ""); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("pending: got %v, want ErrUnauthorized", err)
		}
		mustReconcile(t, operator(t, srv), "", client.ActionClaimed, 1)
		if _, err := wrong.Reconcile(t.Context(), ""); !errors.Is(err, client.ErrUnauthorized) {
			t.Fatalf("complete: got %v, want ErrUnauthorized", err)
		}
		if st := mustStatus(t, wrong); st.State != client.StateComplete || st.Generation != 1 {
			t.Errorf("got %+v, want complete at 1, untouched", st)
		}
	})
}

// TestClient_ReconcileConcurrent runs two reconcilers holding no key against one pending
// install, many times. Whichever way they interleave (including one losing the claim between
// reading the state and claiming, which Reconcile retries), both succeed: one claims, the
// other finds its key missing and takes the claim over, and only the last key works.
func TestClient_ReconcileConcurrent(t *testing.T) {
	t.Parallel()
	srv := newServer(t, func(o *api.Options) { o.ResetLimit = store.RateLimit{Max: 1000, Window: time.Hour} })
	a, b := operator(t, srv), operator(t, srv)
	for round := range 15 {
		if round > 0 {
			if _, err := srv.Store.Reset(t.Context(), store.AuditInfo{Actor: store.ActorCLI}, store.RateLimit{}); err != nil {
				t.Fatalf("round %d: reset: %v", round, err)
			}
		}
		var wg sync.WaitGroup
		results := make([]client.ReconcileResult, 2)
		errs := make([]error, 2)
		for i, c := range []*client.Client{a, b} {
			wg.Go(func() { results[i], errs[i] = c.Reconcile(t.Context(), "") })
		}
		wg.Wait()
		if errs[0] != nil || errs[1] != nil {
			t.Fatalf("round %d: got errors %v, %v, want none", round, errs[0], errs[1])
		}
		slices.SortFunc(results, func(x, y client.ReconcileResult) int { return cmp.Compare(x.Generation, y.Generation) })
		first, last := results[0], results[1]
		if first.Action != client.ActionClaimed || last.Action != client.ActionResetAndClaimed ||
			last.Generation != first.Generation+1 {
			t.Fatalf("round %d: got %s at %d and %s at %d, want claimed then reset_and_claimed at the next generation",
				round, first.Action, first.Generation, last.Action, last.Generation)
		}
		if mustCheckKey(t, a, first.APIKey.Key) || !mustCheckKey(t, a, last.APIKey.Key) {
			t.Fatalf("round %d: want only the last claim's key working", round)
		}
		if st := mustStatus(t, a); st.State != client.StateComplete || st.Generation != last.Generation {
			t.Fatalf("round %d: status got %+v, want complete at %d", round, st, last.Generation)
		}
	}
}
