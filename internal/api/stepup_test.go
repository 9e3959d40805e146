package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// ageSessions moves every session of the user back by age, as if stolen that long ago: its
// creation and, for a single sign-on, the authentication at the provider it records.
func ageSessions(t *testing.T, srv *apitest.Server, userID int64, age string) {
	t.Helper()
	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE sessions SET created_at = created_at - $2::interval,
		authenticated_at = authenticated_at - $2::interval WHERE user_id = $1`, userID, age); err != nil {
		t.Fatal(err)
	}
}

// TestStepUp_StolenAdminSession: issue 22's chain, from an admin's password session a day old
// (a stolen cookie): creating an admin, setting another person's or another admin's password,
// and a set-password link are all refused without the admin's current password, and nothing is
// created or changed; so the cookie alone can no longer mint a lasting admin. With the password,
// the real admin still creates people.
func TestStepUp_StolenAdminSession(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	root := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	ada := apitest.MustPerson(t, srv.Store, "ada", store.RoleAdmin)
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	stolen := srv.MustLogin(t, "root", root.Password)
	ageSessions(t, srv, root.User.ID, "1 day")
	do := func(method, path string, body map[string]any) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: method, Path: path, Cookie: stolen, Body: body})
	}

	resp := do(http.MethodPost, "/api/users", map[string]any{"username": "mallory", "email": "m@example.test", "role": "admin"})
	wantAPIError(t, resp, http.StatusForbidden, "current_password_required")
	if msg := string(resp.Body); !strings.Contains(msg, "current_password") {
		t.Errorf("the refusal an older client gets: got %s, want it to name current_password", msg)
	}
	if n := count(t, srv, `SELECT count(*) FROM users WHERE username = 'mallory'`); n != 0 {
		t.Fatalf("users named mallory after the stolen session's request: got %d, want 0", n)
	}
	wantAPIError(t, do(http.MethodPost, "/api/users", map[string]any{"username": "mallory", "email": "", "role": "admin",
		"current_password": "guess"}), http.StatusForbidden, "wrong_current_password")

	// Nobody's password from a session, a member's or another admin's, with or without root's.
	for _, p := range []apitest.Person{pat, ada} {
		wantAPIError(t, do(http.MethodPut, userURL(p.User.ID, "/password"), map[string]any{"password": "mallory-chose-this",
			"current_password": root.Password}), http.StatusForbidden, "password_link_required")
		if resp := login(t, srv, p.User.Username, p.Password, nil); resp.Status != http.StatusOK {
			t.Errorf("%s's own password after the refused change: got %d, want 200", p.User.Username, resp.Status)
		}
	}
	wantAPIError(t, do(http.MethodPost, userURL(pat.User.ID, "/password-link"), map[string]any{}),
		http.StatusForbidden, "current_password_required")
	if n := count(t, srv, `SELECT count(*) FROM password_links`); n != 0 {
		t.Errorf("set-password links after the refusals: got %d, want 0", n)
	}

	// The admin at the keyboard, with their password.
	resp = do(http.MethodPost, "/api/users", map[string]any{"username": "newbie", "email": "", "current_password": root.Password})
	wantStatus(t, resp, http.StatusCreated)
	var created userBody
	resp.JSON(t, &created)
	if created.Username != "newbie" || created.ID == 0 {
		t.Errorf("the created user: got %+v, want newbie", created)
	}
}

// TestStepUp_StolenSessionMintsNoLastingAdmin plays issue 22's whole chain with a stolen admin
// cookie of each age, as an attacker would, taking whatever each step gives: create an admin,
// give it a password (directly, or through a set-password link), sign in as it, make a key that
// never expires. It asserts the outcome, whichever step refuses: no new admin, no password, no
// key.
func TestStepUp_StolenSessionMintsNoLastingAdmin(t *testing.T) {
	for _, age := range []string{"0 seconds", "1 minute", "30 days"} {
		t.Run(strings.ReplaceAll(age, " ", "_"), func(t *testing.T) {
			srv := newServer(t)
			srv.MustClaim(t)
			root := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
			stolen := srv.MustLogin(t, "root", root.Password)
			ageSessions(t, srv, root.User.ID, age)
			const password = "mallory-chose-this"
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Cookie: stolen,
				Body: map[string]any{"username": "mallory", "email": "", "role": "admin"}})
			var mallory userBody
			if resp.Status == http.StatusCreated {
				resp.JSON(t, &mallory)
			}
			srv.MustDo(t, apitest.Request{Method: http.MethodPut, Path: userURL(mallory.ID, "/password"), Cookie: stolen,
				Body: map[string]any{"password": password}})
			resp = srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(mallory.ID, "/password-link"),
				Cookie: stolen, Body: map[string]any{}})
			var l passwordLink
			if resp.Status == http.StatusCreated {
				resp.JSON(t, &l)
				redeem(t, srv, l.Token, password)
			}
			if resp := login(t, srv, "mallory", password, nil); resp.Status == http.StatusOK {
				srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(mallory.ID, "/api-keys"),
					Cookie: resp.Cookie("terdut_session"), Body: map[string]any{"name": "forever", "current_password": password}})
			}
			if n := count(t, srv, `SELECT count(*) FROM users WHERE username = 'mallory'`); n != 0 {
				t.Errorf("users the stolen session made: got %d, want 0", n)
			}
			if n := count(t, srv, `SELECT count(*) FROM api_keys k JOIN users u ON u.id = k.user_id
				WHERE u.username = 'mallory' AND k.revoked_at IS NULL`); n != 0 {
				t.Errorf("live keys of the stolen session's admin: got %d, want 0", n)
			}
		})
	}
}

// TestStepUp_StaleSSOAdminSession: an admin's single sign-on session older than the sign-in
// window cannot create a person or a set-password link; signing in again can.
func TestStepUp_StaleSSOAdminSession(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) {
		o.OIDC.AdminGroups = []string{"ops-admins"}
		o.SSOKeySignInWindow = 10 * time.Minute
	})
	srv.MustClaim(t)
	p.AddUser(oidctest.User{Subject: "sub-sam", PreferredUsername: "sam", Email: "sam@example.test", Groups: []string{"ops-admins"}})
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	session := srv.MustSignInOIDC(t, p, "sub-sam")
	sam := mustMe(t, srv, session)
	ageSessions(t, srv, sam.ID, "11 minutes")
	create := func(c *http.Cookie) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Cookie: c,
			Body: map[string]any{"username": "mallory", "email": "", "role": "admin"}})
	}
	wantAPIError(t, create(session), http.StatusForbidden, "recent_sign_in_required")
	wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(pat.User.ID, "/password-link"),
		Cookie: session, Body: map[string]any{}}), http.StatusForbidden, "recent_sign_in_required")
	if n := count(t, srv, `SELECT count(*) FROM users WHERE username = 'mallory'`); n != 0 {
		t.Fatalf("users named mallory after the stale session's request: got %d, want 0", n)
	}
	wantStatus(t, create(srv.MustSignInOIDC(t, p, "sub-sam")), http.StatusCreated)
}

// passwordLink is a set-password link as POST /api/users/{id}/password-link answers it.
type passwordLink struct {
	UserID    int64     `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

func mustPasswordLink(t *testing.T, srv *apitest.Server, id int64, bearer string) passwordLink {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(id, "/password-link"), Bearer: bearer,
		Body: map[string]any{}})
	wantStatus(t, resp, http.StatusCreated)
	var l passwordLink
	resp.JSON(t, &l)
	return l
}

func redeem(t *testing.T, srv *apitest.Server, token, password string) apitest.Response {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/password-link",
		Body: map[string]any{"token": token, "password": password}})
}

// TestPasswordLinks_SingleUseExpiring: a link sets its person's password once and ends their
// sessions; it is stored only as a hash, a second use is refused, an expired link is refused,
// a newer link replaces it, and the person's own password change revokes it.
func TestPasswordLinks_SingleUseExpiring(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	admin := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	patSession := srv.MustLogin(t, "pat", pat.Password)

	l := mustPasswordLink(t, srv, pat.User.ID, admin.APIKey)
	if l.UserID != pat.User.ID || time.Until(l.ExpiresAt) > time.Hour || time.Until(l.ExpiresAt) < 55*time.Minute {
		t.Fatalf("the link: got user %d, expires in %v, want %d, an hour", l.UserID, time.Until(l.ExpiresAt), pat.User.ID)
	}
	sum := sha256.Sum256([]byte(l.Token))
	if n := count(t, srv, `SELECT count(*) FROM password_links WHERE token_hash = decode($1, 'hex')`, hex.EncodeToString(sum[:])); n != 1 {
		t.Errorf("links stored under the token's SHA-256: got %d, want 1", n)
	}
	wantStatus(t, redeem(t, srv, l.Token, "pat-chose-this-one"), http.StatusNoContent)
	if status := meStatus(t, srv, patSession); status != http.StatusUnauthorized {
		t.Errorf("pat's session after the link set the password: got %d, want 401", status)
	}
	if resp := login(t, srv, "pat", "pat-chose-this-one", nil); resp.Status != http.StatusOK {
		t.Errorf("sign-in with the password pat chose: got %d, want 200", resp.Status)
	}
	wantAPIError(t, redeem(t, srv, l.Token, "mallory-second-use"), http.StatusBadRequest, "invalid_password_link")
	if resp := login(t, srv, "pat", "mallory-second-use", nil); resp.Status != http.StatusUnauthorized {
		t.Errorf("sign-in with the second use's password: got %d, want 401", resp.Status)
	}

	expired := mustPasswordLink(t, srv, pat.User.ID, admin.APIKey)
	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE password_links SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	wantAPIError(t, redeem(t, srv, expired.Token, "too-late-password"), http.StatusBadRequest, "invalid_password_link")

	replaced := mustPasswordLink(t, srv, pat.User.ID, admin.APIKey)
	newer := mustPasswordLink(t, srv, pat.User.ID, admin.APIKey)
	wantAPIError(t, redeem(t, srv, replaced.Token, "replaced-link-password"), http.StatusBadRequest, "invalid_password_link")

	// Pat changes the password: the outstanding link is revoked with the old credentials.
	wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodPut, Path: userURL(pat.User.ID, "/password"), Bearer: pat.APIKey,
		Body: map[string]any{"password": "pat-changed-it-again", "current_password": "pat-chose-this-one"}}), http.StatusNoContent)
	wantAPIError(t, redeem(t, srv, newer.Token, "after-the-change-pw"), http.StatusBadRequest, "invalid_password_link")
	wantAPIError(t, redeem(t, srv, strings.Repeat("ab", 32), "any-password-at-all"), http.StatusBadRequest, "invalid_password_link")
}

// TestPasswordLinks_NeverForAnotherAdmin: no link for an admin who has a password, nor for a
// machine user; a new admin with no password gets one, and once they have used it, no more.
// With --password-login=false, no link is issued at all.
func TestPasswordLinks_NeverForAnotherAdmin(t *testing.T) {
	db := pgtest.MustDatabase(t)
	srv := apitest.NewServer(t, db, nil)
	principalKey := srv.MustClaim(t)
	root := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	ada := apitest.MustPerson(t, srv.Store, "ada", store.RoleAdmin)
	post := func(id int64) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(id, "/password-link"), Bearer: root.APIKey,
			Body: map[string]any{}})
	}
	wantAPIError(t, post(ada.User.ID), http.StatusForbidden, "admin_password_theirs")
	wantAPIError(t, post(root.User.ID), http.StatusForbidden, "admin_password_theirs")
	principalID, _ := whoAmIOn(t, srv, principalKey)
	wantAPIError(t, post(principalID), http.StatusForbidden, "no_password")
	// Not by API key either: choosing another admin's password takes their account.
	wantAPIError(t, srv.MustDo(t, apitest.Request{Method: http.MethodPut, Path: userURL(ada.User.ID, "/password"), Bearer: root.APIKey,
		Body: map[string]any{"password": "root-chose-for-ada"}}), http.StatusForbidden, "admin_password_theirs")
	if n := count(t, srv, `SELECT count(*) FROM password_links`); n != 0 {
		t.Fatalf("links after the refusals: got %d, want 0", n)
	}

	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: root.APIKey,
		Body: map[string]any{"username": "nova", "email": "", "role": "admin"}})
	wantStatus(t, resp, http.StatusCreated)
	var nova userBody
	resp.JSON(t, &nova)
	l := mustPasswordLink(t, srv, nova.ID, root.APIKey)
	wantStatus(t, redeem(t, srv, l.Token, "nova-chose-her-own"), http.StatusNoContent)
	wantAPIError(t, post(nova.ID), http.StatusForbidden, "admin_password_theirs")

	// With password sign-in off a password is of no use, so no link is issued or redeemed.
	off := apitest.NewServer(t, db, func(o *api.Options) { o.PasswordLogin = false })
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	l = mustPasswordLink(t, srv, pat.User.ID, root.APIKey)
	wantAPIError(t, off.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(pat.User.ID, "/password-link"),
		Bearer: root.APIKey, Body: map[string]any{}}), http.StatusForbidden, "password_login_disabled")
	wantAPIError(t, redeem(t, off, l.Token, "pat-chose-this-one"), http.StatusForbidden, "password_login_disabled")
}

// TestPasswordLinks_ConcurrentRedemptions: one link redeemed many times at once, half on each of
// two replicas over one database, sets the password once: exactly one redemption answers 204,
// every other 400 invalid_password_link, and the stored password is the winner's.
func TestPasswordLinks_ConcurrentRedemptions(t *testing.T) {
	// Every losing password is tried at sign-in below: more than the default guessing limit.
	replicas := newReplicas(t, pgtest.MustDatabase(t), 2, oidctest.NewProvider(t), func(o *api.Options) {
		o.LoginLimit = store.RateLimit{Max: 100, Window: time.Hour}
	})
	replicas[0].MustClaim(t)
	admin := apitest.MustPerson(t, replicas[0].Store, "root", store.RoleAdmin)
	pat := apitest.MustPerson(t, replicas[0].Store, "pat", store.RoleMember)
	l := mustPasswordLink(t, replicas[0], pat.User.ID, admin.APIKey)

	const n = 12
	statuses := make([]int, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := replicas[i%2].Do(apitest.Request{Method: http.MethodPost, Path: "/api/password-link",
				Body: map[string]any{"token": l.Token, "password": fmt.Sprintf("racer-%02d-password", i)}})
			if err != nil {
				t.Errorf("redemption %d: %v", i, err)
				return
			}
			statuses[i] = resp.Status
			if resp.Status != http.StatusNoContent && resp.Code() != "invalid_password_link" {
				t.Errorf("redemption %d: got %d %s, want 204 or 400 invalid_password_link", i, resp.Status, resp.Body)
			}
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, status := range statuses {
		if status == http.StatusNoContent {
			if winner >= 0 {
				t.Fatalf("redemptions %d and %d both answered 204, want one", winner, i)
			}
			winner = i
		}
	}
	if winner < 0 {
		t.Fatalf("no redemption answered 204: %v", statuses)
	}
	for i := range n {
		want := http.StatusUnauthorized
		if i == winner {
			want = http.StatusOK
		}
		if resp := login(t, replicas[i%2], "pat", fmt.Sprintf("racer-%02d-password", i), nil); resp.Status != want {
			t.Errorf("sign-in with redemption %d's password: got %d, want %d", i, resp.Status, want)
		}
	}
	if got := count(t, replicas[0], `SELECT count(*) FROM password_links`); got != 0 {
		t.Errorf("links left: got %d, want 0", got)
	}
}
