package api_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"regexp"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// The contract test decodes every answer of the users and keys API into client-side types,
// as the clients people already run do (encoding/json, unknown fields ignored): the Go
// client's own client.User and client.APIKey, which know nothing of the server's types, and
// the plain structs below. An answer wrapped in an envelope or a field renamed fails it.

type (
	clientUser   = client.User
	clientAPIKey = client.APIKey
)

// clientMe is GET /api/me as a client decodes it.
type clientMe struct {
	User        clientUser `json:"user"`
	HasPassword bool       `json:"has_password"`
}

// clientError is any error answer as a client decodes it.
type clientError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// decodeAs decodes resp's body into v as a client would, failing unless the status is want,
// the body is JSON and it decodes.
func decodeAs(t *testing.T, what string, resp apitest.Response, want int, v any) {
	t.Helper()
	if resp.Status != want {
		t.Fatalf("%s: got %d %s, want %d", what, resp.Status, resp.Body, want)
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		t.Fatalf("%s: a client cannot decode %s into %T: %v", what, resp.Body, v, err)
	}
}

// fields returns the names of the JSON object's fields.
func fields(t *testing.T, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("got %s, want a JSON object: %v", raw, err)
	}
	return m
}

// checkUser fails unless u is a complete user as the contract shows one.
func checkUser(t *testing.T, what string, u clientUser, username, email string) {
	t.Helper()
	if u.ID <= 0 || u.Username != username || u.Email != email || time.Since(u.CreatedAt).Abs() > time.Hour {
		t.Errorf("%s: got %+v, want id > 0, username %q, e-mail %q and a recent created_at", what, u, username, email)
	}
}

func TestContract_ClientShapes(t *testing.T) {
	e := newCoreEnv(t, nil)
	admin := e.admin.APIKey

	// POST /api/users -> 201, the user object itself; email always present, "" when none.
	var created clientUser
	decodeAs(t, "create user", e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: admin,
		Body: map[string]string{"username": "carol", "email": "carol@example.test"}}), http.StatusCreated, &created)
	checkUser(t, "created user", created, "carol", "carol@example.test")
	resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: admin,
		Body: map[string]string{"username": "dan"}})
	var noEmail clientUser
	decodeAs(t, "create user without e-mail", resp, http.StatusCreated, &noEmail)
	checkUser(t, "user without e-mail", noEmail, "dan", "")
	if f := fields(t, resp.Body); string(f["email"]) != `""` || string(f["created_at"]) == "" {
		t.Errorf("user without e-mail: got %s, want email \"\" and created_at present", resp.Body)
	}

	// GET /api/users -> 200, a JSON array of users.
	var users []clientUser
	decodeAs(t, "list users", e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: admin}),
		http.StatusOK, &users)
	byName := map[string]clientUser{}
	for _, u := range users {
		byName[u.Username] = u
	}
	if len(users) != 6 || byName["carol"] != created || byName["dan"] != noEmail {
		t.Errorf("list users: got %+v, want 6 users with carol %+v and dan %+v", users, created, noEmail)
	}
	checkUser(t, "listed alice", byName["alice"], "alice", "alice@example.test")

	// GET /api/me -> {"user": {...}, "has_password": bool}.
	var me clientMe
	decodeAs(t, "me", e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: e.alice.APIKey}),
		http.StatusOK, &me)
	if me.User != byName["alice"] || !me.HasPassword {
		t.Errorf("me: got %+v, want alice %+v with a password", me, byName["alice"])
	}

	// POST /api/users/{id}/api-keys -> 201 {id, user_id, name, key, created_at, last_used_at: null}.
	keysPath := userURL(created.ID, "/api-keys")
	resp = e.do(t, apitest.Request{Method: http.MethodPost, Path: keysPath, Bearer: admin, Body: map[string]string{"name": "laptop"}})
	var key clientAPIKey
	decodeAs(t, "create key", resp, http.StatusCreated, &key)
	if key.ID <= 0 || key.UserID != created.ID || key.Name != "laptop" || !hexKey.MatchString(key.Key) ||
		time.Since(key.CreatedAt).Abs() > time.Hour || key.LastUsedAt != nil {
		t.Errorf("created key: got %s, want carol's key with a 64-hex secret, unused", resp.Body)
	}
	if f := fields(t, resp.Body); string(f["last_used_at"]) != "null" {
		t.Errorf("created key: got last_used_at %s, want null", f["last_used_at"])
	}

	// The new key works, then GET .../api-keys -> an array of the same objects without key.
	decodeAs(t, "me with the new key", e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: key.Key}),
		http.StatusOK, &me)
	if me.User != created || me.HasPassword {
		t.Errorf("me with carol's key: got %+v, want %+v without a password", me, created)
	}
	resp = e.do(t, apitest.Request{Method: http.MethodGet, Path: keysPath, Bearer: admin})
	var keys []clientAPIKey
	decodeAs(t, "list keys", resp, http.StatusOK, &keys)
	if len(keys) != 1 || keys[0].ID != key.ID || keys[0].UserID != created.ID || keys[0].Name != "laptop" ||
		!keys[0].CreatedAt.Equal(key.CreatedAt) || keys[0].LastUsedAt == nil || keys[0].Key != "" {
		t.Errorf("list keys: got %s, want the one key, used, without its secret", resp.Body)
	}
	var rawKeys []map[string]json.RawMessage
	_ = json.Unmarshal(resp.Body, &rawKeys)
	for _, k := range rawKeys {
		if _, ok := k["key"]; ok {
			t.Errorf("list keys: got a key field in %s, want none", resp.Body)
		}
	}

	// DELETE endpoints -> 204 with no body: the key, then its user.
	for _, path := range []string{userURL(created.ID, "/api-keys/") + jsonNumber(key.ID), userURL(created.ID, "")} {
		resp := e.do(t, apitest.Request{Method: http.MethodDelete, Path: path, Bearer: admin})
		if resp.Status != http.StatusNoContent || len(bytes.TrimSpace(resp.Body)) != 0 {
			t.Errorf("DELETE %s: got %d %q, want 204 without a body", path, resp.Status, resp.Body)
		}
	}

	// Every error -> a JSON object with a human-readable error and a stable code.
	for _, tc := range []struct {
		what   string
		req    apitest.Request
		status int
		code   string
	}{
		{"no credentials", apitest.Request{Method: http.MethodGet, Path: "/api/users"}, http.StatusUnauthorized, "unauthorized"},
		{"member creates a user", apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: e.alice.APIKey, Body: map[string]string{"username": "mallory"}}, http.StatusForbidden, "forbidden"},
		{"deleted user's keys", apitest.Request{Method: http.MethodGet, Path: keysPath, Bearer: admin}, http.StatusNotFound, "not_found"},
		{"name taken", apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: admin, Body: map[string]string{"username": "alice"}}, http.StatusConflict, "conflict"},
		{"bad JSON", apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: admin, Body: "{"}, http.StatusBadRequest, "invalid_json"},
		{"principal", apitest.Request{Method: http.MethodDelete, Path: userURL(e.principalID, ""), Bearer: admin}, http.StatusForbidden, "protected_user"},
		{"no such endpoint", apitest.Request{Method: http.MethodGet, Path: "/api/nothing", Bearer: admin}, http.StatusNotFound, "not_found"},
	} {
		var ce clientError
		decodeAs(t, tc.what, e.do(t, tc.req), tc.status, &ce)
		if ce.Code != tc.code || len(ce.Error) < 10 {
			t.Errorf("%s: got %+v, want code %s and a sentence", tc.what, ce, tc.code)
		}
	}
	if _, err := e.srv.Store.User(t.Context(), created.ID); err != store.ErrNotFound {
		t.Errorf("carol after the delete: got %v, want ErrNotFound", err)
	}
}

func jsonNumber(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}
