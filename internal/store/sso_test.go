package store_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func ssoIdentity(subject string) store.SSOIdentity {
	return store.SSOIdentity{Issuer: "https://idp.example.test", Subject: subject, Email: subject + "@example.test",
		Usernames: []string{subject}, Role: store.RoleMember}
}

func TestSSO_SignIn(t *testing.T) {
	ctx := context.Background()

	t.Run("ErrBootstrapPending", func(t *testing.T) {
		st := mustStore(t)
		_, _, _, err := splitSSO(st.SignInSSO(ctx, ssoIdentity("alice"), time.Hour, store.GateOn))
		if !errors.Is(err, store.ErrBootstrapPending) {
			t.Fatalf("got %v, want %v", err, store.ErrBootstrapPending)
		}
		if n := mustCount(t, st, `SELECT (SELECT count(*) FROM users) + (SELECT count(*) FROM sessions)`); n != 0 {
			t.Fatalf("users and sessions: got %d, want 0", n)
		}
	})

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		u, sess, created, err := splitSSO(st.SignInSSO(ctx, ssoIdentity("alice"), time.Hour, store.GateOn))
		if err != nil || !created || u.Username != "alice" || u.Kind != store.KindHuman || sess.UserID != u.ID {
			t.Fatalf("first sign-in: got %+v, %+v, created %v, %v; want a new human alice with a session", u, sess, created, err)
		}
		again, _, created, err := splitSSO(st.SignInSSO(ctx, ssoIdentity("alice"), time.Hour, store.GateOn))
		if err != nil || created || again.ID != u.ID {
			t.Fatalf("second sign-in: got %+v, created %v, %v; want the same user %d", again, created, err, u.ID)
		}
	})

	t.Run("SkipsPrincipalName", func(t *testing.T) {
		st := mustStore(t)
		claim := mustClaim(t, st)
		id := ssoIdentity("mallory")
		id.Usernames = []string{store.PrincipalUsername, "mallory"}
		id.Role = store.RoleAdmin
		u, _, _, err := splitSSO(st.SignInSSO(ctx, id, time.Hour, store.GateOn))
		if err != nil || u.ID == claim.Principal.ID || u.Username != "mallory" {
			t.Fatalf("got %+v, %v, want a new user mallory, not the principal %d", u, err, claim.Principal.ID)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// The same new person signing in at once from many tabs (or replicas) becomes one user.
		st := mustStore(t)
		mustClaim(t, st)
		const n = 20
		type result struct {
			user    store.User
			created bool
			err     error
		}
		results := make([]result, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				<-start
				u, _, created, err := splitSSO(st.SignInSSO(ctx, ssoIdentity("alice"), time.Hour, store.GateOn))
				results[i] = result{u, created, err}
			})
		}
		close(start)
		wg.Wait()
		created := 0
		for i, r := range results {
			if r.err != nil {
				t.Fatalf("sign-in %d: got %v, want nil", i, r.err)
			}
			if r.user.ID != results[0].user.ID {
				t.Fatalf("sign-in %d: got user %d, want %d", i, r.user.ID, results[0].user.ID)
			}
			if r.created {
				created++
			}
		}
		if created != 1 {
			t.Fatalf("sign-ins that created the user: got %d, want 1", created)
		}
		if got := mustCount(t, st, `SELECT count(*) FROM users WHERE oidc_subject = 'alice'`); got != 1 {
			t.Fatalf("users with the identity: got %d, want 1", got)
		}
		if got := mustCount(t, st, `SELECT count(*) FROM users WHERE kind = 'human'`); got != 1 {
			t.Fatalf("human users: got %d, want 1", got)
		}
		if got := mustCount(t, st, `SELECT count(*) FROM sessions`); got != n {
			t.Fatalf("sessions: got %d, want %d", got, n)
		}
	})
}

func TestSSO_OIDCLogin(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	want := store.OIDCLogin{Nonce: "nonce-1", CodeVerifier: "verifier-1", StepUp: true}
	// same reports whether got is want, begun within the last minute.
	same := func(got store.OIDCLogin) bool {
		started := got.StartedAt
		got.StartedAt = time.Time{}
		return got == want && time.Since(started) < time.Minute && time.Since(started) > -time.Minute
	}

	t.Run("OK", func(t *testing.T) {
		if _, err := st.SaveOIDCLogin(ctx, "state-ok", want, time.Minute, store.GateOff, 0); err != nil {
			t.Fatal(err)
		}
		got, err := st.TakeOIDCLogin(ctx, "state-ok", store.GateOff)
		if err != nil || !same(got) {
			t.Fatalf("first take: got %+v, %v, want %+v, nil", got, err, want)
		}
		if _, err := st.TakeOIDCLogin(ctx, "state-ok", store.GateOff); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("second take: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := st.TakeOIDCLogin(ctx, "never-saved", store.GateOff); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("unknown state: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("Expired", func(t *testing.T) {
		if _, err := st.SaveOIDCLogin(ctx, "state-old", want, time.Minute, store.GateOff, 0); err != nil {
			t.Fatal(err)
		}
		if n := mustExec(t, st, `UPDATE oidc_logins SET expires_at = now() - interval '1 second'
			WHERE state_hash = sha256(convert_to($1, 'UTF8'))`, "state-old"); n != 1 {
			t.Fatalf("rows expired: got %d, want 1", n)
		}
		if _, err := st.TakeOIDCLogin(ctx, "state-old", store.GateOff); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("expired state: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("ErrBootstrapPending", func(t *testing.T) {
		pending := mustStore(t)
		_, err := pending.SaveOIDCLogin(ctx, "state-pending", want, time.Minute, store.GateOn, 0)
		if !errors.Is(err, store.ErrBootstrapPending) {
			t.Fatalf("save while pending: got %v, want %v", err, store.ErrBootstrapPending)
		}
		if n := mustCount(t, pending, `SELECT count(*) FROM oidc_logins`); n != 0 {
			t.Fatalf("sign-ins saved while pending: got %d, want 0", n)
		}
		// A sign-in started before a reset cannot be finished while pending, and is not consumed.
		if _, err := pending.SaveOIDCLogin(ctx, "state-started", want, time.Minute, store.GateOff, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := pending.TakeOIDCLogin(ctx, "state-started", store.GateOn); !errors.Is(err, store.ErrBootstrapPending) {
			t.Fatalf("take while pending: got %v, want %v", err, store.ErrBootstrapPending)
		}
		if n := mustCount(t, pending, `SELECT count(*) FROM oidc_logins`); n != 1 {
			t.Fatalf("sign-ins left after a refused take: got %d, want 1", n)
		}
		mustClaim(t, pending)
		if got, err := pending.TakeOIDCLogin(ctx, "state-started", store.GateOn); err != nil || !same(got) {
			t.Fatalf("take after the claim: got %+v, %v, want %+v, nil", got, err, want)
		}
	})

	t.Run("Concurrent", func(t *testing.T) {
		// A callback replayed against several replicas at once finishes at most once.
		if _, err := st.SaveOIDCLogin(ctx, "state-race", want, time.Minute, store.GateOff, 0); err != nil {
			t.Fatal(err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { _, errs[i] = st.TakeOIDCLogin(ctx, "state-race", store.GateOff) })
		}
		wg.Wait()
		ok := 0
		for i, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, store.ErrNotFound):
				t.Fatalf("take %d: got %v, want nil or %v", i, err, store.ErrNotFound)
			}
		}
		if ok != 1 {
			t.Fatalf("takes that succeeded: got %d, want 1", ok)
		}
	})
}
