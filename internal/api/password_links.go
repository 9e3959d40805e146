package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// passwordLinkTTL is how long a set-password link lives: long enough to pass on and use, short
// enough that a link left in a chat log is dead by the time someone else reads it.
const passwordLinkTTL = time.Hour

var (
	errPasswordLoginOff = &apiError{Status: http.StatusForbidden, Code: "password_login_disabled",
		Message: "Password sign-in is off on this server (--password-login=false), so no password can be set this way."}
	errPasswordLinkInvalid = &apiError{Status: http.StatusBadRequest, Code: "invalid_password_link",
		Message: "This set-password link is not valid: it was used, replaced, revoked or expired. Ask an admin for a new one."}
)

// requirePasswordLogin refuses the set-password links with password sign-in off: no password
// they set could be used.
func (s *server) requirePasswordLogin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.opts.PasswordLogin {
			s.writeError(w, r, errPasswordLoginOff)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// passwordLinkJSON is a set-password link as the API shows it, once: its token is stored only
// as a hash. URL is the page where the person chooses their password: what to send them.
type passwordLinkJSON struct {
	UserID    int64     `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
	URL       string    `json:"url"`
}

// setPasswordPath is the set-password page's, under the public URL.
const setPasswordPath = "/set-password"

// passwordLinkURL is the link itself: the set-password page, under the public URL, with the
// token in its fragment (#token=), which a browser never sends: so the token reaches no
// gateway's or proxy's access log. The page's script posts it (setPasswordOpenScript).
func (s *server) passwordLinkURL(token string) string {
	u := url.URL{Path: setPasswordPath}
	if s.opts.PublicURL != nil {
		u = *s.opts.PublicURL.JoinPath(setPasswordPath)
	}
	u.Fragment = "token=" + token
	return u.String()
}

// handlePasswordLinkCreate issues a one-time, short-lived set-password link for {id}, which
// replaces any earlier one: the way an admin gives a person a password without choosing it.
// From a session it needs the step-up of key creation. Never for a machine user or a single
// sign-on person, nor for an admin who has a password (theirs alone to change).
func (s *server) handlePasswordLinkCreate() http.Handler {
	type request struct {
		CurrentPassword string `json:"current_password"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := pathID(r, "id")
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		by, err := s.stepUp(r, req.CurrentPassword)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		l, err := s.store.IssuePasswordLink(r.Context(), id, by, passwordLinkTTL)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "user.password_link_created", TargetID: id,
			Detail: "expires " + l.ExpiresAt.UTC().Format(time.RFC3339)})
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, passwordLinkJSON{UserID: l.UserID, Token: l.Token, ExpiresAt: l.ExpiresAt,
			URL: s.passwordLinkURL(l.Token)})
	})
}

// handlePasswordLinkRedeem sets the password of a set-password link's person, once, and ends
// their sessions. It needs no sign-in: the link is the credential.
func (s *server) handlePasswordLinkRedeem() http.Handler {
	type request struct {
		Token    string `json:"token"`
		Password string `json:"password"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if _, err := s.redeemPasswordLink(r, req.Token, req.Password); err != nil {
			s.writeError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// redeemPasswordLink sets password as the password of the person of the link with token, once,
// and ends their sessions: the JSON endpoint's work and the page's. A wrong token, or a
// password the rules refuse, changes nothing: the link stays as it was.
func (s *server) redeemPasswordLink(r *http.Request, token, password string) (store.User, error) {
	if !isSecret(token) {
		return store.User{}, errPasswordLinkInvalid
	}
	if err := validatePassword(password); err != nil {
		return store.User{}, err
	}
	// A dead token is refused before bcrypt runs: anyone can send one.
	if err := s.store.PasswordLinkLive(r.Context(), token); err != nil {
		return store.User{}, err
	}
	hash, err := s.hashPassword(r.Context(), password)
	if err != nil {
		return store.User{}, err
	}
	u, err := s.store.RedeemPasswordLink(r.Context(), token, hash)
	if err != nil {
		return store.User{}, err
	}
	s.audit(r, store.Event{Event: "user.password_set", ActorKind: store.ActorKindUser, ActorID: u.ID,
		ActorName: u.Username, TargetID: u.ID, TargetName: u.Username, Detail: "by set-password link"})
	return u, nil
}

// errPasswordsDiffer refuses the set-password form when its two passwords differ.
var errPasswordsDiffer = errBadRequest("passwords_differ",
	"The two passwords differ; type the same password in both fields.")

// handleSetPasswordPage is the page a set-password link leads to. A link carries its token in
// its fragment, which the browser keeps to itself: the page it gets has a field for the token
// and a script, the one any page here runs, that fills it from the fragment, takes the
// fragment out of the address bar and history, and posts it (handleSetPasswordForm then shows
// the form where the person chooses their password); without JavaScript, the person pastes
// the token. A link of an earlier version, its token in the query (?token=, at most an hour
// old), still gets the form at once; a link that is not live gets a page that says so.
func (s *server) handleSetPasswordPage() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !r.URL.Query().Has("token") {
			if !s.opts.PasswordLogin {
				s.setPasswordFailed(w, r, errPasswordLoginOff)
				return
			}
			s.renderPage(w, http.StatusOK, "set_password.html", &pageData{Open: true})
			return
		}
		token := r.URL.Query().Get("token")
		u, err := s.passwordLinkPerson(r.Context(), token)
		if err != nil {
			s.setPasswordFailed(w, r, err)
			return
		}
		s.renderPage(w, http.StatusOK, "set_password.html", &pageData{Token: token, User: u})
	})
}

// handleSetPasswordForm takes the set-password page's forms: the token alone (step=open, from
// the page a link opens), which shows the form where the person chooses their password; then
// that form. A refusal the person can mend (the two passwords differ, the rules refuse it)
// shows the form again with the reason, the link still live; a link that is no longer live
// shows a page that says so.
func (s *server) handleSetPasswordForm() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.crossOrigin.Check(r); err != nil {
			s.setPasswordFailed(w, r, &apiError{Status: http.StatusForbidden, Code: "cross_origin",
				Message: "Choose your password on this site's own page: open the set-password link again."})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
		if !isFormPost(r) || r.ParseForm() != nil {
			s.setPasswordFailed(w, r, errBadRequest("invalid_form", "The form could not be read; open the set-password link again."))
			return
		}
		token, password := r.PostForm.Get("token"), r.PostForm.Get("password")
		u, err := s.passwordLinkPerson(r.Context(), token)
		if err != nil {
			s.setPasswordFailed(w, r, err)
			return
		}
		if r.PostForm.Get("step") == "open" {
			s.renderPage(w, http.StatusOK, "set_password.html", &pageData{Token: token, User: u})
			return
		}
		if password != r.PostForm.Get("confirm") {
			s.renderPage(w, errPasswordsDiffer.Status, "set_password.html", &pageData{Token: token, User: u, Error: errPasswordsDiffer.Message})
			return
		}
		set, err := s.redeemPasswordLink(r, token, password)
		var ae *apiError
		if errors.As(err, &ae) && (ae.Code == "invalid_password" || ae.Code == "password_too_common") {
			// The rules refused the password: the link is untouched, and the form is shown again.
			s.renderPage(w, ae.Status, "set_password.html", &pageData{Token: token, User: u, Error: ae.Message})
			return
		}
		if err != nil {
			s.setPasswordFailed(w, r, err)
			return
		}
		s.renderPage(w, http.StatusOK, "set_password.html", &pageData{User: set, Done: true})
	})
}

// passwordLinkPerson returns the person of a live link with token, refusing with password
// sign-in off, as the JSON endpoints do, and a token of the wrong shape without asking.
func (s *server) passwordLinkPerson(ctx context.Context, token string) (store.User, error) {
	if !s.opts.PasswordLogin {
		return store.User{}, errPasswordLoginOff
	}
	if !isSecret(token) {
		return store.User{}, errPasswordLinkInvalid
	}
	return s.store.PasswordLinkPerson(ctx, token)
}

// setPasswordFailed answers a set-password page that cannot show its form: the reason, on the
// page, and in the log when it is the server's failure.
func (s *server) setPasswordFailed(w http.ResponseWriter, r *http.Request, err error) {
	e := s.classify(err)
	s.logFailure(r, e, err)
	setRetryAfter(w, e.RetryAfter)
	s.renderPage(w, e.Status, "set_password.html", &pageData{Error: e.Message})
}
