package api_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// leakSecret is a secret issued or used during the flows, and where it may legitimately be.
type leakSecret struct {
	what  string
	value string
	// shownIn is the index in leakTrail.responses of the one response whose body returns
	// the secret to its owner (a claim's or key creation's), or -1.
	shownIn int
	hashed  bool // an API key or session token: the database holds its SHA-256
}

// leakResponse is everything the client was told in one response, but its cookies.
type leakResponse struct {
	what string
	text string
}

// leakTrail runs requests against one instance and remembers every secret and response.
type leakTrail struct {
	srv       *apitest.Server
	secrets   []leakSecret
	responses []leakResponse
}

// do sends req, fails the test unless it is answered with status, and records the answer.
// Session cookies the answer sets are recorded as secrets.
func (l *leakTrail) do(t *testing.T, what string, req apitest.Request, status int) apitest.Response {
	t.Helper()
	resp := l.srv.MustDo(t, req)
	if resp.Status != status {
		t.Fatalf("%s: got %d %s, want %d", what, resp.Status, resp.Body, status)
	}
	var text strings.Builder
	text.Write(resp.Body)
	for k, vs := range resp.Header {
		if k != "Set-Cookie" {
			fmt.Fprintf(&text, "\n%s: %s", k, strings.Join(vs, ", "))
		}
	}
	l.responses = append(l.responses, leakResponse{what: what, text: text.String()})
	if c := resp.Cookie("terdut_session"); c != nil && c.Value != "" {
		l.add("session token from "+what, c.Value, true)
	}
	return resp
}

// add records a secret that no response may show.
func (l *leakTrail) add(what, value string, hashed bool) {
	l.secrets = append(l.secrets, leakSecret{what: what, value: value, shownIn: -1, hashed: hashed})
}

// shownByLast records a secret that the last response returned to its owner.
func (l *leakTrail) shownByLast(what, value string) {
	l.secrets = append(l.secrets, leakSecret{what: what, value: value, shownIn: len(l.responses) - 1, hashed: true})
}

// providerTokens records what the server exchanged with the OIDC provider's token
// endpoint: the authorization codes it redeemed and the ID and access tokens it got back.
type providerTokens struct {
	next http.RoundTripper
	host string

	mu     sync.Mutex
	codes  []string
	tokens []string
}

func (p *providerTokens) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Host == p.host && r.GetBody != nil {
		if body, err := r.GetBody(); err == nil {
			b, _ := io.ReadAll(body)
			if form, err := url.ParseQuery(string(b)); err == nil && form.Get("code") != "" {
				p.mu.Lock()
				p.codes = append(p.codes, form.Get("code"))
				p.mu.Unlock()
			}
		}
	}
	resp, err := p.next.RoundTrip(r)
	if err != nil || r.URL.Host != p.host {
		return resp, err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(b))
	if err != nil {
		return resp, nil
	}
	var tok struct {
		IDToken     string `json:"id_token"`
		AccessToken string `json:"access_token"`
	}
	if json.Unmarshal(b, &tok) == nil && tok.IDToken != "" {
		p.mu.Lock()
		p.tokens = append(p.tokens, tok.IDToken, tok.AccessToken)
		p.mu.Unlock()
	}
	return resp, nil
}

// recordProviderTokens routes the process's default HTTP transport, which the server's OIDC
// client uses, through a recorder until the test ends. The test must not run in parallel.
func recordProviderTokens(t *testing.T, p *oidctest.Provider) *providerTokens {
	t.Helper()
	u, err := url.Parse(p.Issuer())
	if err != nil {
		t.Fatal(err)
	}
	rec := &providerTokens{next: http.DefaultTransport, host: u.Host}
	http.DefaultTransport = rec
	t.Cleanup(func() { http.DefaultTransport = rec.next })
	return rec
}

// TestLeaks_Secrets runs every flow that issues or uses a secret with debug logging, then
// looks for each secret in the logs, in every response but the one that hands it to its
// owner, in /metrics and in the database.
func TestLeaks_Secrets(t *testing.T) {
	p := oidctest.NewProvider(t)
	provider := recordProviderTokens(t, p)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.OIDC = apitest.OIDC(p) })
	l := &leakTrail{srv: srv}
	post, put, get, del := http.MethodPost, http.MethodPut, http.MethodGet, http.MethodDelete
	l.add("operator token", apitest.OperatorToken, false)
	l.add("OIDC client secret", p.ClientSecret, false)

	// The claim, first with a wrong token.
	wrongOperator := "wrong-operator-token-5f0c1d2e3a4b5c6d7e8f"
	l.add("wrong operator token", wrongOperator, false)
	l.do(t, "claim with a wrong token", apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: wrongOperator}, 401)
	principalKey := leakKeyOf(t, l.do(t, "claim", apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: apitest.OperatorToken}, 201))
	l.shownByLast("the claim's API key", principalKey)

	// A person, given a password by an admin, who fails to sign in, then signs in.
	var user struct{ ID int64 }
	l.do(t, "create user", apitest.Request{Method: post, Path: "/api/users", Bearer: principalKey,
		Body: map[string]string{"username": "lena", "email": "lena@example.test"}}, 201).JSON(t, &user)
	lena := "/api/users/" + fmt.Sprint(user.ID)
	first, second := "Lena-first-password-k8Qz", "Lena-second-password-V3mw"
	wrong := []string{"Wrong-password-one-7Hn2", "Wrong-password-two-p4Lx", "Wrong-password-three-c9Rt", "Wrong-password-four-J2sd"}
	for i, pw := range append([]string{first, second}, wrong...) {
		l.add(fmt.Sprintf("password %d", i), pw, false)
	}
	l.do(t, "admin sets the password", apitest.Request{Method: put, Path: lena + "/password", Bearer: principalKey,
		Body: map[string]string{"password": first}}, 204)
	l.do(t, "login with a wrong password", apitest.Request{Method: post, Path: "/api/auth/login",
		Body: map[string]string{"username": "lena", "password": wrong[0]}}, 401)
	l.do(t, "login of nobody", apitest.Request{Method: post, Path: "/api/auth/login",
		Body: map[string]string{"username": "nobody", "password": wrong[1]}}, 401)
	l.do(t, "form login with a wrong password", apitest.Request{Method: post, Path: "/api/auth/login",
		Body:   url.Values{"username": {"lena"}, "password": {wrong[2]}}.Encode(),
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, 401)
	sess := l.do(t, "login", apitest.Request{Method: post, Path: "/api/auth/login",
		Body: map[string]string{"username": "lena", "password": first}}, 200).Cookie("terdut_session")
	l.do(t, "me by session", apitest.Request{Method: get, Path: "/api/me", Cookie: sess}, 200)

	// Her own password change, first with a wrong current password.
	l.do(t, "password change with a wrong current password", apitest.Request{Method: put, Path: lena + "/password", Cookie: sess,
		Body: map[string]string{"password": second, "current_password": wrong[3]}}, 403)
	l.do(t, "password change", apitest.Request{Method: put, Path: lena + "/password", Cookie: sess,
		Body: map[string]string{"password": second, "current_password": first}}, 204)
	l.do(t, "form login", apitest.Request{Method: post, Path: "/api/auth/login",
		Body:   url.Values{"username": {"lena"}, "password": {second}}.Encode(),
		Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}}, 303)

	// An API key: created, used, listed, revoked, refused.
	l.do(t, "key create with a wrong current password", apitest.Request{Method: post, Path: lena + "/api-keys", Cookie: sess,
		Body: map[string]string{"name": "laptop", "current_password": wrong[0]}}, 403)
	created := l.do(t, "key create", apitest.Request{Method: post, Path: lena + "/api-keys", Cookie: sess,
		Body: map[string]string{"name": "laptop", "current_password": second}}, 201)
	key := leakKeyOf(t, created)
	l.shownByLast("API key lena created", key)
	var keyID struct{ ID int64 }
	created.JSON(t, &keyID)
	l.do(t, "me by key", apitest.Request{Method: get, Path: "/api/me", Bearer: key}, 200)
	l.do(t, "key list", apitest.Request{Method: get, Path: lena + "/api-keys", Bearer: key}, 200)
	l.do(t, "users by key", apitest.Request{Method: get, Path: "/api/users", Bearer: principalKey}, 200)
	l.do(t, "key revoke", apitest.Request{Method: del, Path: fmt.Sprintf("%s/api-keys/%d", lena, keyID.ID), Cookie: sess}, 204)
	l.do(t, "me by revoked key", apitest.Request{Method: get, Path: "/api/me", Bearer: key}, 401)

	// Single sign-on, then a replayed callback and a replayed code.
	p.AddUser(oidctest.User{Subject: "sub-olga", PreferredUsername: "olga", Email: "olga@example.test", Groups: []string{"users"}})
	flow := srv.MustStartOIDC(t, p, "sub-olga")
	l.add("authorization code from the callback URL", flow.Callback.Query().Get("code"), false)
	sso := l.do(t, "OIDC callback", flow.Request(), 303).Cookie("terdut_session")
	l.do(t, "me by SSO session", apitest.Request{Method: get, Path: "/api/me", Cookie: sso}, 200)
	l.do(t, "replayed callback", flow.Request(), 400)
	replay := srv.MustStartOIDC(t, p, "sub-olga")
	l.add("unused authorization code", replay.Callback.Query().Get("code"), false)
	l.do(t, "replayed code", oidcCallbackWith(replay, "code", flow.Callback.Query().Get("code")), 401)

	// Logout, reset (first with a wrong token), and a new claim.
	l.do(t, "logout", apitest.Request{Method: post, Path: "/api/auth/logout", Cookie: sess}, 204)
	l.do(t, "me after logout", apitest.Request{Method: get, Path: "/api/me", Cookie: sess}, 401)

	// A set-password link: issued, redeemed with a password lena chooses, refused a second time.
	third, again := "Lena-third-password-Qe7v", "Lena-link-again-password-Zr5k"
	l.add("password set through the link", third, false)
	l.add("password of a second redemption", again, false)
	var link struct{ Token string }
	l.do(t, "set-password link", apitest.Request{Method: post, Path: lena + "/password-link", Bearer: principalKey,
		Body: map[string]string{}}, 201).JSON(t, &link)
	// Redeeming deletes the link's row, hash and all: only its plain token is looked for.
	l.secrets = append(l.secrets, leakSecret{what: "redeemed set-password link token", value: link.Token,
		shownIn: len(l.responses) - 1})
	l.do(t, "link redeemed", apitest.Request{Method: post, Path: "/api/password-link",
		Body: map[string]string{"token": link.Token, "password": third}}, 204)
	l.do(t, "link redeemed again", apitest.Request{Method: post, Path: "/api/password-link",
		Body: map[string]string{"token": link.Token, "password": again}}, 400)
	l.do(t, "set-password link left unused", apitest.Request{Method: post, Path: lena + "/password-link", Bearer: principalKey,
		Body: map[string]string{}}, 201).JSON(t, &link)
	l.shownByLast("unused set-password link token", link.Token)
	l.do(t, "SSO logout", apitest.Request{Method: post, Path: "/api/auth/logout", Cookie: sso}, 204)
	l.do(t, "reset with a wrong token", apitest.Request{Method: post, Path: "/api/bootstrap/reset", Bearer: wrongOperator}, 401)
	l.do(t, "reset with an API key", apitest.Request{Method: post, Path: "/api/bootstrap/reset", Bearer: principalKey}, 401)
	l.do(t, "reset", apitest.Request{Method: post, Path: "/api/bootstrap/reset", Bearer: apitest.OperatorToken}, 200)
	l.do(t, "me by the reset principal's key", apitest.Request{Method: get, Path: "/api/me", Bearer: principalKey}, 401)
	reclaimed := leakKeyOf(t, l.do(t, "second claim", apitest.Request{Method: post, Path: "/api/bootstrap", Bearer: apitest.OperatorToken}, 201))
	l.shownByLast("the second claim's API key", reclaimed)
	l.do(t, "status", apitest.Request{Method: get, Path: "/api/bootstrap/status"}, 200)
	metrics := l.do(t, "metrics", apitest.Request{Method: get, Path: "/metrics"}, 200)

	// What the server sent to and got from the provider.
	provider.mu.Lock()
	for _, c := range provider.codes {
		l.add("authorization code redeemed", c, false)
	}
	for _, tok := range provider.tokens {
		l.add("token from the provider", tok, false)
	}
	codes, tokens := len(provider.codes), len(provider.tokens)
	provider.mu.Unlock()
	if codes != 2 || tokens != 2 {
		t.Errorf("got %d codes sent to the provider and %d tokens back, want 2 (a sign-in and a replay) and 2 (an ID token and an access token)",
			codes, tokens)
	}
	if n := len(l.secrets); n < 20 {
		t.Fatalf("got %d secrets to look for, want at least 20", n)
	}
	if !strings.Contains(string(metrics.Body), "terdut_signins_total") {
		t.Errorf("metrics: got %.300q, want terdut_signins_total", metrics.Body)
	}

	checkNoLeaks(t, l)
	checkDatabaseHoldsNoSecrets(t, srv, l.secrets)
}

// leakKeyOf returns the API key in a claim's or key creation's body.
func leakKeyOf(t *testing.T, resp apitest.Response) string {
	t.Helper()
	var body struct {
		Key    string
		APIKey struct{ Key string } `json:"api_key"`
	}
	resp.JSON(t, &body)
	key := body.Key + body.APIKey.Key
	if !hexSecretPattern.MatchString(key) {
		t.Fatalf("got key %q in %s, want 64 hex characters", key, resp.Body)
	}
	return key
}

// checkNoLeaks fails for every secret found in the logs or in a response other than the one
// that hands it to its owner.
func checkNoLeaks(t *testing.T, l *leakTrail) {
	t.Helper()
	logs := l.srv.Logs.String()
	if !strings.Contains(logs, `"level":"WARN","msg":"OIDC code exchange failed"`) {
		t.Errorf("logs: got %s, want the replayed code's exchange failure (is the capture working?)", logs)
	}
	for _, s := range l.secrets {
		for _, needle := range leakForms(s) {
			if i := strings.Index(logs, needle); i >= 0 {
				line := logs[strings.LastIndexByte(logs[:i], '\n')+1:]
				line, _, _ = strings.Cut(line, "\n")
				t.Errorf("the %s appears in the logs: %.500s", s.what, line)
			}
			for i, r := range l.responses {
				if i != s.shownIn && strings.Contains(r.text, needle) {
					t.Errorf("the %s appears in the response to %s: %.500q", s.what, r.what, r.text)
				}
			}
		}
	}
}

// leakForms are the forms in which s would be recognised: itself and, for keys and tokens,
// their first half (a prefix logged "for identification" still leaks half the secret).
func leakForms(s leakSecret) []string {
	if s.hashed {
		return []string{s.value, s.value[:32]}
	}
	return []string{s.value}
}

// checkDatabaseHoldsNoSecrets fails unless keys and sessions are stored as 32-byte SHA-256
// hashes, the hashes of the keys and tokens issued, and no row of any table holds a secret
// in plain text or hex.
func checkDatabaseHoldsNoSecrets(t *testing.T, srv *apitest.Server, secrets []leakSecret) {
	t.Helper()
	ctx, pool := t.Context(), srv.Store.Pool()
	stored := map[string]bool{}
	for _, q := range []string{`SELECT key_hash FROM api_keys`, `SELECT token_hash FROM sessions`, `SELECT token_hash FROM password_links`} {
		rows, err := pool.Query(ctx, q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		hashes, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for _, h := range hashes {
			if len(h) != sha256.Size {
				t.Errorf("%s: got a %d-byte hash, want %d bytes", q, len(h), sha256.Size)
			}
			stored[string(h)] = true
		}
	}
	for _, s := range secrets {
		if sum := sha256.Sum256([]byte(s.value)); s.hashed && !stored[string(sum[:])] {
			t.Errorf("the %s: its SHA-256 is not in the database, want every issued key and token stored as its hash", s.what)
		}
	}

	rows, err := pool.Query(ctx, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`)
	if err != nil {
		t.Fatal(err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(tables) < 5 {
		t.Fatalf("tables: got %v, %v, want the schema's", tables, err)
	}
	for _, table := range tables {
		rows, err := pool.Query(ctx, `SELECT t::text FROM `+pgx.Identifier{table}.Sanitize()+` t`)
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		texts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("read %s: %v", table, err)
		}
		for _, text := range texts {
			for _, s := range secrets {
				if strings.Contains(text, s.value) || strings.Contains(text, hex.EncodeToString([]byte(s.value))) {
					t.Errorf("the %s is in plain text in table %s: %.300q", s.what, table, text)
				}
			}
		}
	}
}
