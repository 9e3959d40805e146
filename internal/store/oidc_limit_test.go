package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestSaveOIDCLogin_Limit(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	save := func(state string, gate store.Gate) error {
		return st.SaveOIDCLogin(ctx, state, store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, gate, 2)
	}
	for _, state := range []string{"a", "b"} {
		if err := save(state, store.GateOff); err != nil {
			t.Fatalf("sign-in %s within the limit: %v", state, err)
		}
	}
	var pl *store.PendingLimitError
	if err := save("c", store.GateOff); !errors.As(err, &pl) || pl.RetryAfter < time.Second || pl.RetryAfter > time.Minute {
		t.Fatalf("a third: got %v, want *PendingLimitError with a RetryAfter of up to 1m", err)
	}
	// While the install is pending, the gate's answer comes first.
	if err := save("c", store.GateOn); !errors.Is(err, store.ErrBootstrapPending) {
		t.Fatalf("a third with the gate closed: got %v, want %v", err, store.ErrBootstrapPending)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM oidc_logins`); n != 2 {
		t.Fatalf("sign-ins stored: got %d, want 2", n)
	}
	if err := st.SaveOIDCLogin(ctx, "unlimited", store.OIDCLogin{Nonce: "n", CodeVerifier: "v"}, time.Minute, store.GateOff, 0); err != nil {
		t.Fatalf("with no limit: %v", err)
	}
}
