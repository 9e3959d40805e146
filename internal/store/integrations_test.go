package store_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestIntegrations_Keys(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	admin := mustUser(t, st, "admin", store.RoleAdmin)
	in, first, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod", CreatedBy: admin.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first, store.IntegrationKeyPrefix) || len(first) != len(store.IntegrationKeyPrefix)+64 ||
		in.ExpireAfter != store.DefaultExpireAfter || len(in.Keys) != 1 || in.Keys[0].Hint != first[len(first)-4:] {
		t.Fatalf("created %+v with key %q", in, first)
	}
	if _, _, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a second integration named prod: got %v, want ErrConflict", err)
	}
	if c, err := st.AuthenticateIntegration(ctx, first); err != nil || c.IntegrationID != in.ID {
		t.Fatalf("the first key: got %+v, %v", c, err)
	}
	// A person's API key, or anything not shaped as an integration key, is refused.
	_, personal := mustKey(t, st, admin.ID)
	for _, secret := range []string{personal, "", store.IntegrationKeyPrefix, strings.Replace(first, "a", "b", 1) + "0"} {
		if _, err := st.AuthenticateIntegration(ctx, secret); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("AuthenticateIntegration(%q): got %v, want ErrNotFound", secret, err)
		}
	}

	// Two live keys at most, however many are asked for at once.
	var wg sync.WaitGroup
	var added, refused int
	var mu sync.Mutex
	for range 4 {
		wg.Go(func() {
			_, _, err := st.AddIntegrationKey(ctx, in.ID, admin.ID)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				added++
			case errors.Is(err, store.ErrTooManyIntegrationKeys):
				refused++
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if added != 1 || refused != 3 {
		t.Fatalf("four concurrent additions: %d added, %d refused; want 1 and 3", added, refused)
	}
	if err := st.RevokeIntegrationKey(ctx, in.ID, in.Keys[0].ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AuthenticateIntegration(ctx, first); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a revoked key: got %v, want ErrNotFound", err)
	}
	if err := st.RevokeIntegrationKey(ctx, in.ID, in.Keys[0].ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("revoke twice: got %v, want ErrNotFound", err)
	}
	_, third, err := st.AddIntegrationKey(ctx, in.ID, admin.ID)
	if err != nil {
		t.Fatalf("a key after a revocation: %v", err)
	}
	list, err := st.Integrations(ctx)
	if err != nil || len(list) != 1 || len(list[0].Keys) != 2 {
		t.Fatalf("Integrations: got %+v, %v, want one with two live keys", list, err)
	}

	// Deleted: no key works, the name is free again, and its list is empty.
	if _, err := st.DeleteIntegration(ctx, in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AuthenticateIntegration(ctx, third); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a key of a deleted integration: got %v", err)
	}
	if _, err := st.DeleteIntegration(ctx, in.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete twice: got %v", err)
	}
	if _, _, err := st.AddIntegrationKey(ctx, in.ID, admin.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a key for a deleted integration: got %v", err)
	}
	if _, _, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "prod"}); err != nil {
		t.Fatalf("the name of a deleted integration: %v", err)
	}
}

// TestIntegrations_ResetRevokesThePrincipals: a reset of the claim revokes the integration keys
// the bootstrap principal created, and no one else's.
func TestIntegrations_ResetRevokesThePrincipals(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	claim := mustClaim(t, st)
	admin := mustUser(t, st, "admin", store.RoleAdmin)
	_, byPrincipal, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "a", CreatedBy: claim.Principal.ID})
	if err != nil {
		t.Fatal(err)
	}
	_, byAdmin, err := st.CreateIntegration(ctx, store.NewIntegration{Name: "b", CreatedBy: admin.ID})
	if err != nil {
		t.Fatal(err)
	}
	res, err := st.Reset(ctx, store.AuditInfo{Actor: store.ActorCLI, RemoteAddr: "local"}, store.RateLimit{})
	if err != nil {
		t.Fatal(err)
	}
	if res.RevokedIntegrationKeys != 1 {
		t.Fatalf("reset revoked %d integration keys, want 1", res.RevokedIntegrationKeys)
	}
	if _, err := st.AuthenticateIntegration(ctx, byPrincipal); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the principal's integration key after a reset: %v", err)
	}
	if _, err := st.AuthenticateIntegration(ctx, byAdmin); err != nil {
		t.Fatalf("an admin's integration key after a reset: %v", err)
	}
}
