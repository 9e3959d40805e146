package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

func TestDeprovisionSSOUser(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	ada := mustSSOUser(t, st, "sso-ada", store.RoleAdmin)
	_, adaKey := mustKey(t, st, ada.ID)
	_, _, _, err := splitSSO(st.SignInSSO(ctx, store.SSOIdentity{Issuer: ada.OIDCIssuer, Subject: ada.OIDCSubject,
		Usernames: []string{"ada"}, Role: store.RoleAdmin}, time.Hour, store.GateOff))
	if err != nil {
		t.Fatal(err)
	}
	other := mustSSOUser(t, st, "sso-otto", store.RoleAdmin)
	_, otherKey := mustKey(t, st, other.ID)

	d, err := st.DeprovisionSSOUser(ctx, ada.OIDCIssuer, ada.OIDCSubject, "")
	want := store.Deprovisioned{UserID: ada.ID, WasAdmin: true, RevokedAPIKeys: 1, RevokedSessions: 2}
	if err != nil || d != want {
		t.Fatalf("got %+v, %v, want %+v", d, err, want)
	}
	if _, err := st.AuthenticateAPIKey(ctx, adaKey); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ada's key: got %v, want %v", err, store.ErrNotFound)
	}
	if u, err := st.User(ctx, ada.ID); err != nil || u.Role != store.RoleMember {
		t.Errorf("ada: got %+v, %v, want a member who still exists", u, err)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM sessions WHERE user_id = $1 AND revoked_at IS NULL`, ada.ID); n != 0 {
		t.Errorf("ada's live sessions: got %d, want 0", n)
	}
	// Nobody else is touched.
	if u, err := st.AuthenticateAPIKey(ctx, otherKey); err != nil || u.ID != other.ID || u.Role != store.RoleAdmin {
		t.Errorf("otto's key: got %+v, %v, want otto, still an admin", u, err)
	}

	again, err := st.DeprovisionSSOUser(ctx, ada.OIDCIssuer, ada.OIDCSubject, "")
	if want := (store.Deprovisioned{UserID: ada.ID}); err != nil || again != want {
		t.Errorf("again: got %+v, %v, want %+v", again, err, want)
	}
	if _, err := st.DeprovisionSSOUser(ctx, ada.OIDCIssuer, "nobody", ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an unknown subject: got %v, want %v", err, store.ErrNotFound)
	}
}

// TestDeprovisionSSOUser_MissingGroupsClaim: a sign-in without the groups claim disarms only a
// person whose earlier sign-ins carried the claim of that name; a later sign-in without it does
// not make the store forget that they had it.
func TestDeprovisionSSOUser_MissingGroupsClaim(t *testing.T) {
	ctx := context.Background()
	st := mustStore(t)
	signIn := func(subject, groupsClaim string) store.User {
		t.Helper()
		id := ssoIdentity(subject)
		id.Role, id.GroupsClaim = store.RoleAdmin, groupsClaim
		u, _, _, err := splitSSO(st.SignInSSO(ctx, id, time.Hour, store.GateOff))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	had := signIn("sso-had", "groups")
	signIn("sso-had", "") // admitted once without it (no group rules then): still had it
	never := signIn("sso-never", "")
	other := signIn("sso-other", "roles")

	for _, u := range []store.User{never, other} {
		if _, err := st.DeprovisionSSOUser(ctx, u.OIDCIssuer, u.OIDCSubject, "groups"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s without a groups claim: got %v, want %v", u.Username, err, store.ErrNotFound)
		}
	}
	d, err := st.DeprovisionSSOUser(ctx, had.OIDCIssuer, had.OIDCSubject, "groups")
	if want := (store.Deprovisioned{UserID: had.ID, WasAdmin: true, RevokedSessions: 2}); err != nil || d != want {
		t.Fatalf("%s without a groups claim: got %+v, %v, want %+v", had.Username, d, err, want)
	}
	if n := mustCount(t, st, `SELECT count(*) FROM users WHERE role = 'admin' AND id <> $1`, had.ID); n != 2 {
		t.Errorf("admins left but %s: got %d, want 2", had.Username, n)
	}
}
