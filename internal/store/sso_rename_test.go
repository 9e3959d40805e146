package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestSSO_Rename(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	claim := mustClaim(t, st)
	signIn := func(t *testing.T, subject string) store.User {
		t.Helper()
		u, _, _, err := splitSSO(st.SignInSSO(ctx, ssoIdentity(subject), time.Hour, store.GateOn))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	sam, other := signIn(t, "sam"), signIn(t, "olga")
	id := ssoIdentity("sam")

	t.Run("OK", func(t *testing.T) {
		u, err := st.RenameSSOUser(ctx, sam.ID, id.Issuer, id.Subject, "samuel")
		if err != nil || u.ID != sam.ID || u.Username != "samuel" || u.OIDCSubject != "sam" {
			t.Fatalf("got %+v, %v, want sam renamed to samuel", u, err)
		}
		// Only the case changes: the name is still this person's own.
		if u, err = st.RenameSSOUser(ctx, sam.ID, id.Issuer, id.Subject, "Samuel"); err != nil || u.Username != "Samuel" {
			t.Fatalf("case change: got %+v, %v, want Samuel", u, err)
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		for _, name := range []string{"olga", "OLGA", store.PrincipalUsername, strings.ToUpper(store.PrincipalUsername)} {
			if _, err := st.RenameSSOUser(ctx, sam.ID, id.Issuer, id.Subject, name); !errors.Is(err, store.ErrConflict) {
				t.Errorf("rename to %q: got %v, want ErrConflict", name, err)
			}
		}
		for uid, want := range map[int64]string{sam.ID: "Samuel", other.ID: "olga", claim.Principal.ID: store.PrincipalUsername} {
			if u, err := st.User(ctx, uid); err != nil || u.Username != want {
				t.Errorf("user %d: got %+v, %v, want the name %q kept", uid, u, err, want)
			}
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		// The identity must be the user's: an id alone, or another issuer's subject, renames no one.
		for name, tc := range map[string]struct {
			id              int64
			issuer, subject string
		}{
			"other user":   {other.ID, id.Issuer, id.Subject},
			"other issuer": {sam.ID, "https://other.example.test", id.Subject},
			"principal":    {claim.Principal.ID, id.Issuer, id.Subject},
		} {
			if _, err := st.RenameSSOUser(ctx, tc.id, tc.issuer, tc.subject, "renamed"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s: got %v, want ErrNotFound", name, err)
			}
		}
	})

	t.Run("ConcurrentSameName", func(t *testing.T) {
		// Many people renamed to one free name at once: exactly one gets it, every round.
		for round := range 20 {
			var users []store.User
			for i := range 5 {
				users = append(users, signIn(t, fmt.Sprintf("r%d-p%d", round, i)))
			}
			want := fmt.Sprintf("wanted-%d", round)
			var wg sync.WaitGroup
			errs := make([]error, len(users))
			for i, u := range users {
				wg.Go(func() { _, errs[i] = st.RenameSSOUser(ctx, u.ID, u.OIDCIssuer, u.OIDCSubject, want) })
			}
			wg.Wait()
			won := 0
			for _, err := range errs {
				switch {
				case err == nil:
					won++
				case !errors.Is(err, store.ErrConflict):
					t.Fatalf("round %d: got %v, want nil or ErrConflict", round, err)
				}
			}
			if n := mustCount(t, st, `SELECT count(*) FROM users WHERE lower(username) = $1`, want); won != 1 || n != 1 {
				t.Fatalf("round %d: %d renames succeeded and %d users have the name, want 1 and 1", round, won, n)
			}
		}
	})
}
