package api_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// browser keeps cookies as a browser at the server's public URL would, and sends them over
// the test's connection to the instance.
type browser struct {
	jar    *cookiejar.Jar
	public *url.URL
}

func newBrowser(t *testing.T, public *url.URL) *browser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &browser{jar: jar, public: public}
}

// do sends req with the cookies the browser holds for its path and keeps those the answer sets.
func (b *browser) do(t *testing.T, srv *apitest.Server, req apitest.Request) apitest.Response {
	t.Helper()
	at := b.public.ResolveReference(&url.URL{Path: strings.SplitN(req.Path, "?", 2)[0]})
	var pairs []string
	for _, c := range b.jar.Cookies(at) {
		pairs = append(pairs, c.Name+"="+c.Value)
	}
	if len(pairs) > 0 {
		req.Header = http.Header{"Cookie": {strings.Join(pairs, "; ")}}
	}
	resp := srv.MustDo(t, req)
	b.jar.SetCookies(at, resp.Cookies)
	return resp
}

// start begins a sign-in for subject and has the provider approve it; it returns the callback
// the provider sends the browser back to.
func (b *browser) start(t *testing.T, srv *apitest.Server, p *oidctest.Provider, subject string) apitest.Request {
	t.Helper()
	resp := b.do(t, srv, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login?login_hint=" + subject})
	if resp.Status != http.StatusFound {
		t.Fatalf("start a sign-in for %s: got %d %s, want 302", subject, resp.Status, resp.Body)
	}
	callback, err := p.TryAuthorize(t.Context(), resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := url.Parse(callback)
	if err != nil {
		t.Fatal(err)
	}
	return apitest.Request{Method: http.MethodGet, Path: cb.RequestURI()}
}

// signedIn reports whether resp is a finished sign-in: 303 to / with a session cookie.
func signedIn(resp apitest.Response) bool {
	for _, c := range resp.Cookies {
		if strings.HasSuffix(c.Name, "terdut_session") && c.Value != "" {
			return resp.Status == http.StatusSeeOther && resp.Header.Get("Location") == "/"
		}
	}
	return false
}

func newStateServer(t *testing.T, public string) (*apitest.Server, *oidctest.Provider, *url.URL) {
	t.Helper()
	var u *url.URL
	srv, p := newOIDCServer(t, func(o *api.Options) {
		if public != "" {
			o.PublicURL, _ = url.Parse(public)
		}
		u = o.PublicURL
	})
	srv.MustClaim(t)
	return srv, p, u
}

// TestOIDC_StateCookie: the cookie that binds a sign-in to its browser is __Host- prefixed,
// Secure, HttpOnly, SameSite=Lax and Path=/ under an https public URL (plain name, not Secure,
// over loopback http); one is set per sign-in, so a second start leaves the first to finish.
func TestOIDC_StateCookie(t *testing.T) {
	for _, tc := range []struct {
		name, public, prefix string
		secure               bool
	}{
		{"HTTPS", "https://terdut.example.test", "__Host-terdut_oidc_state-", true},
		{"LoopbackHTTP", "", "terdut_oidc_state-", false},
	} {
		t.Run(tc.name+"/Attributes", func(t *testing.T) {
			srv, _, _ := newStateServer(t, tc.public)
			resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
			c := resp.StateCookie()
			if resp.Status != http.StatusFound || c == nil {
				t.Fatalf("got %d %v, want 302 with a state cookie", resp.Status, resp.Cookies)
			}
			if !strings.HasPrefix(c.Name, tc.prefix) || c.Path != "/" || c.Domain != "" || c.Secure != tc.secure ||
				!c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.MaxAge <= 0 || c.MaxAge > 600 {
				t.Fatalf("got %s (path %q, domain %q, secure %v, httponly %v, samesite %v, max-age %d), want a name starting %q, "+
					"path /, no domain, secure %v, httponly, samesite lax, max-age 1..600",
					c.Name, c.Path, c.Domain, c.Secure, c.HttpOnly, c.SameSite, c.MaxAge, tc.prefix, tc.secure)
			}
		})

		t.Run(tc.name+"/SeveralInFlight", func(t *testing.T) {
			srv, p, public := newStateServer(t, tc.public)
			b := newBrowser(t, public)
			first := b.start(t, srv, p, "alice")
			second := b.start(t, srv, p, "bob")
			if resp := b.do(t, srv, first); !signedIn(resp) {
				t.Fatalf("the first sign-in, finished after a second start: got %d %s, want 303 to / with a session", resp.Status, resp.Body)
			}
			if resp := b.do(t, srv, second); !signedIn(resp) {
				t.Fatalf("the second sign-in: got %d %s, want 303 to / with a session", resp.Status, resp.Body)
			}
			// Each callback ended its own cookie, so a replay has none to match.
			if resp := b.do(t, srv, first); resp.Status != http.StatusBadRequest || resp.Code() != "invalid_state" {
				t.Fatalf("the first callback again: got %d %s, want 400 invalid_state", resp.Status, resp.Body)
			}
		})
	}

	t.Run("Bounded", func(t *testing.T) {
		srv, p, public := newStateServer(t, "")
		b := newBrowser(t, public)
		var flows []apitest.Request
		for range 8 {
			flows = append(flows, b.start(t, srv, p, "alice"))
		}
		held := 0
		for _, c := range b.jar.Cookies(public) {
			if strings.HasPrefix(c.Name, "terdut_oidc_state-") {
				held++
			}
		}
		if held != 5 {
			t.Fatalf("state cookies after 8 starts: got %d, want 5", held)
		}
		if resp := b.do(t, srv, flows[len(flows)-1]); !signedIn(resp) {
			t.Fatalf("the newest sign-in: got %d %s, want 303 to / with a session", resp.Status, resp.Body)
		}
	})

	// A sibling subdomain can set cookies for this host, but not __Host- ones: the attacker
	// starts a sign-in as themselves, plants its state in the victim's browser under every name
	// without the prefix, and sends the victim to the callback with the attacker's code. The
	// victim must not end up signed in as the attacker.
	t.Run("HTTPS/PlantedWithoutPrefix", func(t *testing.T) {
		srv, p, public := newStateServer(t, "https://terdut.example.test")
		start := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login?login_hint=mallory"})
		c := start.StateCookie()
		if start.Status != http.StatusFound || c == nil {
			t.Fatalf("the attacker's start: got %d, want 302 with a state cookie", start.Status)
		}
		callback, err := p.TryAuthorize(t.Context(), start.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		cb, _ := url.Parse(callback)
		planted := []string{strings.TrimPrefix(c.Name, "__Host-") + "=" + c.Value, "terdut_oidc_state=" + c.Value,
			"terdut_oidc_state=" + cb.Query().Get("state")}
		resp := srv.MustDo(t, apitest.Request{Method: http.MethodGet, Path: cb.RequestURI(),
			Header: http.Header{"Cookie": {strings.Join(planted, "; ")}}})
		if resp.Status != http.StatusBadRequest || resp.Code() != "invalid_state" || signedIn(resp) {
			t.Fatalf("the callback with planted cookies: got %d %s, want 400 invalid_state and no session", resp.Status, resp.Body)
		}
		// The attacker's own browser, holding the real cookie, still finishes.
		b := newBrowser(t, public)
		b.jar.SetCookies(public, []*http.Cookie{c})
		if resp := b.do(t, srv, apitest.Request{Method: http.MethodGet, Path: cb.RequestURI()}); !signedIn(resp) {
			t.Fatalf("with the __Host- cookie: got %d %s, want 303 to / with a session", resp.Status, resp.Body)
		}
	})
}
