package client_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

func TestClient_Whoami(t *testing.T) {
	t.Parallel()
	srv := newServer(t, nil)
	c := operator(t, srv)
	person := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	t.Run("OK", func(t *testing.T) {
		u, err := c.Whoami(t.Context(), person.APIKey)
		if err != nil || u.ID != person.User.ID || u.Username != "alice" || u.Kind != "human" || u.Role != "member" {
			t.Fatalf("got %+v, %v, want alice", u, err)
		}
	})
	t.Run("ErrUnauthorized", func(t *testing.T) {
		revoked := apitest.MustPerson(t, srv.Store, "bob", store.RoleMember)
		keys, err := srv.Store.APIKeys(t.Context(), revoked.User.ID)
		if err != nil || len(keys) != 1 {
			t.Fatalf("keys of bob: got %v, %v, want one", keys, err)
		}
		if err := srv.Store.RevokeAPIKey(t.Context(), revoked.User.ID, keys[0].ID); err != nil {
			t.Fatal(err)
		}
		for name, key := range map[string]string{"revoked": revoked.APIKey, "unknown": strings.Repeat("ab", 32),
			"malformed": "not-a-key", "empty": "", "unsendable": "line\nbreak"} {
			if _, err := c.Whoami(t.Context(), key); !errors.Is(err, client.ErrUnauthorized) {
				t.Errorf("%s key: got %v, want ErrUnauthorized", name, err)
			}
		}
	})
}

func TestClient_CheckKey(t *testing.T) {
	t.Parallel()
	t.Run("OK", func(t *testing.T) {
		srv := newServer(t, nil)
		c := operator(t, srv)
		person := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
		claimed := mustClaim(t, c)
		// A person's working key proves nothing about the claim: only the principal's counts.
		for key, want := range map[string]bool{claimed.APIKey.Key: true, person.APIKey: false,
			strings.Repeat("ab", 32): false, "": false, "x y": false} {
			if got := mustCheckKey(t, c, key); got != want {
				t.Errorf("key %.8q...: got %v, want %v", key, got, want)
			}
		}
	})
}
