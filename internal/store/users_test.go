package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestUsers_Create(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		// Nothing derives a privilege from the number of users or from an id: the very first
		// user of an install, id 1, is a member unless asked otherwise.
		u, err := st.CreateUser(ctx, store.NewUser{Username: "first", Email: "first@example.test"})
		if err != nil {
			t.Fatal(err)
		}
		if u.Role != store.RoleMember || u.Kind != store.KindHuman || u.HasPassword || u.OIDCSubject != "" {
			t.Fatalf("first user: got %+v, want a human member with no password or OIDC identity", u)
		}
		got, err := st.User(ctx, u.ID)
		if err != nil || got != u {
			t.Fatalf("User(%d): got %+v, %v, want %+v", u.ID, got, err, u)
		}
		b, err := st.Bootstrap(ctx)
		if err != nil || b.State != store.StatePending {
			t.Fatalf("claim state after creating a user: got %+v, %v, want pending", b, err)
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		st := mustStore(t)
		mustUser(t, st, "alice", store.RoleMember)
		_, err := st.CreateUser(ctx, store.NewUser{Username: "alice", Email: "other@example.test"})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("got %v, want %v", err, store.ErrConflict)
		}
		// A name differing only in case would let one person pass for another.
		_, err = st.CreateUser(ctx, store.NewUser{Username: "ALICE", Email: "other@example.test"})
		if !errors.Is(err, store.ErrConflict) {
			t.Fatalf("ALICE: got %v, want %v", err, store.ErrConflict)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM users WHERE lower(username) = 'alice'`); n != 1 {
			t.Fatalf("users named alice: got %d, want 1", n)
		}
	})
}

func TestUsers_Get(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)

	t.Run("ErrNotFound", func(t *testing.T) {
		if _, err := st.User(ctx, 424242); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("User: got %v, want %v", err, store.ErrNotFound)
		}
		if _, _, _, err := st.UserForSignIn(ctx, "nobody", store.GateOff, store.RateLimit{}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("UserForSignIn: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("UserForSignIn", func(t *testing.T) {
		pending := mustStore(t)
		alice := mustUser(t, pending, "alice", store.RoleMember)
		// While pending, the gate answers the same whether or not the user exists.
		for _, name := range []string{"alice", "nobody"} {
			if _, _, _, err := pending.UserForSignIn(ctx, name, store.GateOn, store.RateLimit{}); !errors.Is(err, store.ErrBootstrapPending) {
				t.Fatalf("%s while pending: got %v, want %v", name, err, store.ErrBootstrapPending)
			}
		}
		if u, _, _, err := pending.UserForSignIn(ctx, "alice", store.GateOff, store.RateLimit{}); err != nil || u.ID != alice.ID {
			t.Fatalf("alice with the gate off: got %+v, %v, want alice", u, err)
		}
		mustClaim(t, pending)
		if u, _, _, err := pending.UserForSignIn(ctx, "alice", store.GateOn, store.RateLimit{}); err != nil || u.ID != alice.ID {
			t.Fatalf("alice after the claim: got %+v, %v, want alice", u, err)
		}
		if _, _, _, err := pending.UserForSignIn(ctx, "nobody", store.GateOn, store.RateLimit{}); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("nobody after the claim: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("List", func(t *testing.T) {
		a := mustUser(t, st, "list-a", store.RoleAdmin)
		b := mustUser(t, st, "list-b", store.RoleMember)
		users, err := st.Users(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(users) != 2 || users[0].ID != a.ID || users[1].ID != b.ID {
			t.Fatalf("got %+v, want [%d %d] oldest first", users, a.ID, b.ID)
		}
	})
}

func TestUsers_Password(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	mustClaim(t, st)
	u := mustUser(t, st, "alice", store.RoleMember)

	t.Run("NoPassword", func(t *testing.T) {
		got, hash, _, err := st.UserForSignIn(ctx, "alice", store.GateOff, store.RateLimit{})
		if err != nil || hash != "" || got.HasPassword {
			t.Fatalf("UserForSignIn: got %+v hash %q, %v, want no password, nil", got, hash, err)
		}
	})

	t.Run("OK", func(t *testing.T) {
		keep, err := st.CreateSession(ctx, u.ID, time.Hour, store.GateOn)
		if err != nil {
			t.Fatal(err)
		}
		other, err := st.CreateSession(ctx, u.ID, time.Hour, store.GateOn)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.SetPasswordHash(ctx, u.ID, "new-hash", keep.Token); err != nil {
			t.Fatal(err)
		}
		got, hash, _, err := st.UserForSignIn(ctx, "alice", store.GateOff, store.RateLimit{})
		if err != nil || hash != "new-hash" || !got.HasPassword {
			t.Fatalf("UserForSignIn: got %+v %q, %v, want HasPassword and new-hash", got, hash, err)
		}
		if _, err := st.AuthenticateSession(ctx, keep.Token); err != nil {
			t.Fatalf("the session that changed the password: got %v, want nil", err)
		}
		if _, err := st.AuthenticateSession(ctx, other.Token); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("another session after the change: got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		if err := st.SetPasswordHash(ctx, 424242, "x", ""); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("got %v, want %v", err, store.ErrNotFound)
		}
	})
}

// mustPasswordFixture claims st's install and makes an admin (ada) and a member (pat), each
// with the password hash "hash-of-" and their name; it returns the bootstrap principal and them.
func mustPasswordFixture(t *testing.T, st *store.Store) (principal, admin, member store.User) {
	t.Helper()
	principal = mustClaim(t, st).Principal
	admin = mustUser(t, st, "ada", store.RoleAdmin)
	member = mustUser(t, st, "pat", store.RoleMember)
	for _, u := range []store.User{admin, member} {
		if err := st.SetPasswordHash(context.Background(), u.ID, "hash-of-"+u.Username, ""); err != nil {
			t.Fatal(err)
		}
	}
	return principal, admin, member
}

// TestUsers_PasswordRule: a change made with a rule is written only if the rule still holds on
// the person's row, and a refused one changes nothing: not the hash, not the sessions, not the
// set-password link.
func TestUsers_PasswordRule(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	principal, admin, member := mustPasswordFixture(t, st)
	session, err := st.CreateSession(ctx, member.ID, time.Hour, store.GateOn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.IssuePasswordLink(ctx, member.ID, store.Caller{}, time.Hour); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name string
		user int64
		rule store.PasswordRule
		want error
	}{
		{"AnotherAdminsPassword", admin.ID, store.PasswordRule{ByOther: true}, store.ErrAdminsOwnPassword},
		{"MachineUser", principal.ID, store.PasswordRule{ByOther: true}, store.ErrNoPassword},
		{"OwnWithAnotherHash", member.ID, store.PasswordRule{Proven: "hash-of-someone-else"}, store.ErrPasswordChanged},
		{"OwnHadNone", member.ID, store.PasswordRule{}, store.ErrPasswordChanged},
		{"NoSuchUser", 424242, store.PasswordRule{ByOther: true}, store.ErrNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := st.ChangePassword(ctx, store.PasswordChange{UserID: tc.user, Hash: "refused-hash", Rule: &tc.rule})
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if n := mustExec(t, st, `SELECT FROM users WHERE password_hash = 'refused-hash'`); n != 0 {
				t.Fatalf("users with the refused hash: got %d, want 0", n)
			}
			if _, err := st.AuthenticateSession(ctx, session.Token); err != nil {
				t.Fatalf("pat's session after a refused change: got %v, want nil", err)
			}
			if n := mustExec(t, st, `SELECT FROM password_links WHERE user_id = $1`, member.ID); n != 1 {
				t.Fatalf("pat's set-password link after a refused change: got %d, want 1", n)
			}
		})
	}

	t.Run("StillHolds", func(t *testing.T) {
		if _, err := st.ChangePassword(ctx, store.PasswordChange{UserID: member.ID, Hash: "pat-chose",
			Rule: &store.PasswordRule{Proven: "hash-of-pat"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.ChangePassword(ctx, store.PasswordChange{UserID: member.ID, Hash: "an-admin-chose",
			Rule: &store.PasswordRule{ByOther: true}}); err != nil {
			t.Fatal(err)
		}
		if hash, err := st.PasswordHash(ctx, member.ID); err != nil || hash != "an-admin-chose" {
			t.Fatalf("pat's hash: got %q, %v, want an-admin-chose", hash, err)
		}
	})
}

// TestUsers_PasswordHash: the hash as stored, "" for a person without one and for a machine
// user, who never has one; and it touches nothing of the guessing limit's.
func TestUsers_PasswordHash(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	principal, ada, pat := mustPasswordFixture(t, st)
	lee := mustUser(t, st, "lee", store.RoleMember)
	mustExec(t, st, `UPDATE users SET password_hash = 'planted' WHERE id = $1`, principal.ID)
	_, _, a, err := st.UserForSignIn(ctx, "bob", store.GateOn, store.RateLimit{Max: 5, Window: time.Hour})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	if err := st.FailedAttempt(ctx, a); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   int64
		want string
		err  error
	}{{pat.ID, "hash-of-pat", nil}, {ada.ID, "hash-of-ada", nil}, {lee.ID, "", nil}, {principal.ID, "", nil},
		{424242, "", store.ErrNotFound}} {
		if got, err := st.PasswordHash(ctx, tc.id); got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("user %d: got %q, %v, want %q, %v", tc.id, got, err, tc.want, tc.err)
		}
	}
	if n := mustCount(t, st, `SELECT count(*) FROM login_attempts WHERE cardinality(attempts) = 1 AND cardinality(pending) = 0`); n != 1 {
		t.Errorf("bob's failed guess after the reads: got %d rows, want 1 unchanged", n)
	}
}

func TestUsers_Delete(t *testing.T) {
	ctx := context.Background()

	t.Run("OK", func(t *testing.T) {
		st := mustStore(t)
		mustClaim(t, st)
		admin := mustUser(t, st, "admin", store.RoleAdmin)
		alice := mustUser(t, st, "alice", store.RoleMember)
		bob := mustUser(t, st, "bob", store.RoleMember)
		_, key := mustKey(t, st, alice.ID)
		sess, err := st.CreateSession(ctx, alice.ID, time.Hour, store.GateOn)
		if err != nil {
			t.Fatal(err)
		}
		// Delete the oldest human first: nobody inherits anything from it.
		for _, id := range []int64{admin.ID, alice.ID} {
			if err := st.DeleteUser(ctx, id); err != nil {
				t.Fatalf("delete %d: got %v, want nil", id, err)
			}
		}
		if _, err := st.AuthenticateAPIKey(ctx, key); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted user's key: got %v, want %v", err, store.ErrNotFound)
		}
		if _, err := st.AuthenticateSession(ctx, sess.Token); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted user's session: got %v, want %v", err, store.ErrNotFound)
		}
		if n := mustCount(t, st, `SELECT count(*) FROM api_keys WHERE user_id = $1`, alice.ID); n != 0 {
			t.Fatalf("deleted user's key rows: got %d, want 0", n)
		}
		got, err := st.User(ctx, bob.ID)
		if err != nil || got.Role != store.RoleMember {
			t.Fatalf("bob after the deletions: got %+v, %v, want a member", got, err)
		}
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		st := mustStore(t)
		if err := st.DeleteUser(ctx, 424242); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("got %v, want %v", err, store.ErrNotFound)
		}
	})

	t.Run("ErrProtectedUser", func(t *testing.T) {
		st := mustStore(t)
		claim := mustClaim(t, st)
		if err := st.DeleteUser(ctx, claim.Principal.ID); !errors.Is(err, store.ErrProtectedUser) {
			t.Fatalf("got %v, want %v", err, store.ErrProtectedUser)
		}
		if _, err := st.AuthenticateAPIKey(ctx, claim.Secret); err != nil {
			t.Fatalf("principal's key after the refused delete: got %v, want nil", err)
		}
	})
}
