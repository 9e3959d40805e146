//go:build browser

package browsertest

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/terdut-server/terdut-server/test/harness/apitest"
)

const setPasswordButton = chromedp.CSS(`form[action="/set-password"] button[type="submit"]`)

// TestBrowser_SetPasswordLink: an admin gives a new person a set-password link, its token in
// the fragment; the person opens it in a browser, whose page's one script posts the token
// and takes the fragment out of the address bar; with JavaScript then off, the person chooses
// a password on the form (first two that differ, which the page refuses, keeping the link),
// and signs in with it; the link, opened again with JavaScript off and its token pasted, then
// says it was used.
func TestBrowser_SetPasswordLink(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	key := srv.MustClaim(t)
	resp := srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users", Bearer: key,
		Body: map[string]string{"username": "dana", "email": "dana@example.test"}})
	var dana struct{ ID int64 }
	resp.JSON(t, &dana)
	if resp.Status != http.StatusCreated {
		t.Fatalf("create dana: got %d %s, want 201", resp.Status, resp.Body)
	}
	resp = srv.MustDo(t, apitest.Request{Method: http.MethodPost, Path: "/api/users/" + strconv.FormatInt(dana.ID, 10) + "/password-link",
		Bearer: key, Body: map[string]string{}})
	var link struct{ URL string }
	resp.JSON(t, &link)
	path, ok := strings.CutPrefix(link.URL, srv.URL)
	if resp.Status != http.StatusCreated || !ok || !strings.HasPrefix(path, "/set-password#token=") {
		t.Fatalf("the link: got %d %s, want 201 with a url under %s", resp.Status, resp.Body, srv.URL)
	}

	b := newBrowser(t, srv.URL)
	page := b.open(path)
	if page.Status != http.StatusOK {
		t.Fatalf("the link's page: got %d, want 200", page.Status)
	}
	if csp, _ := page.Headers["Content-Security-Policy"].(string); !strings.Contains(csp, "default-src 'none'") ||
		!strings.Contains(csp, "script-src 'sha256-") {
		t.Errorf("the link's page: got Content-Security-Policy %q, want default-src 'none' and its script's hash", csp)
	}
	// Its script posts the token: the form for dana comes, and the token is in no address.
	for deadline := time.Now().Add(10 * time.Second); !b.has("confirm"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the link's page: no form within 10s; the page is at %s", b.location())
		}
	}
	if got := b.location(); got != "/set-password" {
		t.Errorf("the form's address: got %s, want /set-password (no token)", got)
	}
	// The form must work as a plain HTML form: no script of its own runs.
	noScript := func() {
		b.do("turn JavaScript off", chromedp.Func(func(ctx context.Context, tgt *chromedp.Target) error {
			_, err := cdp.Call(ctx, tgt, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}))
	}
	noScript()
	if got := b.value("username"); got != "dana" {
		t.Errorf("the form's username: got %q, want dana", got)
	}
	b.screenshot("form")

	fill := func(password, confirm string) {
		b.do("fill the set-password form",
			chromedp.SendKeys(chromedp.ID("password"), password),
			chromedp.SendKeys(chromedp.ID("confirm"), confirm))
	}
	fill("lantern orchid pebble", "lantern orchid pebbles")
	resp2 := b.click(setPasswordButton)
	if resp2.Status != http.StatusBadRequest {
		t.Errorf("two passwords that differ: got %d, want 400", resp2.Status)
	}
	if got, want := b.text("error"), "The two passwords differ"; !strings.Contains(got, want) {
		t.Errorf("two passwords that differ: got %q, want it to contain %q", got, want)
	}
	if !b.has("password") || b.value("username") != "dana" {
		t.Fatalf("two passwords that differ: got no form for dana again, want it shown again")
	}
	b.screenshot("differ")

	const chosen = "lantern orchid pebble"
	fill(chosen, chosen)
	if resp := b.click(setPasswordButton); resp.Status != http.StatusOK {
		t.Fatalf("set the password: got %d, want 200", resp.Status)
	}
	if got, want := b.text("done"), "The password of dana is set"; !strings.Contains(got, want) {
		t.Errorf("after the form: got %q, want it to contain %q", got, want)
	}
	b.screenshot("done")

	b.click(chromedp.CSS("#sign-in"))
	if got := b.location(); got != "/login" {
		t.Fatalf("sign-in link: browser is at %s, want /login", got)
	}
	if resp := passwordSignIn(b, "dana", chosen); resp.Status != http.StatusOK || b.location() != "/" {
		t.Fatalf("sign in with the chosen password: got %d at %s, want 200 at /", resp.Status, b.location())
	}
	if got, want := b.text("signed-in"), "Signed in as dana"; !strings.Contains(got, want) {
		t.Errorf("landing page: got %q, want it to contain %q", got, want)
	}
	signOut(t, b)

	// The link was used: opened without JavaScript, its page asks for the token; pasted, it
	// says the link was used, and shows no form.
	noScript()
	if resp := b.open(path); resp.Status != http.StatusOK || !b.has("token") {
		t.Fatalf("the used link without JavaScript: got %d, want 200 and a field for the token", resp.Status)
	}
	_, token, _ := strings.Cut(path, "#token=")
	b.do("paste the token", chromedp.SendKeys(chromedp.ID("token"), token))
	if resp := b.click(chromedp.CSS(`form#open button[type="submit"]`)); resp.Status != http.StatusBadRequest {
		t.Errorf("the used link: got %d, want 400", resp.Status)
	}
	if got, want := b.text("error"), "This set-password link is not valid"; !strings.Contains(got, want) {
		t.Errorf("the used link: got %q, want it to contain %q", got, want)
	}
	if b.has("password") {
		t.Errorf("the used link: got a form, want none")
	}
	b.screenshot("used")
}

// value returns the value of the input with this id.
func (b *browser) value(id chromedp.ID) string {
	b.t.Helper()
	ctx, cancel := b.step()
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Value(id))
	if err != nil {
		b.t.Fatalf("value of #%s: %v", id, err)
	}
	return v
}
