package api_test

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// linkWithURL is a set-password link's answer with the field the page added: the link itself.
type linkWithURL struct {
	UserID int64  `json:"user_id"`
	Token  string `json:"token"`
	URL    string `json:"url"`
}

func mustLinkURL(t *testing.T, srv *apitest.Server, id int64, bearer string) linkWithURL {
	t.Helper()
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: userURL(id, "/password-link"), Bearer: bearer,
		Body: map[string]any{}})
	wantStatus(t, resp, http.StatusCreated)
	var l linkWithURL
	resp.JSON(t, &l)
	return l
}

// openLink posts a link's token as the page the link opens does (its script, or a person who
// pasted it), which answers the form where the person chooses their password.
func openLink(t *testing.T, srv *apitest.Server, token string, header http.Header) apitest.Response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"text/html"}}
	for k, v := range header {
		h[k] = v
	}
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/set-password", Header: h,
		Body: url.Values{"step": {"open"}, "token": {token}}.Encode()})
}

// wantOpenPage checks that resp is the page a link opens: a field for the token, no token in
// it, and one script, the one its Content-Security-Policy allows by its hash and no other.
func wantOpenPage(t *testing.T, what string, resp apitest.Response) {
	t.Helper()
	body := string(resp.Body)
	if resp.Status != http.StatusOK || !strings.Contains(body, `id="open"`) || !strings.Contains(body, `name="token"`) ||
		!strings.Contains(body, `name="step" value="open"`) {
		t.Fatalf("%s: got %d %s, want 200 and the page asking for the link's token", what, resp.Status, body)
	}
	_, script, ok := strings.Cut(body, "<script>")
	script, _, ok2 := strings.Cut(script, "</script>")
	if !ok || !ok2 || strings.Count(body, "<script") != 1 || !strings.Contains(script, "location.hash") ||
		!strings.Contains(script, "replaceState") {
		t.Fatalf("%s: got %s, want one script that reads the fragment and takes it out of the history", what, body)
	}
	sum := sha256.Sum256([]byte(script))
	want := "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
	if got := resp.Header.Get("Content-Security-Policy"); got != want {
		t.Errorf("%s: got Content-Security-Policy %q, want %q: the page's own script alone", what, got, want)
	}
	if resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Cache-Control") != "no-store" ||
		resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("%s: got headers %v, want no referrer, no-store and nosniff", what, resp.Header)
	}
}

// setPasswordForm posts the set-password page's form as a browser on the page does.
func setPasswordForm(t *testing.T, srv *apitest.Server, token, password, confirm string, header http.Header) apitest.Response {
	t.Helper()
	h := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}, "Accept": {"text/html"}}
	for k, v := range header {
		h[k] = v
	}
	return srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/set-password", Header: h,
		Body: url.Values{"token": {token}, "password": {password}, "confirm": {confirm}}.Encode()})
}

// wantPage checks that resp is the set-password page with status, saying each of says.
func wantPage(t *testing.T, what string, resp apitest.Response, status int, says ...string) {
	t.Helper()
	if resp.Status != status || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("%s: got %d %q %s, want %d and a page", what, resp.Status, resp.Header.Get("Content-Type"), resp.Body, status)
	}
	csp := resp.Header.Get("Content-Security-Policy")
	if !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "form-action 'self'") ||
		resp.Header.Get("Referrer-Policy") != "no-referrer" || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("%s: got headers %v, want the pages' CSP, no referrer and no-store", what, resp.Header)
	}
	if strings.Contains(string(resp.Body), "<script") {
		t.Errorf("%s: got a script in the page, want none", what)
	}
	for _, s := range says {
		if !strings.Contains(string(resp.Body), s) {
			t.Errorf("%s: got %s, want it to contain %q", what, resp.Body, s)
		}
	}
}

// TestPasswordLinks_Page: the link the API answers is a URL under the public URL with the token
// in its fragment, which browsers never send, so that no gateway's access log holds it; the
// page it opens posts the token (its one script, or the person pasting it) and answers a form
// that needs no script; a link of an earlier version (?token=) still works; the form sets the
// password once; what the person can mend
// (two passwords that differ, a password the rules refuse) shows the form again with the
// reason and leaves the link live; a used, expired or unknown link gets a page that says so.
func TestPasswordLinks_Page(t *testing.T) {
	srv := newServer(t)
	srv.MustClaim(t)
	admin := apitest.MustPerson(t, srv.Store, "root", store.RoleAdmin)
	pat := apitest.MustPerson(t, srv.Store, "pat", store.RoleMember)
	patSession := srv.MustLogin(t, "pat", pat.Password)

	l := mustLinkURL(t, srv, pat.User.ID, admin.APIKey)
	if want := srv.URL + "/set-password#token=" + l.Token; l.URL != want || l.UserID != pat.User.ID {
		t.Fatalf("the link: got %+v, want the url %s", l, want)
	}
	// What a browser asks for when it opens the link: the path, never the fragment.
	u, err := url.Parse(l.URL)
	if err != nil {
		t.Fatal(err)
	}
	opened := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: u.RequestURI()})
	wantOpenPage(t, "the page the link opens", opened)
	if strings.Contains(string(opened.Body), l.Token) {
		t.Fatalf("the page the link opens holds the token, which the server never got: %s", opened.Body)
	}
	page := openLink(t, srv, l.Token, nil)
	wantPage(t, "the link's page", page, http.StatusOK, `action="/set-password"`, `method="post"`,
		`name="token" value="`+l.Token+`"`, `value="pat"`, `name="confirm"`)
	if old := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password?token=" + l.Token}); old.Status != http.StatusOK ||
		!strings.Contains(string(old.Body), `name="token" value="`+l.Token+`"`) {
		t.Fatalf("a link of an earlier version (?token=): got %d %s, want its form", old.Status, old.Body)
	}
	// A cross-site post of a token shows nothing.
	wantPage(t, "a cross-site post of the token", openLink(t, srv, l.Token, http.Header{"Sec-Fetch-Site": {"cross-site"}}),
		http.StatusForbidden, "this site&#39;s own page")

	live := func(what string) {
		t.Helper()
		if resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password?token=" + l.Token}); resp.Status != http.StatusOK {
			t.Fatalf("after %s: got %d, want the link still live", what, resp.Status)
		}
		if resp := login(t, srv, "pat", pat.Password, nil); resp.Status != http.StatusOK {
			t.Fatalf("after %s: pat's old password got %d, want 200: it must not have changed", what, resp.Status)
		}
	}
	wantPage(t, "passwords that differ", setPasswordForm(t, srv, l.Token, "tulip anchor violet", "tulip anchor violent", nil),
		http.StatusBadRequest, "The two passwords differ", `name="token" value="`+l.Token+`"`, `value="pat"`)
	live("two passwords that differ")
	wantPage(t, "a famous passphrase", setPasswordForm(t, srv, l.Token, "correct horse battery staple", "correct horse battery staple", nil),
		http.StatusBadRequest, "commonest passwords", `name="token" value="`+l.Token+`"`, `value="pat"`)
	wantPage(t, "too short", setPasswordForm(t, srv, l.Token, "short", "short", nil),
		http.StatusBadRequest, "at least 12 characters", `name="token" value="`+l.Token+`"`)
	live("refused passwords")
	// A cross-site form (another site's page posting to this one) sets nothing.
	wantPage(t, "a cross-site form", setPasswordForm(t, srv, l.Token, "mallory chose this one", "mallory chose this one",
		http.Header{"Sec-Fetch-Site": {"cross-site"}}), http.StatusForbidden, "this site&#39;s own page")
	live("a cross-site form")

	const chosen = "tulip anchor violet meteor"
	done := setPasswordForm(t, srv, l.Token, chosen, chosen, nil)
	wantPage(t, "the form", done, http.StatusOK, `id="done"`, "pat", `href="/login"`)
	if strings.Contains(string(done.Body), l.Token) || strings.Contains(string(done.Body), chosen) {
		t.Errorf("the page after the password was set shows the token or the password: %s", done.Body)
	}
	if status := meStatus(t, srv, patSession); status != http.StatusUnauthorized {
		t.Errorf("pat's session after the link set the password: got %d, want 401", status)
	}
	if resp := login(t, srv, "pat", chosen, nil); resp.Status != http.StatusOK {
		t.Errorf("sign-in with the password pat chose on the page: got %d %s, want 200", resp.Status, resp.Body)
	}

	// Used, expired, never issued: a page that says so, with no form.
	dead := "This set-password link is not valid"
	wantPage(t, "the link used", srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password?token=" + l.Token}),
		http.StatusBadRequest, dead, `href="/login"`)
	resp := setPasswordForm(t, srv, l.Token, "a second use of it", "a second use of it", nil)
	wantPage(t, "the form of a used link", resp, http.StatusBadRequest, dead)
	if strings.Contains(string(resp.Body), "<form") {
		t.Errorf("a used link's page shows a form: %s", resp.Body)
	}
	expired := mustLinkURL(t, srv, pat.User.ID, admin.APIKey)
	if _, err := srv.Store.Pool().Exec(t.Context(), `UPDATE password_links SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	wantPage(t, "an expired link", srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password?token=" + expired.Token}),
		http.StatusBadRequest, dead)
	wantPage(t, "the form of an expired link", setPasswordForm(t, srv, expired.Token, "too late for this", "too late for this", nil),
		http.StatusBadRequest, dead)
	for _, token := range []string{l.Token, expired.Token, "", strings.Repeat("ab", 32), "<script>"} {
		wantPage(t, "the token "+token+" posted", openLink(t, srv, token, nil), http.StatusBadRequest, dead)
	}
	for _, q := range []string{"?token=", "?token=" + strings.Repeat("ab", 32), "?token=%3Cscript%3E"} {
		wantPage(t, "the page at "+q, srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password" + q}),
			http.StatusBadRequest, dead)
	}
	if resp := login(t, srv, "pat", chosen, nil); resp.Status != http.StatusOK {
		t.Errorf("after the refused uses, pat's password: got %d, want 200 with the one chosen", resp.Status)
	}

	// Neither a token nor a password reaches the log.
	logs := srv.Logs.String()
	for _, secret := range []string{l.Token, expired.Token, chosen, "mallory chose this one", "tulip anchor violent"} {
		if strings.Contains(logs, secret) {
			t.Errorf("the log holds %q", secret)
		}
	}
}

// TestPasswordLinks_PageWithPasswordLoginOff: with --password-login=false the page, like the
// JSON endpoints, sets nothing and says why.
func TestPasswordLinks_PageWithPasswordLoginOff(t *testing.T) {
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) { o.PasswordLogin = false })
	token := strings.Repeat("ab", 32)
	wantPage(t, "the page", srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password?token=" + token}),
		http.StatusForbidden, "--password-login=false")
	wantPage(t, "the page a link opens", srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/set-password"}),
		http.StatusForbidden, "--password-login=false")
	wantPage(t, "the token posted", openLink(t, srv, token, nil), http.StatusForbidden, "--password-login=false")
	wantPage(t, "the form", setPasswordForm(t, srv, token, "tulip anchor violet", "tulip anchor violet", nil),
		http.StatusForbidden, "--password-login=false")
}
