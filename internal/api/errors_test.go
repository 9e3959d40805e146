package api_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

// coreEndpoints are the endpoints that need a user: each with a body it would accept.
func coreEndpoints(e coreEnv) []apitest.Request {
	id, other := e.alice.User.ID, e.bob.User.ID
	return []apitest.Request{
		{Method: http.MethodGet, Path: "/api/me"},
		{Method: http.MethodGet, Path: "/api/users"},
		{Method: http.MethodPost, Path: "/api/users", Body: map[string]string{"username": "intruder"}},
		{Method: http.MethodDelete, Path: userURL(other, "")},
		{Method: http.MethodPut, Path: userURL(id, "/password"), Body: map[string]string{"password": "intruder-password"}},
		{Method: http.MethodPost, Path: userURL(id, "/api-keys"), Body: map[string]string{"name": "intruder"}},
		{Method: http.MethodGet, Path: userURL(id, "/api-keys")},
		{Method: http.MethodDelete, Path: userURL(id, "/api-keys/1")},
	}
}

func TestErrors_Unauthorized(t *testing.T) {
	e := newCoreEnv(t, nil)
	revoked := mustCreateKey(t, e, e.admin.User.ID, e.admin.APIKey, "revoked")
	resp := e.do(t, apitest.Request{Method: http.MethodDelete, Bearer: e.admin.APIKey,
		Path: userURL(e.admin.User.ID, "/api-keys/"+strconv.FormatInt(revoked.ID, 10))})
	wantStatus(t, resp, http.StatusNoContent)
	ended := e.srv.MustLogin(t, "admin", e.admin.Password)
	resp = e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Cookie: ended})
	wantStatus(t, resp, http.StatusNoContent)
	unknown := strings.Repeat("ab", 32)

	credentials := map[string]func(*apitest.Request){
		"None":               func(r *apitest.Request) {},
		"EmptyBearer":        func(r *apitest.Request) { r.Header = http.Header{"Authorization": {"Bearer "}} },
		"NoScheme":           func(r *apitest.Request) { r.Header = http.Header{"Authorization": {e.admin.APIKey}} },
		"BasicScheme":        func(r *apitest.Request) { r.Header = http.Header{"Authorization": {"Basic " + e.admin.APIKey}} },
		"ShortBearer":        func(r *apitest.Request) { r.Bearer = "abc123" },
		"UpperCaseKey":       func(r *apitest.Request) { r.Bearer = strings.ToUpper(e.admin.APIKey) },
		"KeyWithSuffix":      func(r *apitest.Request) { r.Bearer = e.admin.APIKey + "0" },
		"NonHexBearer":       func(r *apitest.Request) { r.Bearer = strings.Repeat("z", 64) },
		"UnknownBearer":      func(r *apitest.Request) { r.Bearer = unknown },
		"RevokedKey":         func(r *apitest.Request) { r.Bearer = revoked.Key },
		"OperatorToken":      func(r *apitest.Request) { r.Bearer = apitest.OperatorToken },
		"BogusCookie":        func(r *apitest.Request) { r.Cookie = &http.Cookie{Name: "terdut_session", Value: "bogus"} },
		"UnknownCookie":      func(r *apitest.Request) { r.Cookie = &http.Cookie{Name: "terdut_session", Value: unknown} },
		"KeyAsCookie":        func(r *apitest.Request) { r.Cookie = &http.Cookie{Name: "terdut_session", Value: e.admin.APIKey} },
		"EndedSession":       func(r *apitest.Request) { r.Cookie = ended },
		"OtherCookie":        func(r *apitest.Request) { r.Cookie = &http.Cookie{Name: "session", Value: ended.Value} },
		"BadBearerAndCookie": func(r *apitest.Request) { r.Bearer = unknown; r.Cookie = e.srv.MustLogin(t, "admin", e.admin.Password) },
	}
	before := [3]int{count(t, e.srv, `SELECT count(*) FROM users`),
		count(t, e.srv, `SELECT count(*) FROM api_keys WHERE revoked_at IS NULL`),
		count(t, e.srv, `SELECT count(*) FROM users WHERE password_hash IS NOT NULL`)}
	for cname, set := range credentials {
		t.Run(cname, func(t *testing.T) {
			for _, req := range coreEndpoints(e) {
				set(&req)
				resp := e.do(t, req)
				if resp.Status != http.StatusUnauthorized || resp.Code() != "unauthorized" ||
					!strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s: got %d %s (WWW-Authenticate %q), want 401 unauthorized with a Bearer challenge",
						req.Method, req.Path, resp.Status, resp.Body, resp.Header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	after := [3]int{count(t, e.srv, `SELECT count(*) FROM users`),
		count(t, e.srv, `SELECT count(*) FROM api_keys WHERE revoked_at IS NULL`),
		count(t, e.srv, `SELECT count(*) FROM users WHERE password_hash IS NOT NULL`)}
	if after != before {
		t.Fatalf("users, live keys, passwords after unauthorized requests: got %v, want %v", after, before)
	}
}

func TestErrors_BadBody(t *testing.T) {
	e := newCoreEnv(t, nil)
	// Each endpoint with the name of a string field it takes.
	endpoints := map[string]struct {
		req   apitest.Request
		field string
	}{
		"CreateUser":  {apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: e.admin.APIKey}, "username"},
		"CreateKey":   {apitest.Request{Method: http.MethodPost, Path: userURL(e.alice.User.ID, "/api-keys"), Bearer: e.alice.APIKey}, "name"},
		"SetPassword": {apitest.Request{Method: http.MethodPut, Path: userURL(e.bob.User.ID, "/password"), Bearer: e.admin.APIKey}, "password"},
		"Login":       {apitest.Request{Method: http.MethodPost, Path: "/api/auth/login"}, "username"},
	}
	cases := map[string]struct {
		body        func(field string) string
		contentType string
		status      int
		code        string
	}{
		"Empty":           {func(string) string { return "" }, "", http.StatusBadRequest, "invalid_json"},
		"Malformed":       {func(f string) string { return `{"` + f + `": ` }, "", http.StatusBadRequest, "invalid_json"},
		"NotJSON":         {func(f string) string { return f + `=x` }, "", http.StatusBadRequest, "invalid_json"},
		"Array":           {func(string) string { return `[]` }, "", http.StatusBadRequest, "invalid_json"},
		"String":          {func(string) string { return `"x"` }, "", http.StatusBadRequest, "invalid_json"},
		"UnknownField":    {func(string) string { return `{"is_admin": true}` }, "", http.StatusBadRequest, "unknown_field"},
		"WrongTypeNumber": {func(f string) string { return `{"` + f + `": 12345678}` }, "", http.StatusBadRequest, "invalid_json"},
		"WrongTypeObject": {func(f string) string { return `{"` + f + `": {"a": 1}}` }, "", http.StatusBadRequest, "invalid_json"},
		"TrailingObject":  {func(f string) string { return `{"` + f + `": "x"} {}` }, "", http.StatusBadRequest, "invalid_json"},
		"TrailingGarbage": {func(f string) string { return `{"` + f + `": "x"}]` }, "", http.StatusBadRequest, "invalid_json"},
		"TooLarge": {func(f string) string { return `{"` + f + `": "` + strings.Repeat("a", 70<<10) + `"}` },
			"", http.StatusRequestEntityTooLarge, "body_too_large"},
		"ContentType": {func(f string) string { return `{"` + f + `": "x"}` }, "text/plain", http.StatusUnsupportedMediaType, "unsupported_media_type"},
	}
	before := count(t, e.srv, `SELECT count(*) FROM api_keys`) + count(t, e.srv, `SELECT count(*) FROM users`)
	for ename, ep := range endpoints {
		t.Run(ename, func(t *testing.T) {
			for cname, tc := range cases {
				req := ep.req
				req.Body = tc.body(ep.field)
				if tc.contentType != "" {
					req.Header = http.Header{"Content-Type": {tc.contentType}}
				}
				resp := e.do(t, req)
				if resp.Status != tc.status || resp.Code() != tc.code {
					t.Errorf("%s: got %d %s, want %d %s", cname, resp.Status, resp.Body, tc.status, tc.code)
				}
			}
		})
	}
	after := count(t, e.srv, `SELECT count(*) FROM api_keys`) + count(t, e.srv, `SELECT count(*) FROM users`)
	if after != before {
		t.Fatalf("users and keys after bad requests: got %d, want %d", after, before)
	}
	// The error names the offending field, but never echoes a value.
	resp := e.do(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: `{"username": "alice", "password": "p4ssw0rd-secret", "passwd": "p4ssw0rd-secret"}`})
	if resp.Status != http.StatusBadRequest || strings.Contains(string(resp.Body), "p4ssw0rd-secret") {
		t.Fatalf("unknown field next to a password: got %d %s, want 400 without the password", resp.Status, resp.Body)
	}
}

func TestErrors_BadID(t *testing.T) {
	e := newCoreEnv(t, nil)
	for name, id := range map[string]string{
		"NonNumeric": "abc",
		"Overflow":   "99999999999999999999",
		"MaxPlusOne": "9223372036854775808",
		"Zero":       "0",
		"Negative":   "-1",
		"Float":      "1.5",
		"Hex":        "0x1",
	} {
		t.Run(name, func(t *testing.T) {
			for _, req := range []apitest.Request{
				{Method: http.MethodDelete, Path: "/api/users/" + id, Bearer: e.admin.APIKey},
				{Method: http.MethodPut, Path: "/api/users/" + id + "/password", Bearer: e.admin.APIKey,
					Body: map[string]string{"password": "a-good-password"}},
				{Method: http.MethodPost, Path: "/api/users/" + id + "/api-keys", Bearer: e.admin.APIKey,
					Body: map[string]string{"name": "x"}},
				{Method: http.MethodGet, Path: "/api/users/" + id + "/api-keys", Bearer: e.admin.APIKey},
				{Method: http.MethodDelete, Path: userURL(e.alice.User.ID, "/api-keys/"+id), Bearer: e.alice.APIKey},
			} {
				resp := e.do(t, req)
				if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_id" {
					t.Errorf("%s %s: got %d %s, want 400 invalid_id", req.Method, req.Path, resp.Status, resp.Body)
				}
			}
		})
	}
}

func TestErrors_Routing(t *testing.T) {
	e := newCoreEnv(t, nil)
	resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/nothing-here", Bearer: e.admin.APIKey})
	wantAPIError(t, resp, http.StatusNotFound, "not_found")
	resp = e.do(t, apitest.Request{Method: http.MethodPatch, Path: "/api/users", Bearer: e.admin.APIKey})
	wantAPIError(t, resp, http.StatusMethodNotAllowed, "method_not_allowed")
}

// TestErrors_Internal proves that a server error tells the client only "internal error",
// while the log keeps the cause, and that neither carries the credential.
func TestErrors_Internal(t *testing.T) {
	e := newCoreEnv(t, nil)
	if _, err := e.srv.Store.Pool().Exec(context.Background(), `ALTER TABLE api_keys RENAME COLUMN key_hash TO key_digest`); err != nil {
		t.Fatal(err)
	}
	resp := e.do(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: e.alice.APIKey})
	if resp.Status != http.StatusInternalServerError || string(resp.Body) != `{"error":"internal error","code":"internal"}`+"\n" {
		t.Fatalf("got %d %s, want 500 with only \"internal error\"", resp.Status, resp.Body)
	}
	logs := e.srv.Logs.String()
	if !strings.Contains(logs, "key_hash") {
		t.Fatalf("logs: got %s, want the cause (column key_hash) logged", logs)
	}
	if strings.Contains(logs, e.alice.APIKey) {
		t.Fatalf("logs hold the API key")
	}
}

// TestErrors_Unavailable proves that a database outage answers 503 with Retry-After, and
// never looks like bad credentials (which would make clients throw away a good key).
func TestErrors_Unavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	srv := apitest.NewServer(t, "postgres://terdut@"+addr+"/terdut?sslmode=disable", nil)
	for _, req := range []apitest.Request{
		{Method: http.MethodGet, Path: "/api/me", Bearer: strings.Repeat("ab", 32)},
		{Method: http.MethodGet, Path: "/api/me", Cookie: &http.Cookie{Name: "terdut_session", Value: strings.Repeat("cd", 32)}},
		{Method: http.MethodGet, Path: "/api/bootstrap/status"},
	} {
		resp := srv.MustDo(t, req)
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "unavailable" || resp.Header.Get("Retry-After") == "" {
			t.Errorf("%s %s: got %d %s (Retry-After %q), want 503 unavailable with Retry-After",
				req.Method, req.Path, resp.Status, resp.Body, resp.Header.Get("Retry-After"))
		}
		if strings.Contains(string(resp.Body), addr) {
			t.Errorf("%s %s: got %s, want no connection details in the body", req.Method, req.Path, resp.Body)
		}
	}
}
