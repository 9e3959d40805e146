package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// coreEnv is a claimed install with the bootstrap principal, a human admin and two members,
// each with the credentials to act as them.
type coreEnv struct {
	srv          *apitest.Server
	principalID  int64
	principalKey string
	admin        apitest.Person
	alice, bob   apitest.Person // members
}

// newCoreEnv starts a server on a fresh database, claims it and creates the people.
func newCoreEnv(t *testing.T, mutate func(*api.Options)) coreEnv {
	t.Helper()
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), mutate)
	e := coreEnv{srv: srv, principalKey: srv.MustClaim(t)}
	b, err := srv.Store.Bootstrap(context.Background())
	if err != nil || b.PrincipalID == nil {
		t.Fatalf("bootstrap state after the claim: got %+v, %v, want a principal", b, err)
	}
	e.principalID = *b.PrincipalID
	e.admin = apitest.MustPerson(t, srv.Store, "admin", store.RoleAdmin)
	e.alice = apitest.MustPerson(t, srv.Store, "alice", store.RoleMember)
	e.bob = apitest.MustPerson(t, srv.Store, "bob", store.RoleMember)
	return e
}

// do sends req and fails the test if it cannot be sent.
func (e coreEnv) do(t *testing.T, req apitest.Request) apitest.Response {
	t.Helper()
	return e.srv.MustDo(t, req)
}

// userURL is the path of a user, or of something of theirs when rest is not empty.
func userURL(id int64, rest string) string {
	return fmt.Sprintf("/api/users/%d%s", id, rest)
}

// wantAPIError fails the test unless resp is the JSON error {"error", "code"} with this status and code.
func wantAPIError(t *testing.T, resp apitest.Response, status int, code string) {
	t.Helper()
	var body struct {
		Error *string `json:"error"`
		Code  *string `json:"code"`
	}
	resp.JSON(t, &body)
	if resp.Status != status || body.Code == nil || *body.Code != code || body.Error == nil || *body.Error == "" {
		t.Fatalf("got %d %s, want %d with code %q and a message", resp.Status, resp.Body, status, code)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Fatalf("Content-Type: got %q, want application/json", ct)
	}
}

// wantStatus fails the test unless resp has this status.
func wantStatus(t *testing.T, resp apitest.Response, status int) {
	t.Helper()
	if resp.Status != status {
		t.Fatalf("got %d %s, want %d", resp.Status, resp.Body, status)
	}
}

type userBody struct {
	ID        int64  `json:"id"`
	Username  string `json:"username"`
	Email     string `json:"email"`
	Role      string `json:"role"`
	Kind      string `json:"kind"`
	CreatedAt string `json:"created_at"`
}

func mustUsers(t *testing.T, e coreEnv) map[string]userBody {
	t.Helper()
	resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.admin.APIKey})
	wantStatus(t, resp, http.StatusOK)
	var body []userBody
	resp.JSON(t, &body)
	users := make(map[string]userBody, len(body))
	for _, u := range body {
		users[u.Username] = u
	}
	return users
}

func TestUsers_Me(t *testing.T) {
	e := newCoreEnv(t, nil)
	var body struct {
		User        userBody `json:"user"`
		HasPassword *bool    `json:"has_password"`
	}

	t.Run("OK", func(t *testing.T) {
		for name, req := range map[string]apitest.Request{
			"APIKey":  {Method: http.MethodGet, Path: "/api/me", Bearer: e.alice.APIKey},
			"Session": {Method: http.MethodGet, Path: "/api/me", Cookie: e.srv.MustLogin(t, "alice", e.alice.Password)},
		} {
			resp := e.do(t, req)
			wantStatus(t, resp, http.StatusOK)
			resp.JSON(t, &body)
			if body.User.ID != e.alice.User.ID || body.User.Username != "alice" || body.User.Email != "alice@example.test" ||
				body.User.Role != "member" || body.User.CreatedAt == "" || body.HasPassword == nil || !*body.HasPassword {
				t.Fatalf("%s: got %s, want alice, a member with a password", name, resp.Body)
			}
		}
	})

	t.Run("Principal", func(t *testing.T) {
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: e.principalKey})
		wantStatus(t, resp, http.StatusOK)
		resp.JSON(t, &body)
		if body.User.Username != store.PrincipalUsername || body.User.Role != "admin" || body.User.Kind != "service" || *body.HasPassword {
			t.Fatalf("got %s, want the principal: an admin machine user without a password", resp.Body)
		}
	})
}

func TestUsers_List(t *testing.T) {
	e := newCoreEnv(t, nil)

	t.Run("OK", func(t *testing.T) {
		for _, key := range []string{e.admin.APIKey, e.principalKey} {
			resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: key})
			wantStatus(t, resp, http.StatusOK)
			var body []map[string]any
			resp.JSON(t, &body)
			if len(body) != 4 {
				t.Fatalf("got %d users, want 4: %s", len(body), resp.Body)
			}
			for _, u := range body {
				for field := range u {
					if strings.Contains(field, "password") || strings.Contains(field, "hash") {
						t.Fatalf("user %v: got field %q, want no password data", u["username"], field)
					}
				}
			}
		}
	})

	t.Run("MemberSeesTheRoster", func(t *testing.T) {
		wantRoster(t, e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Bearer: e.alice.APIKey}))
	})
}

// wantRoster fails unless resp is a member's GET /api/users: 200 and a non-empty array whose
// people show id, username, email and created_at alone, nothing of roles, kinds or sign-in.
func wantRoster(t *testing.T, resp apitest.Response) {
	t.Helper()
	var people []map[string]json.RawMessage
	if resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &people) != nil || len(people) == 0 {
		t.Fatalf("GET /api/users as a member: got %d %s, want 200 and the roster", resp.Status, resp.Body)
	}
	for _, p := range people {
		if len(p) != 4 || p["id"] == nil || p["username"] == nil || p["email"] == nil || p["created_at"] == nil {
			t.Fatalf("GET /api/users as a member: an entry %s, want id, username, email and created_at alone", resp.Body)
		}
	}
}

func TestUsers_Create(t *testing.T) {
	e := newCoreEnv(t, nil)
	create := func(t *testing.T, key string, body any) apitest.Response {
		t.Helper()
		return e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key, Body: body})
	}

	t.Run("OK", func(t *testing.T) {
		resp := create(t, e.admin.APIKey, map[string]string{"username": "carol.o-k_1@x", "email": "carol@example.test"})
		wantStatus(t, resp, http.StatusCreated)
		var body userBody
		resp.JSON(t, &body)
		if body.ID == 0 || body.Username != "carol.o-k_1@x" || body.Role != "member" || body.Kind != "human" {
			t.Fatalf("got %s, want a new human member", resp.Body)
		}
		if got := mustUsers(t, e)["carol.o-k_1@x"]; got != body {
			t.Fatalf("listed: got %+v, want %+v", got, body)
		}
		// The principal may create users too, including admins.
		resp = create(t, e.principalKey, map[string]string{"username": "dave", "role": "admin"})
		wantStatus(t, resp, http.StatusCreated)
		resp.JSON(t, &body)
		if body.Role != "admin" {
			t.Fatalf("got %s, want an admin", resp.Body)
		}
	})

	t.Run("ErrConflict", func(t *testing.T) {
		for _, name := range []string{"alice", store.PrincipalUsername, "Terdut-Operator-Bootstrap", strings.ToUpper(store.PrincipalUsername)} {
			before := count(t, e.srv, `SELECT count(*) FROM users`)
			resp := create(t, e.admin.APIKey, map[string]string{"username": name})
			wantAPIError(t, resp, http.StatusConflict, "conflict")
			if after := count(t, e.srv, `SELECT count(*) FROM users`); after != before {
				t.Fatalf("users after creating %q: got %d, want %d", name, after, before)
			}
		}
	})

	t.Run("ErrForbidden", func(t *testing.T) {
		resp := create(t, e.alice.APIKey, map[string]string{"username": "eve", "role": "admin"})
		wantAPIError(t, resp, http.StatusForbidden, "forbidden")
		if _, ok := mustUsers(t, e)["eve"]; ok {
			t.Fatalf("eve exists after a refused create")
		}
	})

	t.Run("ErrInvalidUsername", func(t *testing.T) {
		for name, username := range map[string]string{
			"Empty":          "",
			"Space":          "bob smith",
			"LeadingSpace":   " bob",
			"TrailingSpace":  "bob ",
			"Tab":            "bob\tsmith",
			"Newline":        "bob\nadmin",
			"NUL":            "bob\x00",
			"DEL":            "bob\x7f",
			"CyrillicA":      "\u0430lice", // looks like "alice"
			"CyrillicInside": "b\u043eb",   // Cyrillic о
			"FullwidthA":     "\uff41lice",
			"ZeroWidthSpace": "al\u200bice",
			"Accented":       "jos\u00e9",
			"LeadingDot":     ".bob",
			"LeadingDash":    "-bob",
			"Slash":          "bob/admin",
			"TooLong":        strings.Repeat("a", 65),
			"InvalidUTF8":    "bob\xff",
		} {
			resp := create(t, e.admin.APIKey, map[string]string{"username": username})
			if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_username" {
				t.Errorf("%s %q: got %d %s, want 400 invalid_username", name, username, resp.Status, resp.Body)
			}
		}
		resp := create(t, e.admin.APIKey, map[string]string{"username": strings.Repeat("a", 64)})
		wantStatus(t, resp, http.StatusCreated)
	})

	t.Run("ErrBadRequest", func(t *testing.T) {
		for name, tc := range map[string]struct {
			body any
			code string
		}{
			"Role":          {map[string]string{"username": "frank", "role": "root"}, "invalid_role"},
			"EmailControl":  {map[string]string{"username": "frank", "email": "frank@example.test\r\nBcc: x"}, "invalid_email"},
			"EmailTooLong":  {map[string]string{"username": "frank", "email": strings.Repeat("e", 255)}, "invalid_email"},
			"UnknownField":  {map[string]any{"username": "frank", "admin": true}, "unknown_field"},
			"WrongType":     {`{"username": 42}`, "invalid_json"},
			"BadJSON":       {`{"username": "frank"`, "invalid_json"},
			"TrailingData":  {`{"username": "frank"} {"username": "grace"}`, "invalid_json"},
			"TrailingJunk":  {`{"username": "frank"}x`, "invalid_json"},
			"Empty":         {"", "invalid_json"},
			"NotAnObject":   {`["frank"]`, "invalid_json"},
			"IDNotSettable": {map[string]any{"username": "frank", "id": 1}, "unknown_field"},
		} {
			resp := create(t, e.admin.APIKey, tc.body)
			if resp.Status != http.StatusBadRequest || resp.Code() != tc.code {
				t.Errorf("%s: got %d %s, want 400 %s", name, resp.Status, resp.Body, tc.code)
			}
		}
		if _, ok := mustUsers(t, e)["frank"]; ok {
			t.Fatalf("frank exists after only bad requests")
		}
	})
}

func TestUsers_Delete(t *testing.T) {
	e := newCoreEnv(t, nil)
	del := func(t *testing.T, key string, id int64) apitest.Response {
		t.Helper()
		return e.do(t, apitest.Request{Method: http.MethodDelete, Path: userURL(id, ""), Bearer: key})
	}

	t.Run("ErrForbidden", func(t *testing.T) {
		// A member may delete neither someone else nor themselves.
		for _, id := range []int64{e.bob.User.ID, e.admin.User.ID, e.alice.User.ID} {
			wantAPIError(t, del(t, e.alice.APIKey, id), http.StatusForbidden, "forbidden")
		}
		if got := len(mustUsers(t, e)); got != 4 {
			t.Fatalf("users: got %d, want 4", got)
		}
	})

	t.Run("ErrProtectedUser", func(t *testing.T) {
		for _, key := range []string{e.admin.APIKey, e.principalKey} {
			wantAPIError(t, del(t, key, e.principalID), http.StatusForbidden, "protected_user")
		}
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: e.principalKey})
		wantStatus(t, resp, http.StatusOK)
	})

	t.Run("ErrNotFound", func(t *testing.T) {
		wantAPIError(t, del(t, e.admin.APIKey, 424242), http.StatusNotFound, "not_found")
	})

	t.Run("OK", func(t *testing.T) {
		bobSession := e.srv.MustLogin(t, "bob", e.bob.Password)
		wantStatus(t, del(t, e.admin.APIKey, e.bob.User.ID), http.StatusNoContent)
		if _, ok := mustUsers(t, e)["bob"]; ok {
			t.Fatalf("bob is still listed after his deletion")
		}
		for _, req := range []apitest.Request{
			{Method: http.MethodGet, Path: "/api/me", Bearer: e.bob.APIKey},
			{Method: http.MethodGet, Path: "/api/me", Cookie: bobSession},
		} {
			wantAPIError(t, e.do(t, req), http.StatusUnauthorized, "unauthorized")
		}
		wantAPIError(t, del(t, e.admin.APIKey, e.bob.User.ID), http.StatusNotFound, "not_found")
		resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
			Body: map[string]string{"username": "bob", "password": e.bob.Password}})
		wantAPIError(t, resp, http.StatusUnauthorized, "invalid_credentials")
	})
}

// TestUsers_NoPrivilegeFromCountOrID proves that nothing in the core derives a privilege from
// the number of users or from a user's id: the first user of an install (id 1) is a plain
// member, and deleting users changes nobody's role.
func TestUsers_NoPrivilegeFromCountOrID(t *testing.T) {
	ctx := context.Background()
	srv := newServer(t)
	first, err := srv.Store.CreateUser(ctx, store.NewUser{Username: "first", Email: "first@example.test"})
	if err != nil {
		t.Fatal(err)
	}
	if first.ID != 1 || first.Role != store.RoleMember {
		t.Fatalf("first user: got id %d role %s, want id 1, a member", first.ID, first.Role)
	}
	if b := mustStatus(t, srv); b.State != "pending" {
		t.Fatalf("claim state after the first user: got %s, want pending", b.State)
	}
	principalKey := srv.MustClaim(t)
	hash, err := srv.Options.Passwords.Hash("password-of-first")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.SetPasswordHash(ctx, first.ID, hash, ""); err != nil {
		t.Fatal(err)
	}
	e := coreEnv{srv: srv, principalKey: principalKey,
		admin: apitest.MustPerson(t, srv.Store, "admin", store.RoleAdmin),
		alice: apitest.MustPerson(t, srv.Store, "alice", store.RoleMember),
		bob:   apitest.MustPerson(t, srv.Store, "bob", store.RoleMember)}

	// checkMember fails unless the user signs in as a member who can manage nobody else.
	checkMember := func(t *testing.T, username, password string, self int64) {
		t.Helper()
		c := srv.MustLogin(t, username, password)
		resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
		wantStatus(t, resp, http.StatusOK)
		var me struct{ User userBody }
		resp.JSON(t, &me)
		if me.User.Role != "member" {
			t.Fatalf("%s: got role %s, want member", username, me.User.Role)
		}
		others := e.admin.User.ID
		if others == self {
			others = e.alice.User.ID
		}
		wantRoster(t, e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/users", Cookie: c}))
		for _, req := range []apitest.Request{
			{Method: http.MethodPost, Path: "/api/users", Body: map[string]string{"username": "mallory", "role": "admin"}},
			{Method: http.MethodDelete, Path: userURL(others, "")},
			{Method: http.MethodGet, Path: userURL(others, "/api-keys")},
			{Method: http.MethodPost, Path: userURL(others, "/api-keys"), Body: map[string]string{"name": "x"}},
			{Method: http.MethodPut, Path: userURL(others, "/password"), Body: map[string]string{"password": "0123456789"}},
		} {
			req.Cookie = c
			resp := e.do(t, req)
			if resp.Status != http.StatusForbidden || resp.Code() != "forbidden" {
				t.Fatalf("%s %s %s as %s: got %d %s, want 403 forbidden", req.Method, req.Path, req.Body, username, resp.Status, resp.Body)
			}
		}
	}

	t.Run("FirstUserIsMember", func(t *testing.T) {
		checkMember(t, "first", "password-of-first", first.ID)
	})

	t.Run("DeletingUsersChangesNoRole", func(t *testing.T) {
		roles := func(t *testing.T) map[string]string {
			t.Helper()
			out := map[string]string{}
			for name, u := range mustUsers(t, e) {
				out[name] = u.Role
			}
			return out
		}
		before := roles(t)
		// Delete the lowest ids first, down to one person.
		for _, id := range []int64{first.ID, e.alice.User.ID} {
			resp := e.do(t, apitest.Request{Method: http.MethodDelete, Path: userURL(id, ""), Bearer: principalKey})
			wantStatus(t, resp, http.StatusNoContent)
		}
		delete(before, "first")
		delete(before, "alice")
		if after := roles(t); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Fatalf("roles after deletions: got %v, want %v", after, before)
		}
		checkMember(t, "bob", e.bob.Password, e.bob.User.ID)
		// Down to the principal and a single member: the member is still a member.
		resp := e.do(t, apitest.Request{Method: http.MethodDelete, Path: userURL(e.admin.User.ID, ""), Bearer: principalKey})
		wantStatus(t, resp, http.StatusNoContent)
		if n := count(t, srv, `SELECT count(*) FROM users WHERE kind = 'human'`); n != 1 {
			t.Fatalf("people left: got %d, want 1", n)
		}
		checkMember(t, "bob", e.bob.Password, e.bob.User.ID)
	})
}
