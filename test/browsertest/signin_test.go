//go:build browser

package browsertest

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

const (
	signInButton  = chromedp.CSS(`form[action="/api/auth/login"] button[type="submit"]`)
	signOutButton = chromedp.CSS(`form[action="/api/auth/logout"] button[type="submit"]`)
)

// newServer starts an instance on a fresh, unclaimed database with password sign-in and
// single sign-on through a new in-process provider.
func newServer(t *testing.T) (*apitest.Server, *oidctest.Provider) {
	t.Helper()
	p := oidctest.NewProvider(t)
	srv := apitest.NewServer(t, pgtest.MustDatabase(t), func(o *api.Options) {
		o.OIDC = &api.OIDCOptions{Issuer: p.Issuer(), ClientID: p.ClientID, ClientSecret: p.ClientSecret,
			GroupsClaim: "groups"}
	})
	return srv, p
}

func TestBrowser_SingleSignOn(t *testing.T) {
	t.Parallel()
	srv, p := newServer(t)
	b := newBrowser(t, srv.URL)

	resp := b.open("/login")
	if resp.Status != http.StatusOK {
		t.Fatalf("GET /login: got %d, want 200", resp.Status)
	}
	if !b.has("sso") || !b.has("username") || !b.has("password") {
		t.Fatalf("login page: got sso %v, username %v, password %v, want all three",
			b.has("sso"), b.has("username"), b.has("password"))
	}
	b.screenshot("login")

	// While the install is unclaimed, the gate turns the browser away before it reaches
	// the provider, with the page that says so.
	resp = b.click("#sso")
	if resp.Status != http.StatusServiceUnavailable {
		t.Errorf("SSO while pending: got %d, want 503", resp.Status)
	}
	if got := resp.Headers["Retry-After"]; got == nil {
		t.Errorf("SSO while pending: got headers %v, want a Retry-After", resp.Headers)
	}
	if got, want := b.text("pending"), "still being set up"; !strings.Contains(got, want) {
		t.Errorf("pending page: got %q, want it to contain %q", got, want)
	}
	if got := b.location(); got != "/auth/oidc/login" {
		t.Errorf("pending page at %s, want /auth/oidc/login", got)
	}
	b.screenshot("pending")
	if got := p.AuthorizeRequests(); got != 0 {
		t.Errorf("authorization requests while pending: got %d, want 0", got)
	}
	if users, err := srv.Store.Users(context.Background()); err != nil || len(users) != 0 {
		t.Fatalf("users after a refused sign-in: got %v (%v), want none", users, err)
	}

	srv.MustClaim(t)

	b.open("/login")
	resp = b.click("#sso")
	if resp.Status != http.StatusOK {
		t.Fatalf("SSO after the claim: got %d at %s, want 200", resp.Status, b.location())
	}
	if got := b.location(); got != "/" {
		t.Fatalf("SSO after the claim: browser is at %s, want /", got)
	}
	if got, want := b.text("signed-in"), "Signed in as alice"; !strings.Contains(got, want) {
		t.Errorf("landing page: got %q, want it to contain %q", got, want)
	}
	if got := p.TokensIssued(); got != 1 {
		t.Errorf("tokens issued: got %d, want 1", got)
	}
	b.screenshot("signed-in")

	signOut(t, b)
}

func TestBrowser_Password(t *testing.T) {
	t.Parallel()
	srv, _ := newServer(t)
	srv.MustClaim(t)
	bob := apitest.MustPerson(t, srv.Store, "bob", store.RoleMember)
	b := newBrowser(t, srv.URL)

	t.Run("ErrInvalidCredentials", func(t *testing.T) {
		b := b.in(t)
		b.open("/login")
		resp := passwordSignIn(b, "bob", "not-"+bob.Password)
		if resp.Status != http.StatusUnauthorized {
			t.Errorf("wrong password: got %d, want 401", resp.Status)
		}
		if got, want := b.text("error"), "Wrong username or password."; got != want {
			t.Errorf("error: got %q, want %q", got, want)
		}
		if b.has("signed-in") {
			t.Errorf("wrong password: got the signed-in page, want the login page")
		}
		b.screenshot("wrong-password")
	})

	t.Run("OK", func(t *testing.T) {
		b := b.in(t)
		b.open("/login")
		resp := passwordSignIn(b, "bob", bob.Password)
		if resp.Status != http.StatusOK {
			t.Fatalf("sign in: got %d at %s, want 200", resp.Status, b.location())
		}
		if got := b.location(); got != "/" {
			t.Fatalf("sign in: browser is at %s, want /", got)
		}
		if got, want := b.text("signed-in"), "Signed in as bob"; !strings.Contains(got, want) {
			t.Errorf("landing page: got %q, want it to contain %q", got, want)
		}
		b.screenshot("signed-in")
		signOut(t, b)
	})
}

// passwordSignIn types the credentials into the login form like a person and submits it.
func passwordSignIn(b *browser, username, password string) *network.Response {
	b.t.Helper()
	b.do("fill the login form",
		chromedp.SendKeys(chromedp.ID("username"), username),
		chromedp.SendKeys(chromedp.ID("password"), password))
	return b.click(signInButton)
}

// signOut clicks the sign-out button and checks that the browser is back on /login and
// that its session is over: / sends it to /login again.
func signOut(t *testing.T, b *browser) {
	t.Helper()
	resp := b.click(signOutButton)
	if resp.Status != http.StatusOK {
		t.Errorf("sign out: got %d, want 200", resp.Status)
	}
	if got := b.location(); got != "/login" {
		t.Fatalf("sign out: browser is at %s, want /login", got)
	}
	b.open("/")
	if got := b.location(); got != "/login" || b.has("signed-in") {
		t.Errorf("after signing out, / shows %s, want /login", got)
	}
}
