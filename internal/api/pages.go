package api

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"html/template"
	"net/http"
	"strings"

	"github.com/terdut-server/terdut-server/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

var templates = template.Must(template.ParseFS(templateFS, "templates/*.html"))

// pageData is what every page template sees.
type pageData struct {
	Title    string
	Error    string
	SSO      bool
	Password bool
	User     store.User
	// ClaimCommand, on the pending page, is the curl line that claims an install no operator
	// will claim (the open claim); empty when an operator is configured.
	ClaimCommand string
	// Token, on the set-password page, is its link's token, which the form sends back; empty
	// when the page has no form to show. Done says the password was set.
	Token string
	Done  bool
	// Open, on the set-password page, asks for its link's token: filled from the link's
	// fragment by OpenScript, or pasted.
	Open       bool
	OpenScript template.JS
}

// setPasswordOpenScript is the one script of any page here (the set-password page a link
// opens, pageData.Open): it takes the token from the link's fragment, which the browser never
// sends, removes the fragment from the address bar and the history, and posts the token. The
// page's Content-Security-Policy allows it by its hash, and no other script.
const setPasswordOpenScript = `(function () {
  var m = /^#token=([0-9a-f]{64})$/.exec(window.location.hash);
  if (!m) { return; }
  window.history.replaceState(null, "", window.location.pathname);
  var f = document.getElementById("open");
  f.elements.token.value = m[1];
  f.submit();
})();`

// pagesCSP is every page's Content-Security-Policy: no script; openPageCSP is the
// set-password page's that a link opens: its own script alone.
const pagesCSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"

var openPageCSP = func() string {
	sum := sha256.Sum256([]byte(setPasswordOpenScript))
	return "default-src 'none'; script-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) +
		"'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'"
}()

var pageTitles = map[string]string{
	"login.html":        "Sign in",
	"pending.html":      "terdut-server is being set up",
	"home.html":         "terdut-server",
	"error.html":        "Sign-in failed",
	"set_password.html": "Choose your password",
}

// wantsHTML reports whether the client is a browser asking for a page.
func wantsHTML(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "text/html")
}

// renderPage renders a template into a buffer first, so a template error never sends half a page.
func (s *server) renderPage(w http.ResponseWriter, status int, name string, data *pageData) {
	if data == nil {
		data = &pageData{}
	}
	if data.Title == "" {
		data.Title = pageTitles[name]
	}
	csp := pagesCSP
	if data.Open {
		data.OpenScript, csp = setPasswordOpenScript, openPageCSP
	}
	var buf bytes.Buffer
	if err := templates.ExecuteTemplate(&buf, name, data); err != nil {
		s.log.Error("render page", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail answers an error as a page for browsers and as JSON for API clients.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if !wantsHTML(r) {
		s.writeError(w, r, err)
		return
	}
	e := s.classify(err)
	s.logFailure(r, e, err)
	setRetryAfter(w, e.RetryAfter)
	s.renderPage(w, e.Status, "error.html", &pageData{Error: e.Message})
}

func (s *server) renderLogin(w http.ResponseWriter, r *http.Request, e *apiError) {
	data := &pageData{SSO: s.oidc != nil, Password: s.opts.PasswordLogin}
	status := http.StatusOK
	if e == nil && s.oidc != nil {
		if m := s.oidc.Misconfiguration(); m != nil {
			data.Error = m.Message // for whoever tells the administrators; the page itself is fine
		}
	}
	if e != nil {
		data.Error, status = e.Message, e.Status
	}
	s.renderPage(w, status, "login.html", data)
}

func (s *server) handleLoginPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.renderLogin(w, r, nil)
	})
}

// handleHome shows who is signed in, or sends the browser to /login.
func (s *server) handleHome() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		s.renderPage(w, http.StatusOK, "home.html", &pageData{User: p.User})
	})
}
