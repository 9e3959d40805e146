package api_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// logLine is one line of an instance's JSON log.
type logLine map[string]any

// logLines returns the lines srv logged that match keep.
func logLines(t *testing.T, srv *apitest.Server, keep func(logLine) bool) []logLine {
	t.Helper()
	var out []logLine
	for _, raw := range strings.Split(strings.TrimSpace(srv.Logs.String()), "\n") {
		if raw == "" {
			continue
		}
		var l logLine
		if err := json.Unmarshal([]byte(raw), &l); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		if keep(l) {
			out = append(out, l)
		}
	}
	return out
}

// securityEvents returns the security events named name that srv logged.
func securityEvents(t *testing.T, srv *apitest.Server, name string) []logLine {
	t.Helper()
	return logLines(t, srv, func(l logLine) bool { return l["msg"] == "security event" && l["event"] == name })
}

// path reads a dotted path of nested objects in a log line, such as "actor.id".
func (l logLine) path(p string) any {
	var v any = map[string]any(l)
	for _, k := range strings.Split(p, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// wantEvent fails unless the latest security event name that srv logged has the fields of
// want (dotted paths to values, numbers as float64), a client address and a request id.
func wantEvent(t *testing.T, srv *apitest.Server, name string, want map[string]any) logLine {
	t.Helper()
	got := securityEvents(t, srv, name)
	if len(got) == 0 {
		t.Fatalf("%s: got no line, want one", name)
	}
	l := got[len(got)-1]
	for k, v := range want {
		if l.path(k) != v {
			t.Errorf("%s: %s got %v, want %v (line %v)", name, k, l.path(k), v, l)
		}
	}
	if l["client_addr"] != "127.0.0.1" || l["request_id"] == "" || l["request_id"] == nil {
		t.Errorf("%s: got client_addr %v and request_id %v, want 127.0.0.1 and an id", name, l["client_addr"], l["request_id"])
	}
	return l
}

// TestSecurityEvents: every security event is one log line naming the event, its outcome,
// its actor, its target, the client's address and the request's id, and no secret is in any.
func TestSecurityEvents(t *testing.T) {
	srv, p := newOIDCServer(t, func(o *api.Options) {
		o.OIDC.AllowedGroups, o.OIDC.AdminGroups = []string{"users"}, []string{"admins"}
		o.LoginLimit = store.RateLimit{Max: 3, Window: 60e9}
	})
	// While pending, sign-ins are refused.
	wantStatus(t, login(t, srv, "nobody", "some-password-0", nil), http.StatusServiceUnavailable)
	wantEvent(t, srv, "login.password.refused", map[string]any{"outcome": "refused", "reason": "bootstrap_pending",
		"actor.kind": "anonymous", "level": "WARN"})

	wantStatus(t, srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: strings.Repeat("x", 40)}),
		http.StatusUnauthorized)
	wantEvent(t, srv, "operator.refused", map[string]any{"outcome": "refused", "reason": "wrong_token", "actor.kind": "anonymous"})

	key := srv.MustClaim(t)
	principal := mustUserID(t, srv, store.PrincipalUsername)
	asPrincipal := func(method, path string, body any) apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: method, Path: path, Bearer: key, Body: body})
	}
	var alice struct{ ID int64 }
	resp := asPrincipal(http.MethodPost, "/api/users", map[string]string{"username": "alice", "email": "alice@example.test"})
	wantStatus(t, resp, http.StatusCreated)
	resp.JSON(t, &alice)
	byPrincipal := map[string]any{"outcome": "succeeded", "actor.kind": "user", "actor.id": float64(principal),
		"actor.user_kind": "service", "target.id": float64(alice.ID), "level": "INFO"}
	wantEvent(t, srv, "user.created", byPrincipal)

	const password = "alice-secret-password-1"
	wantStatus(t, asPrincipal(http.MethodPut, fmt.Sprintf("/api/users/%d/password", alice.ID), map[string]string{"password": password}),
		http.StatusNoContent)
	wantEvent(t, srv, "user.password_set", byPrincipal)

	wantStatus(t, login(t, srv, "alice", "not-her-password", nil), http.StatusUnauthorized)
	wantEvent(t, srv, "login.password.failed", map[string]any{"outcome": "failed", "target.id": float64(alice.ID), "actor.kind": "anonymous",
		"level": "WARN"})
	aliceSession := srv.MustLogin(t, "alice", password)
	wantEvent(t, srv, "login.password.succeeded", map[string]any{"actor.id": float64(alice.ID), "target.username": "alice"})
	// A wrong current_password (here for a key from her session) is a failed authentication too,
	// and so is its refusal past the guessing limit.
	reauth := func() apitest.Response {
		return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/users/%d/api-keys", alice.ID),
			Cookie: aliceSession, Body: map[string]string{"name": "stolen", "current_password": "not-her-password"}})
	}
	wantAPIError(t, reauth(), http.StatusForbidden, "wrong_current_password")
	wantEvent(t, srv, "reauth.failed", map[string]any{"outcome": "failed", "actor.id": float64(alice.ID),
		"target.username": "alice", "level": "WARN"})
	for i, resp := 0, reauth(); resp.Status != http.StatusTooManyRequests; i, resp = i+1, reauth() {
		wantAPIError(t, resp, http.StatusForbidden, "wrong_current_password")
		if i == 5 {
			t.Fatal("wrong current passwords: no 429 past --password-login-limit 3")
		}
	}
	wantEvent(t, srv, "reauth.locked_out", map[string]any{"outcome": "refused", "actor.id": float64(alice.ID)})
	for range 3 { // the limit: the next one is refused
		login(t, srv, "mallory", "guess-guess-guess", nil)
	}
	wantAPIError(t, login(t, srv, "mallory", "guess-guess-guess", nil), http.StatusTooManyRequests, "rate_limited")
	wantEvent(t, srv, "login.locked_out", map[string]any{"outcome": "refused", "username": nil})

	resp = asPrincipal(http.MethodPost, fmt.Sprintf("/api/users/%d/api-keys", alice.ID), map[string]string{"name": "laptop"})
	wantStatus(t, resp, http.StatusCreated)
	var k struct {
		ID  int64
		Key string
	}
	resp.JSON(t, &k)
	wantEvent(t, srv, "api_key.created", byPrincipal)
	wantStatus(t, asPrincipal(http.MethodDelete, fmt.Sprintf("/api/users/%d/api-keys/%d", alice.ID, k.ID), nil), http.StatusNoContent)
	wantEvent(t, srv, "api_key.revoked", map[string]any{"actor.id": float64(principal), "detail": fmt.Sprintf("key %d", k.ID)})
	wantStatus(t, asPrincipal(http.MethodDelete, fmt.Sprintf("/api/users/%d", alice.ID), nil), http.StatusNoContent)
	// Once deleted, the id names nobody: the event keeps the name the person had.
	deleted := maps.Clone(byPrincipal)
	deleted["target.username"] = "alice"
	wantEvent(t, srv, "user.deleted", deleted)

	// Single sign-on: a person provisioned, signed in, given another role by their groups, refused.
	p.AddUser(oidctest.User{Subject: "sub-sid", PreferredUsername: "sid", Groups: []string{"users"}})
	srv.MustSignInOIDC(t, p, "sub-sid")
	provider := map[string]any{"actor.kind": "provider", "actor.issuer": p.URL(), "target.username": "sid"}
	wantEvent(t, srv, "user.created", provider)
	wantEvent(t, srv, "login.sso.succeeded", map[string]any{"actor.kind": "user", "target.username": "sid", "created": true})
	p.AddUser(oidctest.User{Subject: "sub-sid", PreferredUsername: "sid", Groups: []string{"users", "admins"}})
	srv.MustSignInOIDC(t, p, "sub-sid")
	wantEvent(t, srv, "user.role_changed", map[string]any{"actor.kind": "provider", "previous_role": "member", "role": "admin"})
	p.AddUser(oidctest.User{Subject: "sub-sid", PreferredUsername: "sid", Groups: []string{"visitors"}})
	if resp, err := srv.SignInOIDC(t.Context(), p, "sub-sid"); err != nil || resp.Status != http.StatusForbidden {
		t.Fatalf("sign-in outside the allowed groups: got %d, %v, want 403", resp.Status, err)
	}
	wantEvent(t, srv, "login.sso.refused", map[string]any{"reason": "group_not_allowed"})
	wantEvent(t, srv, "user.deprovisioned", map[string]any{"actor.kind": "provider", "target.id": float64(mustUserID(t, srv, "sid"))})

	logs := srv.Logs.String()
	for name, secret := range map[string]string{"the claim's key": key, "alice's key": k.Key, "alice's password": password,
		"the operator token": apitest.OperatorToken} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %s", name)
		}
	}
}

// mustUserID returns the id of the user with this name.
func mustUserID(t *testing.T, srv *apitest.Server, username string) int64 {
	t.Helper()
	var id int64
	if err := srv.Store.Pool().QueryRow(t.Context(), `SELECT id FROM users WHERE username = $1`, username).Scan(&id); err != nil {
		t.Fatalf("user %s: %v", username, err)
	}
	return id
}

// TestSecurityEvents_TypedNameNotLogged: what was typed into the username box is often a
// password typed in the wrong field, so a failed or locked-out password sign-in never logs it:
// it names the person by id when the name is theirs, else by a short keyed tag that is the same
// for the same name (so repeated guesses read together) and tells nothing offline.
func TestSecurityEvents_TypedNameNotLogged(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.LoginLimit = store.RateLimit{Max: 2, Window: 60e9} })
	srv.MustClaim(t)
	alice := apitest.MustPerson(t, srv.Store, "alice", store.RoleMember).User
	const typo = "Correct-Horse-Battery-Staple-9" // a password in the username box
	for range 3 {
		login(t, srv, typo, "whatever-else-1", nil)
	}
	login(t, srv, strings.Repeat("é", 5000), "some-wrong-password", nil)
	wantStatus(t, login(t, srv, "alice", "not-her-password", nil), http.StatusUnauthorized)
	if logs := srv.Logs.String(); strings.Contains(logs, typo) || strings.Contains(logs, "éééé") {
		t.Errorf("the log holds what was typed as a username:\n%s", logs)
	}
	failed := securityEvents(t, srv, "login.password.failed")
	if len(failed) != 4 {
		t.Fatalf("login.password.failed: got %d lines, want 4", len(failed))
	}
	tag, _ := failed[0]["username_tag"].(string)
	if len(tag) != 12 || failed[1]["username_tag"] != tag || failed[2]["username_tag"] == tag || failed[0]["username"] != nil {
		t.Errorf("an unknown name: got username_tag %v, %v, %v and username %v, want one 12-character tag for the same name, another for another, no username",
			failed[0]["username_tag"], failed[1]["username_tag"], failed[2]["username_tag"], failed[0]["username"])
	}
	wantEvent(t, srv, "login.locked_out", map[string]any{"outcome": "refused", "username_tag": tag, "username": nil})
	wantEvent(t, srv, "login.password.failed", map[string]any{"target.id": float64(alice.ID), "target.username": "alice",
		"username_tag": nil, "username": nil})
}
