package api_test

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// hostileEnv is a claimed install with single sign-on configured and a human admin: the
// setting in which hostile requests must be refused cleanly.
type hostileEnv struct {
	srv       *apitest.Server
	provider  *oidctest.Provider
	admin     apitest.Person
	member    apitest.Person
	principal int64 // the bootstrap principal's id
}

func newHostileEnv(t *testing.T) *hostileEnv {
	t.Helper()
	p := oidctest.NewProvider(t)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OIDC = apitest.OIDC(p) })
	srv.MustClaim(t)
	b, err := srv.Store.Bootstrap(t.Context())
	if err != nil || b.PrincipalID == nil {
		t.Fatalf("bootstrap state after the claim: got %+v, %v, want a principal", b, err)
	}
	return &hostileEnv{srv: srv, provider: p, principal: *b.PrincipalID,
		admin:  apitest.MustPerson(t, srv.Store, "root-admin", store.RoleAdmin),
		member: apitest.MustPerson(t, srv.Store, "plain-member", store.RoleMember)}
}

// hostileCase is one malformed or hostile request and the exact answer it must get.
type hostileCase struct {
	name string
	req  apitest.Request // in Path, {admin} and {principal} stand for those users' ids
	// prep, if set, builds the request from live state (a sign-in in progress) instead of req.
	prep   func(t *testing.T, e *hostileEnv) apitest.Request
	admin  bool   // send the admin's API key as a Bearer token
	member bool   // send a member's API key as a Bearer token
	status int    // the exact status
	code   string // the JSON error code; with page, "" means an HTML page
	page   bool   // an HTML page is wanted, not JSON
	raw    bool   // net/http answers before any handler runs: neither JSON nor a page
}

// Bodies and headers that take some building.
var (
	hostile10KB        = strings.Repeat("A", 10<<10)
	hostileHex64       = strings.Repeat("ab", 32)
	hostileDeepJSON    = `{"username":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`
	hostileBigJSON     = `{"username":"` + strings.Repeat("a", 70<<10) + `"}`
	hostilePadJSON     = `{"username":"padded"}` + strings.Repeat(" ", 70<<10)
	hostileBigForm     = "username=root-admin&password=" + strings.Repeat("p", 70<<10)
	hostileManyCookies = strings.Repeat("c=1; ", 2000) + "terdut_session=" + hostileHex64
	// hostileOverLimit is larger than any header block the server accepts: net/http's default
	// (1 MiB plus 4 KiB of slack) in tests, 64 KiB in production (cmd/terdut-server/serve.go).
	hostileOverLimit  = strings.Repeat("h", http.DefaultMaxHeaderBytes+8<<10)
	hostileScript     = `<script>alert(document.cookie)</script>`
	hostileHTMLAccept = http.Header{"Accept": {"text/html,application/xhtml+xml"}}
	hostileFormCT     = http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
)

func hostileAuthz(v string) http.Header { return http.Header{"Authorization": {v}} }

func hostileCookieHeader(v string) http.Header { return http.Header{"Cookie": {v}} }

func hostileSession(v string) *http.Cookie { return &http.Cookie{Name: "terdut_session", Value: v} }

func hostileCases() []hostileCase {
	post, put, get, del := http.MethodPost, http.MethodPut, http.MethodGet, http.MethodDelete
	user := func(body string) apitest.Request {
		return apitest.Request{Method: post, Path: "/api/users", Body: body}
	}
	login := func(username, password string) apitest.Request {
		return apitest.Request{Method: post, Path: "/api/auth/login",
			Body: map[string]string{"username": username, "password": password}}
	}
	return []hostileCase{
		// Credentials that are not credentials.
		{name: "Me/BearerWithoutToken", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileAuthz("Bearer")}, status: 401, code: "unauthorized"},
		{name: "Me/BearerSpace", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileAuthz("Bearer ")}, status: 401, code: "unauthorized"},
		{name: "Me/Basic", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileAuthz("Basic x")}, status: 401, code: "unauthorized"},
		{name: "Me/Bearer10KB", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileAuthz("Bearer " + hostile10KB)}, status: 401, code: "unauthorized"},
		{name: "Me/BearerUnknownHex", req: apitest.Request{Method: get, Path: "/api/me", Bearer: hostileHex64}, status: 401, code: "unauthorized"},
		{name: "Me/BearerOperatorToken", req: apitest.Request{Method: get, Path: "/api/me", Bearer: apitest.OperatorToken}, status: 401, code: "unauthorized"},
		{name: "Me/Cookie10KB", req: apitest.Request{Method: get, Path: "/api/me", Cookie: hostileSession(hostile10KB)}, status: 401, code: "unauthorized"},
		{name: "Me/CookieNotHex", req: apitest.Request{Method: get, Path: "/api/me", Cookie: hostileSession(strings.Repeat("z", 64))}, status: 401, code: "unauthorized"},
		{name: "Me/CookieUnknownHex", req: apitest.Request{Method: get, Path: "/api/me", Cookie: hostileSession(hostileHex64)}, status: 401, code: "unauthorized"},
		{name: "Me/ManyCookies", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileCookieHeader(hostileManyCookies)}, status: 401, code: "unauthorized"},
		{name: "Me/CookieQuotedPercent", req: apitest.Request{Method: get, Path: "/api/me", Header: hostileCookieHeader(`terdut_session="%00%0d%0a"`)}, status: 401, code: "unauthorized"},
		{name: "Me/HeaderOverLimit", req: apitest.Request{Method: get, Path: "/api/me", Header: http.Header{"X-Padding": {hostileOverLimit}}}, admin: true, status: 431, raw: true},
		{name: "Me/WrongMethod", req: apitest.Request{Method: del, Path: "/api/me"}, admin: true, status: 405, code: "method_not_allowed"},

		// JSON that is not the JSON asked for.
		{name: "Users/Anonymous", req: user(`{"username":"anon"}`), status: 401, code: "unauthorized"},
		{name: "Users/WrongType", req: user(`{"username":123}`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/NestedGarbage", req: user(`{"username":{"a":[1,{"b":null},[[[]]]]}}`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/DuplicateKeysLastInvalid", req: user(`{"username":"dup-ok","username":"dup bad"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/TrailingObject", req: user(`{"username":"trail1"} {"username":"trail2"}`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/TrailingGarbage", req: user(`{"username":"trail3"}garbage`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/NaN", req: user(`{"username":NaN}`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/HugeNumber", req: user(`{"username":"n","role":1e999999}`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/DeeplyNested", req: user(hostileDeepJSON), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/BodyOver64KiB", req: user(hostileBigJSON), admin: true, status: 413, code: "body_too_large"},
		{name: "Users/PaddingOver64KiB", req: user(hostilePadJSON), admin: true, status: 413, code: "body_too_large"},
		{name: "Users/Array", req: user(`[{"username":"arr"}]`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/String", req: user(`"username"`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/Null", req: user(`null`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/Empty", req: user(``), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/Truncated", req: user(`{"username":"tr`), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/ByteOrderMark", req: user("\ufeff{\"username\":\"bom\"}"), admin: true, status: 400, code: "invalid_json"},
		{name: "Users/UnknownField", req: user(`{"username":"x1","is_admin":true}`), admin: true, status: 400, code: "unknown_field"},
		{name: "Users/TextPlain", req: apitest.Request{Method: post, Path: "/api/users", Body: `{"username":"tp"}`,
			Header: http.Header{"Content-Type": {"text/plain"}}}, admin: true, status: 415, code: "unsupported_media_type"},
		{name: "Users/Multipart", req: apitest.Request{Method: post, Path: "/api/users", Body: "--x\r\n\r\n--x--",
			Header: http.Header{"Content-Type": {"multipart/form-data; boundary=x"}}}, admin: true, status: 415, code: "unsupported_media_type"},
		{name: "Users/WrongMethod", req: apitest.Request{Method: http.MethodPatch, Path: "/api/users", Body: `{}`}, admin: true, status: 405, code: "method_not_allowed"},

		// Usernames that are not what they seem.
		{name: "Users/Cyrillic", req: user(`{"username":"r\u043eot-admin"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/ZeroWidthJoiner", req: user(`{"username":"root\u200d-admin"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/RTLOverride", req: user(`{"username":"admin\u202egpj.exe"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/NUL", req: user(`{"username":"root-admin\u0000"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/CRLF", req: user(`{"username":"eve\r\nX-Injected: 1"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/TooLong", req: user(`{"username":"` + strings.Repeat("u", 65) + `"}`), admin: true, status: 400, code: "invalid_username"},
		{name: "Users/Reserved", req: user(`{"username":"` + store.PrincipalUsername + `"}`), admin: true, status: 409, code: "conflict"},
		{name: "Users/Taken", req: user(`{"username":"root-admin"}`), admin: true, status: 409, code: "conflict"},
		{name: "Users/BadRole", req: user(`{"username":"r1","role":"superadmin"}`), admin: true, status: 400, code: "invalid_role"},
		{name: "Users/EmailNUL", req: user(`{"username":"r2","email":"a\u0000@example.test"}`), admin: true, status: 400, code: "invalid_email"},

		// Ids that are not ids.
		{name: "UserID/NotNumeric", req: apitest.Request{Method: del, Path: "/api/users/abc"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/Overflow", req: apitest.Request{Method: del, Path: "/api/users/99999999999999999999"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/Negative", req: apitest.Request{Method: del, Path: "/api/users/-1"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/Zero", req: apitest.Request{Method: del, Path: "/api/users/0"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/Exponent", req: apitest.Request{Method: del, Path: "/api/users/1e3"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/EncodedSlash", req: apitest.Request{Method: del, Path: "/api/users/1%2F2"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/GetNotNumeric", req: apitest.Request{Method: get, Path: "/api/users/abc"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/GetOverflow", req: apitest.Request{Method: get, Path: "/api/users/99999999999999999999/api-keys"}, admin: true, status: 400, code: "invalid_id"},
		{name: "UserID/Anonymous", req: apitest.Request{Method: del, Path: "/api/users/abc"}, status: 401, code: "unauthorized"},
		{name: "UserID/Unknown", req: apitest.Request{Method: del, Path: "/api/users/424242"}, admin: true, status: 404, code: "not_found"},
		{name: "UserID/Principal", req: apitest.Request{Method: del, Path: "/api/users/{principal}"}, admin: true, status: 403, code: "protected_user"},
		{name: "UserID/MemberDeletesAdmin", req: apitest.Request{Method: del, Path: "/api/users/{admin}"}, member: true, status: 403, code: "forbidden"},
		{name: "UserID/MemberMintsAdminKey", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"mine now"}`}, member: true, status: 403, code: "forbidden"},
		{name: "UserID/MemberSetsAdminPassword", req: apitest.Request{Method: put, Path: "/api/users/{admin}/password", Body: `{"password":"taken-over-now"}`}, member: true, status: 403, code: "forbidden"},
		{name: "Users/MemberCreates", req: user(`{"username":"m1","role":"admin"}`), member: true, status: 403, code: "forbidden"},
		{name: "UserID/WrongMethod", req: apitest.Request{Method: get, Path: "/api/users/{admin}"}, admin: true, status: 405, code: "method_not_allowed"},

		// Passwords.
		{name: "Password/WrongType", req: apitest.Request{Method: put, Path: "/api/users/{admin}/password", Body: `{"password":12345678}`}, admin: true, status: 400, code: "invalid_json"},
		{name: "Password/10KB", req: apitest.Request{Method: put, Path: "/api/users/{admin}/password", Body: `{"password":"` + hostile10KB + `"}`}, admin: true, status: 400, code: "invalid_password"},
		{name: "Password/WrongCurrent", req: apitest.Request{Method: put, Path: "/api/users/{admin}/password",
			Body: `{"password":"a-new-password","current_password":"not-it-at-all"}`}, admin: true, status: 403, code: "wrong_current_password"},
		{name: "Password/Principal", req: apitest.Request{Method: put, Path: "/api/users/{principal}/password",
			Body: `{"password":"a-new-password"}`}, admin: true, status: 403, code: "service_user"},
		{name: "Password/BadID", req: apitest.Request{Method: put, Path: "/api/users/abc/password", Body: `{"password":"a-new-password"}`}, admin: true, status: 400, code: "invalid_id"},
		{name: "Password/Anonymous", req: apitest.Request{Method: put, Path: "/api/users/{admin}/password", Body: `{"password":"a-new-password"}`}, status: 401, code: "unauthorized"},
		{name: "Password/WrongMethod", req: apitest.Request{Method: post, Path: "/api/users/{admin}/password", Body: `{}`}, admin: true, status: 405, code: "method_not_allowed"},

		// API keys.
		{name: "APIKeys/EmptyName", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"  "}`}, admin: true, status: 400, code: "invalid_name"},
		{name: "APIKeys/NameNUL", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"a\u0000b"}`}, admin: true, status: 400, code: "invalid_name"},
		{name: "APIKeys/NameTooLong", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"` + strings.Repeat("n", 101) + `"}`}, admin: true, status: 400, code: "invalid_name"},
		{name: "APIKeys/NameArray", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":["x"]}`}, admin: true, status: 400, code: "invalid_json"},
		{name: "APIKeys/TextPlain", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"x"}`,
			Header: http.Header{"Content-Type": {"text/plain"}}}, admin: true, status: 415, code: "unsupported_media_type"},
		{name: "APIKeys/OverflowID", req: apitest.Request{Method: post, Path: "/api/users/99999999999999999999/api-keys", Body: `{"name":"x"}`}, admin: true, status: 400, code: "invalid_id"},
		{name: "APIKeys/UnknownUser", req: apitest.Request{Method: get, Path: "/api/users/424242/api-keys"}, admin: true, status: 404, code: "not_found"},
		{name: "APIKeys/Anonymous", req: apitest.Request{Method: post, Path: "/api/users/{admin}/api-keys", Body: `{"name":"x"}`}, status: 401, code: "unauthorized"},
		{name: "APIKeys/KeyIDNotNumeric", req: apitest.Request{Method: del, Path: "/api/users/{admin}/api-keys/abc"}, admin: true, status: 400, code: "invalid_id"},
		{name: "APIKeys/KeyIDOverflow", req: apitest.Request{Method: del, Path: "/api/users/{admin}/api-keys/99999999999999999999"}, admin: true, status: 400, code: "invalid_id"},
		{name: "APIKeys/KeyIDNegative", req: apitest.Request{Method: del, Path: "/api/users/{admin}/api-keys/-1"}, admin: true, status: 400, code: "invalid_id"},
		{name: "APIKeys/KeyIDUnknown", req: apitest.Request{Method: del, Path: "/api/users/{admin}/api-keys/424242"}, admin: true, status: 404, code: "not_found"},
		{name: "APIKeys/KeyWrongMethod", req: apitest.Request{Method: get, Path: "/api/users/{admin}/api-keys/1"}, admin: true, status: 405, code: "method_not_allowed"},

		// Password sign-in with look-alike names, broken bodies and forms.
		{name: "Login/Cyrillic", req: login("r\u043eot-admin", "password-of-root-admin"), status: 401, code: "invalid_credentials"},
		{name: "Login/ZeroWidthJoiner", req: login("root\u200d-admin", "password-of-root-admin"), status: 401, code: "invalid_credentials"},
		{name: "Login/RTLOverride", req: login("\u202enimda-toor", "password-of-root-admin"), status: 401, code: "invalid_credentials"},
		{name: "Login/NUL", req: login("root-admin\x00", "password-of-root-admin"), status: 401, code: "invalid_credentials"},
		{name: "Login/UpperCase", req: login("ROOT-ADMIN", "password-of-root-admin"), status: 401, code: "invalid_credentials"},
		{name: "Login/Principal", req: login(store.PrincipalUsername, ""), status: 401, code: "invalid_credentials"},
		{name: "Login/Password10KB", req: login("root-admin", hostile10KB), status: 401, code: "invalid_credentials"},
		{name: "Login/DuplicateKeysLastWrong", req: apitest.Request{Method: post, Path: "/api/auth/login",
			Body: `{"username":"root-admin","password":"password-of-root-admin","password":"wrong"}`}, status: 401, code: "invalid_credentials"},
		{name: "Login/WrongType", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: `{"username":["root-admin"],"password":"x"}`}, status: 400, code: "invalid_json"},
		{name: "Login/BodyOver64KiB", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: hostileBigJSON}, status: 413, code: "body_too_large"},
		{name: "Login/TextPlain", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: `{}`,
			Header: http.Header{"Content-Type": {"text/plain"}}}, status: 415, code: "unsupported_media_type"},
		{name: "Login/FormInvalidUTF8", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: "username=root%FF&password=x",
			Header: hostileFormCT}, status: 401, page: true},
		{name: "Login/FormNUL", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: "username=root-admin%00&password=password-of-root-admin",
			Header: hostileFormCT}, status: 401, page: true},
		{name: "Login/FormOver64KiB", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: hostileBigForm, Header: hostileFormCT}, status: 413, page: true},
		{name: "Login/FormBadEscape", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: "username=%zz&password=%", Header: hostileFormCT}, status: 400, page: true},
		{name: "Login/CrossSite", req: apitest.Request{Method: post, Path: "/api/auth/login", Body: `{"username":"root-admin","password":"password-of-root-admin"}`,
			Header: http.Header{"Sec-Fetch-Site": {"cross-site"}, "Origin": {"https://evil.example"}}}, status: 403, code: "cross_origin"},
		{name: "Login/WrongMethod", req: apitest.Request{Method: get, Path: "/api/auth/login"}, status: 405, code: "method_not_allowed"},
		{name: "Logout/CrossSite", req: apitest.Request{Method: post, Path: "/api/auth/logout", Cookie: hostileSession(hostileHex64),
			Header: http.Header{"Sec-Fetch-Site": {"cross-site"}}}, status: 403, code: "cross_origin"},
		{name: "Logout/WrongMethod", req: apitest.Request{Method: get, Path: "/api/auth/logout"}, status: 405, code: "method_not_allowed"},

		// The operator's endpoints, with everything but the operator token.
		{name: "Claim/AdminKey", req: apitest.Request{Method: post, Path: "/api/bootstrap"}, admin: true, status: 401, code: "unauthorized"},
		{name: "Claim/TokenWithSuffix", req: apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: apitest.OperatorToken + "x"}, status: 401, code: "unauthorized"},
		{name: "Claim/TokenPrefix", req: apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: apitest.OperatorToken[:20]}, status: 401, code: "unauthorized"},
		{name: "Claim/Bearer10KB", req: apitest.Request{Method: post, Path: "/api/bootstrap", Header: hostileAuthz("Bearer " + hostile10KB)}, status: 401, code: "unauthorized"},
		{name: "Claim/TokenAsCookie", req: apitest.Request{Method: post, Path: "/api/bootstrap", Cookie: hostileSession(apitest.OperatorToken)}, status: 401, code: "unauthorized"},
		{name: "Claim/Replayed", req: apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: apitest.OperatorToken}, status: 403, code: "bootstrap_already_completed"},
		{name: "Claim/WrongMethod", req: apitest.Request{Method: get, Path: "/api/bootstrap", Bearer: apitest.OperatorToken}, status: 405, code: "method_not_allowed"},
		{name: "Reset/AdminKey", req: apitest.Request{Method: post, Path: "/api/bootstrap/reset"}, admin: true, status: 401, code: "unauthorized"},
		{name: "Reset/Basic", req: apitest.Request{Method: post, Path: "/api/bootstrap/reset",
			Header: hostileAuthz("Basic " + base64.StdEncoding.EncodeToString([]byte("operator:"+apitest.OperatorToken)))}, status: 401, code: "unauthorized"},
		{name: "Reset/WrongMethod", req: apitest.Request{Method: get, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken}, status: 405, code: "method_not_allowed"},
		{name: "Status/WrongMethod", req: apitest.Request{Method: post, Path: "/api/bootstrap/status", Body: `{"state":"pending"}`}, status: 405, code: "method_not_allowed"},

		// Sign-in callbacks that were forged, replayed or tampered with.
		{name: "Callback/NoParameters", req: apitest.Request{Method: get, Path: "/auth/oidc/callback"}, status: 400, code: "invalid_state"},
		{name: "Callback/ForgedStateNoCookie", req: apitest.Request{Method: get, Path: "/auth/oidc/callback?code=c0de&state=forged"}, status: 400, code: "invalid_state"},
		{name: "Callback/ForgedStateAndCookie", req: apitest.Request{Method: get, Path: "/auth/oidc/callback?code=c0de&state=forged",
			Cookie: &http.Cookie{Name: "terdut_oidc_state", Value: "forged"}}, status: 400, code: "invalid_state"},
		{name: "Callback/State10KB", req: apitest.Request{Method: get, Path: "/auth/oidc/callback?code=c0de&state=" + hostile10KB,
			Cookie: &http.Cookie{Name: "terdut_oidc_state", Value: hostile10KB}}, status: 400, code: "invalid_state"},
		{name: "Callback/ForgedStatePage", req: apitest.Request{Method: get, Path: "/auth/oidc/callback?state=" + url.QueryEscape(hostileScript),
			Header: hostileHTMLAccept}, status: 400, page: true},
		{name: "Callback/NoCookie", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			req := e.srv.MustStartOIDC(t, e.provider, "alice").Request()
			req.Cookie = nil
			return req
		}, status: 400, code: "invalid_state"},
		{name: "Callback/OtherFlowsCookie", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			req := e.srv.MustStartOIDC(t, e.provider, "alice").Request()
			req.Cookie = e.srv.MustStartOIDC(t, e.provider, "alice").StateCookie
			return req
		}, status: 400, code: "invalid_state"},
		{name: "Callback/Replayed", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			f := e.srv.MustStartOIDC(t, e.provider, "alice")
			if resp := e.srv.MustDo(t, f.Request()); resp.Status != http.StatusSeeOther {
				t.Fatalf("first use of the callback: got %d %s, want 303", resp.Status, resp.Body)
			}
			return f.Request()
		}, status: 400, code: "invalid_state"},
		{name: "Callback/ReplayedCode", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			used := e.srv.MustStartOIDC(t, e.provider, "alice")
			if resp := e.srv.MustDo(t, used.Request()); resp.Status != http.StatusSeeOther {
				t.Fatalf("first use of the code: got %d %s, want 303", resp.Status, resp.Body)
			}
			fresh := e.srv.MustStartOIDC(t, e.provider, "alice")
			return oidcCallbackWith(fresh, "code", used.Callback.Query().Get("code"))
		}, status: 401, code: "sso_exchange_failed"},
		{name: "Callback/ForgedCode", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			return oidcCallbackWith(e.srv.MustStartOIDC(t, e.provider, "alice"), "code", "forged-code")
		}, status: 401, code: "sso_exchange_failed"},
		{name: "Callback/Code10KB", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			return oidcCallbackWith(e.srv.MustStartOIDC(t, e.provider, "alice"), "code", hostile10KB)
		}, status: 400, code: "missing_code"},
		{name: "Callback/ErrorDescriptionScript", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			e.provider.NextAuthorizeError("access_denied", hostileScript)
			return e.srv.MustStartOIDC(t, e.provider, "alice").Request()
		}, status: 401, code: "sso_provider_error"},
		{name: "Callback/ErrorDescriptionScriptPage", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			e.provider.NextAuthorizeError("access_denied", hostileScript)
			req := e.srv.MustStartOIDC(t, e.provider, "alice").Request()
			req.Header = hostileHTMLAccept
			return req
		}, status: 401, page: true},
		{name: "Callback/ErrorCodeScriptPage", prep: func(t *testing.T, e *hostileEnv) apitest.Request {
			e.provider.NextAuthorizeError(hostileScript, "denied")
			req := e.srv.MustStartOIDC(t, e.provider, "alice").Request()
			req.Header = hostileHTMLAccept
			return req
		}, status: 401, page: true},
		{name: "Callback/WrongMethod", req: apitest.Request{Method: post, Path: "/auth/oidc/callback?code=c0de&state=forged"}, status: 405, code: "method_not_allowed"},
		{name: "OIDCLogin/WrongMethod", req: apitest.Request{Method: post, Path: "/auth/oidc/login"}, status: 405, code: "method_not_allowed"},

		// Pages.
		{name: "LoginPage/WrongMethod", req: apitest.Request{Method: post, Path: "/login", Body: "username=a", Header: hostileFormCT}, status: 405, code: "method_not_allowed"},
		{name: "Home/WrongMethod", req: apitest.Request{Method: del, Path: "/", Header: hostileHTMLAccept}, status: 405, code: "method_not_allowed"},
		{name: "Home/DotDot", req: apitest.Request{Method: get, Path: "/%2e%2e/%2e%2e/etc/passwd", Header: hostileHTMLAccept}, status: 404, code: "not_found"},
		{name: "Home/UnknownPath10KB", req: apitest.Request{Method: get, Path: "/" + hostile10KB}, status: 404, code: "not_found"},
	}
}

// oidcCallbackWith returns f's callback request with one query parameter replaced.
func oidcCallbackWith(f apitest.OIDCFlow, key, value string) apitest.Request {
	u := *f.Callback
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return apitest.Request{Method: http.MethodGet, Path: u.RequestURI(), Cookie: f.StateCookie}
}

// checkHostileAnswer fails unless resp is exactly the refusal tc wants, and reflects no markup.
func checkHostileAnswer(t *testing.T, tc hostileCase, resp apitest.Response) {
	t.Helper()
	if resp.Status != tc.status {
		t.Errorf("got status %d %.300q, want %d", resp.Status, resp.Body, tc.status)
	}
	ct := resp.Header.Get("Content-Type")
	switch {
	case tc.raw:
	case tc.page:
		if !strings.HasPrefix(ct, "text/html") {
			t.Errorf("got Content-Type %q %.300q, want an HTML page", ct, resp.Body)
		}
	default:
		if !strings.HasPrefix(ct, "application/json") || resp.Code() != tc.code {
			t.Errorf("got %q code %q %.300q, want JSON with code %q", ct, resp.Code(), resp.Body, tc.code)
		}
	}
	if strings.Contains(strings.ToLower(string(resp.Body)), "<script") {
		t.Errorf("got a body with a script tag %.300q, want markup escaped or dropped", resp.Body)
	}
	if c := resp.Cookie("terdut_session"); c != nil && c.Value != "" {
		t.Errorf("got a session cookie, want none")
	}
}

func TestHostile_Requests(t *testing.T) {
	e := newHostileEnv(t)
	ids := strings.NewReplacer("{admin}", fmt.Sprint(e.admin.User.ID), "{principal}", fmt.Sprint(e.principal))
	cases := hostileCases()
	if len(cases) < 40 {
		t.Fatalf("got %d hostile cases, want at least 40", len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			if tc.prep != nil {
				req = tc.prep(t, e)
			}
			req.Path = ids.Replace(req.Path)
			switch {
			case tc.admin:
				req.Bearer = e.admin.APIKey
			case tc.member:
				req.Bearer = e.member.APIKey
			}
			checkHostileAnswer(t, tc, e.srv.MustDo(t, req))
		})
	}

	t.Run("HarmlessNonErrors", func(t *testing.T) {
		// A forged session on the home page or at logout is no error: the browser is sent to
		// sign in, or told it is signed out. Neither signs anyone in or out.
		home := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/", Cookie: hostileSession(hostile10KB), Header: hostileHTMLAccept})
		if home.Status != http.StatusSeeOther || home.Header.Get("Location") != "/login" {
			t.Errorf("home with a forged session: got %d to %q, want 303 to /login", home.Status, home.Header.Get("Location"))
		}
		out := e.srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/auth/logout", Header: hostileCookieHeader(hostileManyCookies)})
		if out.Status != http.StatusNoContent {
			t.Errorf("logout with a forged session: got %d %s, want 204", out.Status, out.Body)
		}
		hint := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet,
			Path: "/auth/oidc/login?login_hint=" + url.QueryEscape("a\r\nb"+hostileScript+hostile10KB)})
		if loc := hint.Header.Get("Location"); hint.Status != http.StatusFound || strings.Contains(loc, "login_hint") {
			t.Errorf("sign-in with a hostile login_hint: got %d to %.200q, want 302 without the hint", hint.Status, loc)
		}
	})

	t.Run("StillWorks", func(t *testing.T) {
		checkHostileAftermath(t, e)
	})
}

// checkHostileAftermath fails unless the server still serves every kind of caller and never
// failed or panicked on the way.
func checkHostileAftermath(t *testing.T, e *hostileEnv) {
	t.Helper()
	if resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Bearer: e.admin.APIKey}); resp.Status != http.StatusOK {
		t.Errorf("me with the admin's key: got %d %s, want 200", resp.Status, resp.Body)
	}
	cookie := e.srv.MustLogin(t, "root-admin", e.admin.Password)
	if resp := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: cookie}); resp.Status != http.StatusOK {
		t.Errorf("me with a password session: got %d %s, want 200", resp.Status, resp.Body)
	}
	e.srv.MustSignInOIDC(t, e.provider, "alice")
	metrics := e.srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/metrics"})
	if metrics.Status != http.StatusOK || strings.Contains(string(metrics.Body), `status="5`) {
		t.Errorf("metrics: got %d with 5xx series %v, want 200 and none", metrics.Status, strings.Contains(string(metrics.Body), `status="5`))
	}
	logs := e.srv.Logs.String()
	if strings.Contains(strings.ToLower(logs), "panic") {
		t.Errorf("logs mention a panic:\n%s", logs)
	}
	if strings.Contains(logs, `"level":"ERROR"`) {
		t.Errorf("logs hold errors, want none:\n%s", logs)
	}
}

// TestHostile_PendingLogin checks that a name the database cannot hold meets the gate like
// any other while the install is unclaimed: 503, not 401 or 500.
func TestHostile_PendingLogin(t *testing.T) {
	srv := newServer(t)
	for _, req := range []apitest.Request{
		{Method: http.MethodPost, Path: "/api/auth/login", Body: map[string]string{"username": "alice\x00", "password": "whatever-it-is"}},
		{Method: http.MethodPost, Path: "/api/auth/login", Body: "username=%FF&password=x", Header: hostileFormCT},
	} {
		resp := srv.MustDo(t, req)
		if resp.Status != http.StatusServiceUnavailable || resp.Code() != "bootstrap_pending" {
			t.Errorf("login %v while pending: got %d %s, want 503 bootstrap_pending", req.Body, resp.Status, resp.Body)
		}
	}
}
