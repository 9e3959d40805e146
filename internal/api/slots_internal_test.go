package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// slotsFixture is one server with a single check slot over a claimed install, the principal's
// key to act as an admin with, and a person without a password.
type slotsFixture struct {
	s      *server
	h      http.Handler
	st     *store.Store
	key    string
	person store.User
}

func mustSlotsFixture(t *testing.T, cost int) slotsFixture {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	claim, err := st.Claim(ctx, store.AuditInfo{Actor: store.ActorCLI})
	if err != nil {
		t.Fatal(err)
	}
	person, err := st.CreateUser(ctx, store.NewUser{Username: "ada"})
	if err != nil {
		t.Fatal(err)
	}
	passwords, err := NewPasswords(cost)
	if err != nil {
		t.Fatal(err)
	}
	public, _ := url.Parse("http://127.0.0.1:8080")
	s := newServer(st, Options{PublicURL: public, Gate: true, PasswordLogin: true, Passwords: passwords,
		PasswordChecks: 1, PasswordCheckWait: 20 * time.Millisecond})
	h, _ := s.routes(false)
	return slotsFixture{s: s, h: h, st: st, key: claim.Secret, person: person}
}

// setPassword sets the person's password as the admin and returns the answer.
func (f slotsFixture) setPassword(t *testing.T, password string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPut, "/api/users/"+strconv.FormatInt(f.person.ID, 10)+"/password",
		strings.NewReader(`{"password":"`+password+`"}`))
	req.Header.Set("Authorization", "Bearer "+f.key)
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	f.h.ServeHTTP(rec, req)
	return rec
}

// TestPasswordSet_HashesInACheckSlot: setting a password hashes it in one of the replica's
// check slots, like a sign-in's check: with every slot taken, the request is refused with 503
// overloaded and Retry-After, and nothing is stored, instead of running one more bcrypt.
func TestPasswordSet_HashesInACheckSlot(t *testing.T) {
	f := mustSlotsFixture(t, bcrypt.MinCost)
	const password = "plum orbit kettle jasmine"

	if !f.s.checks.acquire(t.Context()) {
		t.Fatal("could not take the only check slot")
	}
	rec := f.setPassword(t, password)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), `"overloaded"`) ||
		rec.Header().Get("Retry-After") != "1" {
		t.Errorf("with the slot held: got %d %s Retry-After %q, want 503 overloaded with Retry-After 1",
			rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if u, err := f.st.User(t.Context(), f.person.ID); err != nil || u.HasPassword {
		t.Errorf("with the slot held: got has_password %v, %v, want false (nothing hashed, nothing stored)", u.HasPassword, err)
	}
	// Back-pressure like a check's: counted in the metric, and at most a line a second.
	var m dto.Metric
	if err := f.s.checks.refused.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("terdut_password_checks_refused_total after the refused set: got %v, want 1", got)
	}
	f.s.checks.release()

	if rec := f.setPassword(t, password); rec.Code != http.StatusNoContent {
		t.Fatalf("with the slot free: got %d %s, want 204", rec.Code, rec.Body)
	}
	if u, err := f.st.User(t.Context(), f.person.ID); err != nil || !u.HasPassword {
		t.Fatalf("with the slot free: got has_password %v, %v, want true", u.HasPassword, err)
	}
}

// TestRehash_HashesInACheckSlot: the rehash after a sign-in also takes a check slot; with none
// free it leaves the old hash for a later sign-in rather than hashing outside the bound.
func TestRehash_HashesInACheckSlot(t *testing.T) {
	f := mustSlotsFixture(t, bcrypt.MinCost+1)
	ctx := t.Context()
	const password = "plum orbit kettle jasmine"
	old, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.SetPasswordHash(ctx, f.person.ID, string(old), ""); err != nil {
		t.Fatal(err)
	}
	stored := func() string {
		var h string
		if err := f.st.Pool().QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1`, f.person.ID).Scan(&h); err != nil {
			t.Fatal(err)
		}
		return h
	}

	if !f.s.checks.acquire(ctx) {
		t.Fatal("could not take the only check slot")
	}
	f.s.rehash(ctx, f.person.ID, string(old), password)
	if got := stored(); got != string(old) {
		t.Errorf("rehash with the slot held: got the hash changed to %q, want it left alone", got)
	}
	f.s.checks.release()

	f.s.rehash(ctx, f.person.ID, string(old), password)
	got := stored()
	if cost, err := bcrypt.Cost([]byte(got)); err != nil || cost != bcrypt.MinCost+1 {
		t.Fatalf("rehash with the slot free: got cost %d, %v, want %d", cost, err, bcrypt.MinCost+1)
	}
}
