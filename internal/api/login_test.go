package api_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// login posts a username and password to the sign-in endpoint.
func login(t *testing.T, srv *apitest.Server, username, password string, header http.Header) apitest.Response {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login", Header: header,
		Body: map[string]string{"username": username, "password": password}})
}

// meStatus returns the status of GET /api/me with the cookie.
func meStatus(t *testing.T, srv *apitest.Server, c *http.Cookie) int {
	t.Helper()
	return srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c}).Status
}

func TestLogin(t *testing.T) {
	e := newCoreEnv(t, nil)

	t.Run("OK", func(t *testing.T) {
		resp := login(t, e.srv, "alice", e.alice.Password, nil)
		wantStatus(t, resp, http.StatusOK)
		var body struct{ User userBody }
		resp.JSON(t, &body)
		if body.User.ID != e.alice.User.ID {
			t.Fatalf("got %s, want alice", resp.Body)
		}
		c := resp.Cookie("terdut_session")
		if c == nil {
			t.Fatalf("got no session cookie, want one")
		}
		if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/" {
			t.Fatalf("cookie: got HttpOnly %v SameSite %v Secure %v Path %q, want HttpOnly, Lax, not Secure over http, /",
				c.HttpOnly, c.SameSite, c.Secure, c.Path)
		}
		if c.MaxAge <= 0 || c.MaxAge > int(time.Hour.Seconds()) {
			t.Fatalf("cookie Max-Age: got %d, want in (0, 3600] for a one-hour session", c.MaxAge)
		}
		if !apiKeyPattern.MatchString(c.Value) || bytes.Contains(resp.Body, []byte(c.Value)) {
			t.Fatalf("session token: got %q (in the body: %v), want 64 hex characters, only in the cookie",
				c.Value, bytes.Contains(resp.Body, []byte(c.Value)))
		}
		if got := meStatus(t, e.srv, c); got != http.StatusOK {
			t.Fatalf("GET /api/me with the cookie: got %d, want 200", got)
		}
		if n := count(t, e.srv, `SELECT count(*) FROM sessions WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, c.Value); n != 1 {
			t.Fatalf("sessions stored under the token's hash: got %d, want 1", n)
		}
	})

	t.Run("SecureCookie", func(t *testing.T) {
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
			o.PublicURL = &url.URL{Scheme: "https", Host: "terdut.example.test"}
		})
		srv.MustClaim(t)
		p := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
		c := srv.MustLogin(t, "alice", p.Password)
		if !c.Secure || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode {
			t.Fatalf("cookie with an https public URL: got Secure %v HttpOnly %v SameSite %v, want Secure, HttpOnly, Lax",
				c.Secure, c.HttpOnly, c.SameSite)
		}
	})

	t.Run("ErrInvalidCredentials", func(t *testing.T) {
		ctx := context.Background()
		// A machine user that somehow holds a password hash still cannot sign in with it.
		hash, err := e.srv.Options.Passwords.Hash("robot-password")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.srv.Store.Pool().Exec(ctx, `INSERT INTO users (username, role, kind, password_hash)
			VALUES ('robot', 'admin', 'service', $1)`, hash); err != nil {
			t.Fatal(err)
		}
		if _, err := e.srv.Store.CreateUser(ctx, store.NewUser{Username: "nopassword"}); err != nil {
			t.Fatal(err)
		}
		// bcrypt reads 72 bytes: a longer password must not pass for the one it starts with.
		long := strings.Repeat("L", 72)
		longUser, err := e.srv.Store.CreateUser(ctx, store.NewUser{Username: "longpassword"})
		if err != nil {
			t.Fatal(err)
		}
		if hash, err = e.srv.Options.Passwords.Hash(long); err != nil {
			t.Fatal(err)
		}
		if err := e.srv.Store.SetPasswordHash(ctx, longUser.ID, hash, ""); err != nil {
			t.Fatal(err)
		}
		e.srv.MustLogin(t, "longpassword", long)
		sessions := count(t, e.srv, `SELECT count(*) FROM sessions`)
		var first []byte
		for name, creds := range map[string][2]string{
			"UnknownUser":   {"nobody", e.alice.Password},
			"WrongPassword": {"alice", e.alice.Password + "x"},
			"EmptyPassword": {"alice", ""},
			"OtherCase":     {"Alice", e.alice.Password},
			"NoPassword":    {"nopassword", ""},
			"ServiceUser":   {"robot", "robot-password"},
			"Principal":     {store.PrincipalUsername, ""},
			"EmptyUsername": {"", ""},
			"PastBcrypt":    {"longpassword", long + "anything"},
		} {
			resp := login(t, e.srv, creds[0], creds[1], nil)
			if resp.Status != http.StatusUnauthorized || resp.Code() != "invalid_credentials" || resp.Cookie("terdut_session") != nil {
				t.Errorf("%s: got %d %s (cookie %v), want 401 invalid_credentials without a cookie",
					name, resp.Status, resp.Body, resp.Cookie("terdut_session"))
			}
			if first == nil {
				first = resp.Body
			} else if !bytes.Equal(resp.Body, first) {
				t.Errorf("%s: got body %s, want the same body for every failure: %s", name, resp.Body, first)
			}
		}
		if got := count(t, e.srv, `SELECT count(*) FROM sessions`); got != sessions {
			t.Fatalf("sessions: got %d, want %d", got, sessions)
		}
		if logs := e.srv.Logs.String(); strings.Contains(logs, e.alice.Password) || strings.Contains(logs, "robot-password") {
			t.Fatalf("a password appears in the server's logs")
		}
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		for name, body := range map[string]string{
			"BadJSON":      `{"username": "alice"`,
			"UnknownField": `{"username": "alice", "password": "x", "remember": true}`,
			"WrongType":    `{"username": "alice", "password": 12345678}`,
			"TrailingData": `{"username": "alice", "password": "x"} {}`,
		} {
			resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login", Body: body})
			if resp.Status != http.StatusBadRequest {
				t.Errorf("%s: got %d %s, want 400", name, resp.Status, resp.Body)
			}
		}
	})

	t.Run("ErrPasswordLoginDisabled", func(t *testing.T) {
		srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.PasswordLogin = false })
		srv.MustClaim(t)
		p := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
		resp := login(t, srv, "alice", p.Password, nil)
		wantAPIError(t, resp, http.StatusForbidden, "password_login_disabled")
		if n := count(t, srv, `SELECT count(*) FROM sessions`); n != 0 {
			t.Fatalf("sessions: got %d, want 0", n)
		}
		// API keys are unaffected.
		resp = srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: p.APIKey})
		wantStatus(t, resp, http.StatusOK)
	})

	t.Run("ErrCrossOrigin", func(t *testing.T) {
		sessions := count(t, e.srv, `SELECT count(*) FROM sessions`)
		for _, h := range []http.Header{
			{"Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"cross-site"}},
		} {
			wantAPIError(t, login(t, e.srv, "alice", e.alice.Password, h), http.StatusForbidden, "cross_origin")
		}
		if got := count(t, e.srv, `SELECT count(*) FROM sessions`); got != sessions {
			t.Fatalf("sessions: got %d, want %d", got, sessions)
		}
	})
}

func TestLogout(t *testing.T) {
	e := newCoreEnv(t, nil)
	logout := func(t *testing.T, c *http.Cookie, header http.Header) apitest.Response {
		t.Helper()
		return e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Cookie: c, Header: header})
	}

	t.Run("OK", func(t *testing.T) {
		c := e.srv.MustLogin(t, "alice", e.alice.Password)
		other := e.srv.MustLogin(t, "alice", e.alice.Password)
		resp := logout(t, c, nil)
		wantStatus(t, resp, http.StatusNoContent)
		if cleared := resp.Cookie("terdut_session"); cleared == nil || cleared.MaxAge >= 0 || cleared.Value != "" {
			t.Fatalf("cookie on sign-out: got %v, want it cleared", cleared)
		}
		if got := meStatus(t, e.srv, c); got != http.StatusUnauthorized {
			t.Fatalf("the signed-out cookie: got %d, want 401", got)
		}
		if n := count(t, e.srv, `SELECT count(*) FROM sessions
			WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND revoked_at IS NOT NULL`, c.Value); n != 1 {
			t.Fatalf("revoked sessions with the token: got %d, want 1", n)
		}
		if got := meStatus(t, e.srv, other); got != http.StatusOK {
			t.Fatalf("another session of the same user: got %d, want 200", got)
		}
		// Signing out again, or without a session, is harmless.
		wantStatus(t, logout(t, c, nil), http.StatusNoContent)
		wantStatus(t, logout(t, nil, nil), http.StatusNoContent)
	})

	t.Run("ErrCrossOrigin", func(t *testing.T) {
		c := e.srv.MustLogin(t, "alice", e.alice.Password)
		wantAPIError(t, logout(t, c, http.Header{"Origin": {"https://evil.example"}}), http.StatusForbidden, "cross_origin")
		if got := meStatus(t, e.srv, c); got != http.StatusOK {
			t.Fatalf("session after a cross-site sign-out: got %d, want 200", got)
		}
	})
}

func TestSessions_Expiry(t *testing.T) {
	const ttl = 2 * time.Minute
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.SessionTTL = ttl })
	srv.MustClaim(t)
	p := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	c := srv.MustLogin(t, "alice", p.Password)
	if c.MaxAge <= 0 || c.MaxAge > int(ttl.Seconds()) {
		t.Fatalf("cookie Max-Age: got %d, want in (0, %d]", c.MaxAge, int(ttl.Seconds()))
	}
	if n := count(t, srv, `SELECT count(*) FROM sessions
		WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND expires_at - created_at = $2::interval`, c.Value, ttl); n != 1 {
		t.Fatalf("sessions lasting %v: got %d, want 1", ttl, n)
	}
	if got := meStatus(t, srv, c); got != http.StatusOK {
		t.Fatalf("before expiry: got %d, want 200", got)
	}
	// Expire it in the database rather than wait for the clock.
	if _, err := srv.Store.Pool().Exec(context.Background(), `UPDATE sessions SET expires_at = now() - interval '1 second'
		WHERE token_hash = sha256(convert_to($1, 'UTF8'))`, c.Value); err != nil {
		t.Fatal(err)
	}
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
	wantAPIError(t, resp, http.StatusUnauthorized, "unauthorized")
	resp = srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(p.User.ID, "/api-keys"), Cookie: c,
		Body: map[string]string{"name": "after-expiry"}})
	wantAPIError(t, resp, http.StatusUnauthorized, "unauthorized")
}

func TestPasswords_Set(t *testing.T) {
	e := newCoreEnv(t, nil)
	put := func(t *testing.T, req apitest.Request, userID int64, body map[string]string) apitest.Response {
		t.Helper()
		req.Method, req.Path, req.Body = http.MethodPut, userURL(userID, "/password"), body
		return e.do(t, req)
	}
	wantLogin := func(t *testing.T, username, password string, status int) {
		t.Helper()
		if resp := login(t, e.srv, username, password, nil); resp.Status != status {
			t.Fatalf("login %s with %q: got %d %s, want %d", username, password, resp.Status, resp.Body, status)
		}
	}

	t.Run("Own", func(t *testing.T) {
		c := e.srv.MustLogin(t, "alice", e.alice.Password)
		other := e.srv.MustLogin(t, "alice", e.alice.Password)
		as := apitest.Request{Cookie: c}
		for name, current := range map[string]*string{"Missing": nil, "Empty": new(""), "Wrong": new("not-the-password")} {
			body := map[string]string{"password": "alice-new-password"}
			if current != nil {
				body["current_password"] = *current
			}
			if resp := put(t, as, e.alice.User.ID, body); resp.Status != http.StatusForbidden || resp.Code() != "wrong_current_password" {
				t.Fatalf("%s current password: got %d %s, want 403 wrong_current_password", name, resp.Status, resp.Body)
			}
		}
		wantLogin(t, "alice", e.alice.Password, http.StatusOK)
		wantLogin(t, "alice", "alice-new-password", http.StatusUnauthorized)

		resp := put(t, as, e.alice.User.ID, map[string]string{"password": "alice-new-password", "current_password": e.alice.Password})
		wantStatus(t, resp, http.StatusNoContent)
		wantLogin(t, "alice", "alice-new-password", http.StatusOK)
		wantLogin(t, "alice", e.alice.Password, http.StatusUnauthorized)
		if got := meStatus(t, e.srv, c); got != http.StatusOK {
			t.Fatalf("the session that changed the password: got %d, want 200", got)
		}
		if got := meStatus(t, e.srv, other); got != http.StatusUnauthorized {
			t.Fatalf("another session after the change: got %d, want 401", got)
		}
		e.alice.Password = "alice-new-password"
	})

	t.Run("OwnWithAPIKey", func(t *testing.T) {
		as := apitest.Request{Bearer: e.bob.APIKey}
		resp := put(t, as, e.bob.User.ID, map[string]string{"password": "bob-new-password"})
		wantAPIError(t, resp, http.StatusForbidden, "wrong_current_password")
		resp = put(t, as, e.bob.User.ID, map[string]string{"password": "bob-new-password", "current_password": e.bob.Password})
		wantStatus(t, resp, http.StatusNoContent)
		wantLogin(t, "bob", "bob-new-password", http.StatusOK)
		e.bob.Password = "bob-new-password"
	})

	t.Run("AdminOwnNeedsCurrent", func(t *testing.T) {
		resp := put(t, apitest.Request{Bearer: e.admin.APIKey}, e.admin.User.ID, map[string]string{"password": "admin-new-password"})
		wantAPIError(t, resp, http.StatusForbidden, "wrong_current_password")
		wantLogin(t, "admin", e.admin.Password, http.StatusOK)
	})

	t.Run("Admin", func(t *testing.T) {
		bobSession := e.srv.MustLogin(t, "bob", e.bob.Password)
		for _, key := range []string{e.admin.APIKey, e.principalKey} {
			resp := put(t, apitest.Request{Bearer: key}, e.bob.User.ID, map[string]string{"password": "set-by-an-admin"})
			wantStatus(t, resp, http.StatusNoContent)
		}
		wantLogin(t, "bob", "set-by-an-admin", http.StatusOK)
		wantLogin(t, "bob", e.bob.Password, http.StatusUnauthorized)
		if got := meStatus(t, e.srv, bobSession); got != http.StatusUnauthorized {
			t.Fatalf("bob's session after an admin set his password: got %d, want 401", got)
		}
		e.bob.Password = "set-by-an-admin"
	})

	t.Run("FirstPassword", func(t *testing.T) {
		u, err := e.srv.Store.CreateUser(context.Background(), store.NewUser{Username: "carol"})
		if err != nil {
			t.Fatal(err)
		}
		_, key, err := e.srv.Store.CreateAPIKey(context.Background(), u.ID, "carol")
		if err != nil {
			t.Fatal(err)
		}
		resp := put(t, apitest.Request{Bearer: key}, u.ID, map[string]string{"password": "carol-first-password"})
		wantStatus(t, resp, http.StatusNoContent)
		wantLogin(t, "carol", "carol-first-password", http.StatusOK)
	})

	t.Run("ErrServiceUser", func(t *testing.T) {
		for _, key := range []string{e.admin.APIKey, e.principalKey} {
			resp := put(t, apitest.Request{Bearer: key}, e.principalID, map[string]string{"password": "principal-password"})
			wantAPIError(t, resp, http.StatusForbidden, "service_user")
		}
		if n := count(t, e.srv, `SELECT count(*) FROM users WHERE id = $1 AND password_hash IS NOT NULL`, e.principalID); n != 0 {
			t.Fatalf("principal with a password: got %d, want 0", n)
		}
		wantLogin(t, store.PrincipalUsername, "principal-password", http.StatusUnauthorized)
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		for _, id := range []int64{e.bob.User.ID, e.admin.User.ID, e.principalID} {
			resp := put(t, apitest.Request{Bearer: e.alice.APIKey}, id, map[string]string{"password": "taken-over!"})
			wantAPIError(t, resp, http.StatusForbidden, "forbidden")
		}
		wantLogin(t, "bob", e.bob.Password, http.StatusOK)
		wantLogin(t, "bob", "taken-over!", http.StatusUnauthorized)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		resp := put(t, apitest.Request{Bearer: e.admin.APIKey}, 424242, map[string]string{"password": "nobody-password"})
		wantAPIError(t, resp, http.StatusNotFound, "not_found")
	})

	t.Run("ErrInvalidPassword", func(t *testing.T) {
		for _, pw := range []string{"", "short12", strings.Repeat("p", 73)} {
			resp := put(t, apitest.Request{Bearer: e.admin.APIKey}, e.bob.User.ID, map[string]string{"password": pw})
			if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_password" {
				t.Fatalf("password of %d bytes: got %d %s, want 400 invalid_password", len(pw), resp.Status, resp.Body)
			}
		}
		wantLogin(t, "bob", e.bob.Password, http.StatusOK)
	})
}

// TestCrossOrigin proves that a cookie-authenticated request that changes state must come
// from this site, while the same request with an API key (which a browser never sends on
// its own) is accepted from anywhere.
func TestCrossOrigin(t *testing.T) {
	e := newCoreEnv(t, nil)
	aliceCookie := e.srv.MustLogin(t, "alice", e.alice.Password)
	adminCookie := e.srv.MustLogin(t, "admin", e.admin.Password)
	victim := mustCreateKey(t, e, e.alice.User.ID, e.alice.APIKey, "victim")
	crossSite := map[string]http.Header{
		"Origin":       {"Origin": {"https://evil.example"}},
		"SecFetchSite": {"Sec-Fetch-Site": {"cross-site"}},
		"SameSiteSub":  {"Sec-Fetch-Site": {"same-site"}},
	}
	requests := map[string]apitest.Request{
		"CreateKey":   {Method: http.MethodPost, Path: userURL(e.alice.User.ID, "/api-keys"), Cookie: aliceCookie, Body: map[string]string{"name": "csrf", "current_password": e.alice.Password}},
		"DeleteKey":   {Method: http.MethodDelete, Path: userURL(e.alice.User.ID, "/api-keys/"+strconv.FormatInt(victim.ID, 10)), Cookie: aliceCookie},
		"SetPassword": {Method: http.MethodPut, Path: userURL(e.alice.User.ID, "/password"), Cookie: aliceCookie, Body: map[string]string{"password": "csrf-password", "current_password": e.alice.Password}},
		"CreateUser":  {Method: http.MethodPost, Path: "/api/users", Cookie: adminCookie, Body: map[string]string{"username": "csrf", "role": "admin"}},
		"DeleteUser":  {Method: http.MethodDelete, Path: userURL(e.bob.User.ID, ""), Cookie: adminCookie},
	}
	snapshot := func(t *testing.T) [2]int {
		t.Helper()
		return [2]int{
			count(t, e.srv, `SELECT count(*) FROM users`),
			count(t, e.srv, `SELECT count(*) FROM api_keys WHERE revoked_at IS NULL`),
		}
	}
	var aliceHash string
	if err := e.srv.Store.Pool().QueryRow(context.Background(), `SELECT password_hash FROM users WHERE id = $1`,
		e.alice.User.ID).Scan(&aliceHash); err != nil {
		t.Fatal(err)
	}

	t.Run("ErrCrossOrigin", func(t *testing.T) {
		before := snapshot(t)
		for hname, h := range crossSite {
			for rname, req := range requests {
				req.Header = h
				resp := e.do(t, req)
				if resp.Status != http.StatusForbidden || resp.Code() != "cross_origin" {
					t.Errorf("%s with %s: got %d %s, want 403 cross_origin", rname, hname, resp.Status, resp.Body)
				}
			}
		}
		if after := snapshot(t); after != before {
			t.Fatalf("users, live keys: got %v, want %v", after, before)
		}
		if n := count(t, e.srv, `SELECT count(*) FROM users WHERE id = $1 AND password_hash = $2`, e.alice.User.ID, aliceHash); n != 1 {
			t.Fatalf("alice's password changed by a cross-site request")
		}
		if id, _ := whoAmI(t, e, victim.Key); id != e.alice.User.ID {
			t.Fatalf("the victim key after cross-site revocations: got user %d, want %d", id, e.alice.User.ID)
		}
	})

	t.Run("ReadsAllowed", func(t *testing.T) {
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: aliceCookie,
			Header: http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}})
		wantStatus(t, resp, http.StatusOK)
	})

	t.Run("SameOrigin", func(t *testing.T) {
		for hname, h := range map[string]http.Header{
			"Origin":       {"Origin": {e.srv.URL}},
			"SecFetchSite": {"Sec-Fetch-Site": {"same-origin"}},
			"None":         nil,
		} {
			req := requests["CreateKey"]
			req.Header = h
			if resp := e.do(t, req); resp.Status != http.StatusCreated {
				t.Errorf("CreateKey with %s: got %d %s, want 201", hname, resp.Status, resp.Body)
			}
		}
	})

	t.Run("APIKey", func(t *testing.T) {
		// The same cross-site requests, authenticated by API key instead of the cookie.
		keys := map[string]string{"CreateKey": e.alice.APIKey, "DeleteKey": e.alice.APIKey, "SetPassword": e.alice.APIKey,
			"CreateUser": e.admin.APIKey, "DeleteUser": e.admin.APIKey}
		want := map[string]int{"CreateKey": http.StatusCreated, "DeleteKey": http.StatusNoContent,
			"SetPassword": http.StatusNoContent, "CreateUser": http.StatusCreated, "DeleteUser": http.StatusNoContent}
		for _, rname := range []string{"CreateKey", "DeleteKey", "SetPassword", "CreateUser", "DeleteUser"} {
			req := requests[rname]
			req.Cookie, req.Bearer = nil, keys[rname]
			req.Header = http.Header{"Origin": {"https://evil.example"}, "Sec-Fetch-Site": {"cross-site"}}
			if resp := e.do(t, req); resp.Status != want[rname] {
				t.Errorf("%s with an API key from another site: got %d %s, want %d", rname, resp.Status, resp.Body, want[rname])
			}
		}
	})
}
