package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// The fuzz targets call the real handler (api.NewServer over a real store) directly through
// an httptest.ResponseRecorder: no sockets, so a worker runs thousands of inputs a second,
// and inputs reach the handler exactly as fuzzed, even headers no HTTP client would send.
// Each fuzzing worker is a new process whose TestMain starts its own Postgres (about 10 s),
// so bound a run by inputs, not time (a 10s -fuzztime can end before any input is tried):
//
//	go test -run '^$' -fuzz '^FuzzDecodeRequest$' -fuzztime 10000x -parallel 1 ./internal/api/

// fuzzEnv is one claimed install whose handler the fuzz targets call.
type fuzzEnv struct {
	handler http.Handler
	admin   apitest.Person // a human admin with a password and an API key
	member  apitest.Person
	session string // a live session token of the admin's
}

func newFuzzEnv(f *testing.F) *fuzzEnv {
	f.Helper()
	srv := apitest.NewServer(f, pgtest.MustDatabase(f), nil)
	if _, err := srv.Store.Claim(context.Background(), store.AuditInfo{Actor: store.ActorCLI}); err != nil {
		f.Fatalf("claim: %v", err)
	}
	e := &fuzzEnv{handler: srv.HTTP.Config.Handler,
		admin:  apitest.MustPerson(f, srv.Store, "fuzz-admin", store.RoleAdmin),
		member: apitest.MustPerson(f, srv.Store, "fuzz-member", store.RoleMember)}
	sess, err := srv.Store.CreateSession(context.Background(), e.admin.User.ID, time.Hour, store.GateOn)
	if err != nil {
		f.Fatalf("create session: %v", err)
	}
	e.session = sess.Token
	return e
}

// serve runs one request through the handler and fails t on any 5xx.
func (e *fuzzEnv) serve(t *testing.T, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	e.handler.ServeHTTP(w, r)
	if w.Code >= 500 {
		t.Fatalf("%s %s: got %d %.300q, want no 5xx", r.Method, r.URL.Path, w.Code, w.Body.Bytes())
	}
	return w
}

// fuzzCheckErrorBody fails unless a JSON error answer carries a stable code.
func fuzzCheckErrorBody(t *testing.T, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code < 400 || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
		return
	}
	var body struct{ Error, Code string }
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Code == "" || body.Error == "" {
		t.Fatalf("got %d %.300q (%v), want an error body with a code", w.Code, w.Body.Bytes(), err)
	}
}

var fuzzUsername = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)

// FuzzDecodeRequest sends arbitrary bodies and content types to the endpoints that decode
// JSON (and the login form). Nothing may answer 5xx or panic, every error has a code, and
// whatever is accepted satisfies the rules the handlers promise.
func FuzzDecodeRequest(f *testing.F) {
	e := newFuzzEnv(f)
	const (
		createUser = iota
		createKey
		setPassword
		login
		endpoints
	)
	for _, s := range []struct {
		endpoint    uint8
		contentType string
		body        string
	}{
		{createUser, "application/json", `{"username":"seed-user","email":"seed@example.test","role":"member"}`},
		{createUser, "application/json", `{"username":"r\u043eot","email":"x"}`},
		{createUser, "application/json", `{"username":"a\u0000","email":"\u202e"}`},
		{createUser, "application/json", `{"username":1e999,"role":NaN}`},
		{createUser, "application/json", `{"username":"dup","username":"dup2","role":"admin","role":"root"}`},
		{createUser, "application/json", `{"username":"x"} {"username":"y"}`},
		{createUser, "application/json", `[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[`},
		{createUser, "application/json", `{"username":{"a":[1,2,{"b":null}]},"is_admin":true}`},
		{createUser, "", `null`},
		{createUser, "text/plain", `{"username":"plain"}`},
		{createUser, "application/json; charset=utf-16", "\xff\xfe{\x00}\x00"},
		{createKey, "application/json", `{"name":"deploy"}`},
		{createKey, "application/json", `{"name":"\t\n\u0085"}`},
		{createKey, "application/json", `{"name":"` + strings.Repeat("é", 60) + `"}`},
		{createKey, "application/json", `{"name":"\ud800"}`},
		{setPassword, "application/json", `{"password":"long-enough-password"}`},
		{setPassword, "application/json", `{"password":"short","current_password":7}`},
		{login, "application/json", `{"username":"fuzz-member","password":"password-of-fuzz-member"}`},
		{login, "application/json", `{"username":"fuzz-member\u0000","password":"password-of-fuzz-member"}`},
		{login, "application/x-www-form-urlencoded", "username=fuzz-member&password=password-of-fuzz-member"},
		{login, "application/x-www-form-urlencoded", "username=%FF%00&password=%zz"},
		{login, "application/x-www-form-urlencoded; charset=x", "username=" + strings.Repeat("a", 300)},
	} {
		f.Add(s.endpoint, s.contentType, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, endpoint uint8, contentType string, body []byte) {
		var method, path string
		switch endpoint % endpoints {
		case createUser:
			method, path = http.MethodPost, "/api/users"
		case createKey:
			method, path = http.MethodPost, "/api/users/"+strconv.FormatInt(e.admin.User.ID, 10)+"/api-keys"
		case setPassword:
			method, path = http.MethodPut, "/api/users/"+strconv.FormatInt(e.member.User.ID, 10)+"/password"
		case login:
			method, path = http.MethodPost, "/api/auth/login"
		}
		r := httptest.NewRequest(method, path, strings.NewReader(string(body)))
		if contentType != "" {
			r.Header.Set("Content-Type", contentType)
		}
		if endpoint%endpoints != login {
			r.Header.Set("Authorization", "Bearer "+e.admin.APIKey)
		}
		w := e.serve(t, r)
		fuzzCheckErrorBody(t, w)
		if w.Code >= 300 {
			return
		}
		switch endpoint % endpoints {
		case createUser:
			var got struct{ Username, Role string }
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || !fuzzUsername.MatchString(got.Username) ||
				(got.Role != "admin" && got.Role != "member") {
				t.Fatalf("created %.300q (%v), want a valid ASCII username and role", w.Body.Bytes(), err)
			}
		case createKey:
			var got struct{ Name, Key string }
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || !hexSecretPattern.MatchString(got.Key) ||
				got.Name == "" || strings.IndexFunc(got.Name, unicode.IsControl) >= 0 {
				t.Fatalf("created key %.300q (%v), want a named 64-hex key", w.Body.Bytes(), err)
			}
		case login:
			if c := w.Result().Cookies(); len(c) != 1 || c[0].Name != "terdut_session" || !hexSecretPattern.MatchString(c[0].Value) {
				t.Fatalf("signed in with %v, want one session cookie", c)
			}
			if w.Code == http.StatusOK && !strings.Contains(w.Body.String(), `"username":"fuzz-member"`) {
				t.Fatalf("signed in as %.300q, want fuzz-member: no one else has a password here", w.Body.Bytes())
			}
		}
	})
}

// hexSecretPattern is the form of every API key and session token.
var hexSecretPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// FuzzCookie sends arbitrary Cookie headers to the endpoints that read the session cookie.
// Nothing may answer 5xx, and a request is signed in exactly when its terdut_session cookie,
// as net/http reads it, is the live session's token. "{session}" in an input stands for
// that token, so the fuzzer can wrap the real token in hostile surroundings.
func FuzzCookie(f *testing.F) {
	e := newFuzzEnv(f)
	for _, c := range []string{
		"", "terdut_session={session}", "terdut_session=", "terdut_session",
		"terdut_session={session}; terdut_session=" + strings.Repeat("0", 64),
		"terdut_session=" + strings.Repeat("0", 64) + "; terdut_session={session}",
		`terdut_session="{session}"`, "terdut_session={session}x", "terdut_session= {session}",
		"TERDUT_SESSION={session}", "terdut_session=" + strings.ToUpper("{session}"),
		"terdut_session=%7Bsession%7D", "a=b;;;; ;=; terdut_session={session}; c",
		"terdut_session=\x00{session}", "terdut_session={session}\r\nX-Admin: 1",
		strings.Repeat("x=y; ", 500) + "terdut_session={session}",
		"terdut_session=" + strings.Repeat("A", 10<<10),
		"terdut_oidc_state={session}",
	} {
		f.Add(false, c)
		f.Add(true, c)
	}
	f.Fuzz(func(t *testing.T, home bool, header string) {
		header = strings.ReplaceAll(header, "{session}", e.session)
		path := "/api/me"
		if home {
			path = "/"
		}
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set("Cookie", header)
		c, err := r.Cookie("terdut_session")
		live := err == nil && c.Value == e.session

		w := e.serve(t, r)
		fuzzCheckErrorBody(t, w)
		signedIn := w.Code == http.StatusOK
		if signedIn != live {
			t.Fatalf("Cookie %.200q: got %d, want signed in: %v", header, w.Code, live)
		}
		if !home && !signedIn && w.Code != http.StatusUnauthorized {
			t.Fatalf("Cookie %.200q: got %d, want 401", header, w.Code)
		}
		if home && !signedIn && (w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/login") {
			t.Fatalf("Cookie %.200q on /: got %d to %q, want 303 to /login", header, w.Code, w.Header().Get("Location"))
		}
	})
}

// FuzzBearer sends arbitrary Authorization headers to an endpoint that takes API keys and to
// one that takes only the operator token. Nothing may answer 5xx, an API key authenticates
// only as itself, and only the operator token reaches the (already claimed) install's claim.
// "{key}" and "{operator}" in an input stand for the admin's API key and the operator token.
func FuzzBearer(f *testing.F) {
	e := newFuzzEnv(f)
	for _, h := range []string{
		"", "Bearer", "Bearer ", "Bearer {key}", "bearer {key}", "BEARER   {key}  ", "Bearer\t{key}",
		"Bearer {key}x", "Bearer x{key}", "Bearer " + strings.ToUpper("{key}"), "Bearer {key} {key}",
		"Bearer {key},Bearer {key}", "Basic {key}", "Token {key}", "{key}", "Bearer {operator}",
		"Bearer {operator} ", "Bearer {operator}\x00", "Bearer " + strings.Repeat("0", 64),
		"Bearer " + strings.Repeat("A", 10<<10), "Bearer \u00a0{key}", "Bearer {key}\r\n",
	} {
		f.Add(false, h)
		f.Add(true, h)
	}
	f.Fuzz(func(t *testing.T, claim bool, header string) {
		header = strings.NewReplacer("{key}", e.admin.APIKey, "{operator}", apitest.OperatorToken).Replace(header)
		method, path := http.MethodGet, "/api/me"
		if claim {
			method, path = http.MethodPost, "/api/bootstrap"
		}
		r := httptest.NewRequest(method, path, nil)
		if header != "" {
			r.Header.Set("Authorization", header)
		}
		w := e.serve(t, r)
		fuzzCheckErrorBody(t, w)
		if claim {
			switch {
			case w.Code == http.StatusForbidden && strings.Contains(header, apitest.OperatorToken):
			case w.Code == http.StatusUnauthorized:
			default:
				t.Fatalf("claim with Authorization %.200q: got %d, want 401, or 403 for the operator token", header, w.Code)
			}
			return
		}
		exact := header == "Bearer "+e.admin.APIKey || header == "bearer "+e.admin.APIKey
		rest := strings.TrimSpace(strings.Replace(header, e.admin.APIKey, "", 1))
		switch {
		case exact && w.Code != http.StatusOK:
			t.Fatalf("Authorization %.200q: got %d, want 200", header, w.Code)
		case w.Code == http.StatusOK && (!strings.Contains(header, e.admin.APIKey) || !strings.EqualFold(rest, "bearer")):
			t.Fatalf("Authorization %.200q: got 200, want 401: only the admin's key may sign in", header)
		case w.Code == http.StatusOK && !strings.Contains(w.Body.String(), `"username":"fuzz-admin"`):
			t.Fatalf("Authorization %.200q: signed in as %.200q, want fuzz-admin", header, w.Body.Bytes())
		case w.Code != http.StatusOK && w.Code != http.StatusUnauthorized:
			t.Fatalf("Authorization %.200q: got %d, want 200 or 401", header, w.Code)
		}
	})
}
