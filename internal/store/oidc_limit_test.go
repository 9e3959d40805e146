package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// TestSaveOIDCLogin_Limit: at the limit, a new sign-in is recorded and the oldest in progress
// is evicted in its place; nothing is evicted while the gate refuses the start.
func TestSaveOIDCLogin_Limit(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	save := func(state string, gate store.Gate) (int, error) {
		return st.SaveOIDCLogin(ctx, state, store.OIDCLogin{Nonce: "n-" + state, CodeVerifier: "v"}, time.Minute, gate, 2)
	}
	for _, state := range []string{"a", "b"} {
		if n, err := save(state, store.GateOff); err != nil || n != 0 {
			t.Fatalf("sign-in %s within the limit: got %d evicted, %v, want 0, nil", state, n, err)
		}
	}
	if n, err := save("c", store.GateOff); err != nil || n != 1 {
		t.Fatalf("a third: got %d evicted, %v, want 1, nil", n, err)
	}
	if _, err := st.TakeOIDCLogin(ctx, "a", store.GateOff); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the oldest sign-in after the third: got %v, want %v (evicted)", err, store.ErrNotFound)
	}
	for _, state := range []string{"b", "c"} {
		if l, err := st.TakeOIDCLogin(ctx, state, store.GateOff); err != nil || l.Nonce != "n-"+state {
			t.Errorf("sign-in %s: got %+v, %v, want it kept", state, l, err)
		}
	}

	// While the install is pending, the gate's answer comes first and nothing is evicted.
	for _, state := range []string{"d", "e"} {
		if _, err := save(state, store.GateOff); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := save("f", store.GateOn); !errors.Is(err, store.ErrBootstrapPending) || n != 0 {
		t.Fatalf("a third with the gate closed: got %d evicted, %v, want 0, %v", n, err, store.ErrBootstrapPending)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM oidc_logins`); n != 2 {
		t.Fatalf("sign-ins stored: got %d, want 2", n)
	}
	if n, err := st.SaveOIDCLogin(ctx, "unlimited", store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, store.GateOff, 0); err != nil || n != 0 {
		t.Fatalf("with no limit: got %d evicted, %v", n, err)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM oidc_logins`); n != 3 {
		t.Fatalf("sign-ins stored with no limit: got %d, want 3", n)
	}
}

// TestSaveOIDCLogin_LimitConcurrent: many starts at once, as from several replicas, all
// succeed; once they are done, one more start leaves exactly the limit, the newest.
func TestSaveOIDCLogin_LimitConcurrent(t *testing.T) {
	const limit, workers, each = 5, 8, 15
	ctx := context.Background()
	st := mustStore(t)
	for round := range 3 {
		var wg sync.WaitGroup
		errs := make(chan error, workers*each)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					state := fmt.Sprintf("r%d-w%d-%d", round, w, i)
					if _, err := st.SaveOIDCLogin(ctx, state, store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, store.GateOff, limit); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: a concurrent start failed: %v", round, err)
		}
		last := fmt.Sprintf("last-%d", round)
		if _, err := st.SaveOIDCLogin(ctx, last, store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, store.GateOff, limit); err != nil {
			t.Fatal(err)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM oidc_logins`); n != limit {
			t.Fatalf("round %d: sign-ins in progress: got %d, want %d", round, n, limit)
		}
		if _, err := st.TakeOIDCLogin(ctx, last, store.GateOff); err != nil {
			t.Fatalf("round %d: the newest sign-in: %v", round, err)
		}
	}
}
