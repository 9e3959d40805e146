package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/terdut-server/terdut-server/internal/store"
)

var errBadCredentials = &apiError{Status: http.StatusUnauthorized, Code: "invalid_credentials",
	Message: "Wrong username or password."}

type loginRequest struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

// handleLogin signs a person in with a password. JSON clients get the user and a cookie;
// the /login page's form gets a redirect to / (or the page again, with the error).
func (s *server) handleLogin() http.Handler {
	type response struct {
		User userJSON `json:"user"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		form := isFormPost(r)
		fail := func(err error) {
			if form {
				e := s.classify(err)
				s.logFailure(r, e, err)
				setRetryAfter(w, e.RetryAfter)
				s.renderLogin(w, r, e)
				return
			}
			s.writeError(w, r, err)
		}
		if err := s.crossOrigin.Check(r); err != nil {
			fail(&apiError{Status: http.StatusForbidden, Code: "cross_origin", Message: "Sign in from this site's own page."})
			return
		}
		if !s.opts.PasswordLogin {
			fail(&apiError{Status: http.StatusForbidden, Code: "password_login_disabled",
				Message: "Password sign-in is turned off on this server; use single sign-on."})
			return
		}
		if err := s.allowAddress(r, "password"); err != nil {
			fail(err)
			return
		}
		req, err := readLogin(w, r, form)
		if err != nil {
			fail(err)
			return
		}
		name := req.Username
		if !utf8.ValidString(name) || strings.ContainsRune(name, 0) {
			name = "" // the database cannot hold such a name (it would fail the query): nobody has it
		}
		u, hash, attempt, err := s.store.UserForSignIn(r.Context(), name, store.Gate(s.opts.Gate), s.opts.LoginLimit)
		var limited *store.RateLimitedError
		switch {
		case errors.Is(err, store.ErrBootstrapPending):
			s.refusePending(w, r, "password")
			return
		case errors.As(err, &limited):
			s.metrics.signinRefused.WithLabelValues("password", "rate_limited").Inc()
			s.event(r, "login.locked_out", outcomeRefused, s.nameTags.signInName(u, name))
			fail(err)
			return
		case err != nil && !errors.Is(err, store.ErrNotFound):
			fail(err)
			return
		}
		if u.Kind == store.KindService || u.SSO() {
			// Machine users never sign in interactively; SSO users only through their provider,
			// whose group rules a password would get around.
			hash = ""
		}
		ok, err := s.checkPassword(r.Context(), hash, req.Password)
		if err != nil {
			s.releaseUnchecked(r.Context(), attempt)
			s.metrics.signinRefused.WithLabelValues("password", "overloaded").Inc()
			fail(err)
			return
		}
		if !ok {
			// Counted before it is answered: a wrong password the database could not count (a
			// failover) answers 503 like a right one would, so it tells the caller nothing.
			if err := s.store.FailedAttempt(context.WithoutCancel(r.Context()), attempt); err != nil {
				fail(err)
				return
			}
			s.metrics.signinRefused.WithLabelValues("password", "invalid_credentials").Inc()
			s.event(r, "login.password.failed", outcomeFailed, s.nameTags.signInName(u, name))
			fail(errBadCredentials)
			return
		}
		// The check's outcome is written even if the client has gone meanwhile.
		ctx := context.WithoutCancel(r.Context())
		sess, err := s.store.CreatePasswordSession(ctx, u.ID, hash, attempt, s.opts.SessionTTL, store.Gate(s.opts.Gate))
		if errors.Is(err, store.ErrNotFound) {
			sess, hash, err = s.sessionAgainIfCurrent(ctx, u.ID, req.Password, attempt)
		}
		switch {
		case errors.Is(err, store.ErrBootstrapPending):
			// The install was reset meanwhile; the write gave the check back.
			s.refusePending(w, r, "password")
			return
		case errors.Is(err, store.ErrNotFound):
			// The password changed (or the user went) while it was being checked; the write
			// gave the check back, as the password was right when checked.
			s.metrics.signinRefused.WithLabelValues("password", "invalid_credentials").Inc()
			s.event(r, "login.password.failed", outcomeFailed, s.nameTags.signInName(u, name))
			fail(errBadCredentials)
			return
		case err != nil:
			// The password was right, so its check is no guess: give it back if the database
			// lets us; if not (a failover), its lease ends by itself.
			s.releaseUnchecked(r.Context(), attempt)
			if errors.Is(err, errOverloaded) { // the re-check found no bcrypt slot
				s.metrics.signinRefused.WithLabelValues("password", "overloaded").Inc()
			}
			fail(err)
			return
		}
		if s.passwords.NeedsRehash(hash) {
			s.rehash(r.Context(), u.ID, hash, req.Password)
		}
		s.setSessionCookie(w, sess)
		s.metrics.signins.WithLabelValues("password").Inc()
		s.eventBy(r, userActor(u), "login.password.succeeded", outcomeSucceeded, target(u))
		if form {
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		writeJSON(w, http.StatusOK, response{User: toUserJSON(u)})
	})
}

// releaseUnchecked gives back an attempt that was no guess (its password was never checked, or
// was right but no session could be written), even if the client has gone.
func (s *server) releaseUnchecked(ctx context.Context, a store.Attempt) {
	if err := s.store.ReleaseAttempt(context.WithoutCancel(ctx), a); err != nil {
		s.log.WarnContext(ctx, "release an unchecked sign-in attempt", "err", err)
	}
}

func isFormPost(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded")
}

func readLogin(w http.ResponseWriter, r *http.Request, form bool) (loginRequest, error) {
	if !form {
		return decodeJSON[loginRequest](w, r)
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			return loginRequest{}, decodeError(err)
		}
		return loginRequest{}, errBadRequest("invalid_form", "The form could not be read.")
	}
	return loginRequest{Username: r.PostForm.Get("username"), Password: r.PostForm.Get("password")}, nil
}

func (s *server) handleLogout() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.crossOrigin.Check(r); err != nil {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Code: "cross_origin",
				Message: "Cross-site requests may not change anything here."})
			return
		}
		if c, err := r.Cookie(s.cookieName); err == nil && isSecret(c.Value) {
			if err := s.store.EndSession(r.Context(), c.Value); err != nil {
				s.writeError(w, r, err)
				return
			}
		}
		http.SetCookie(w, s.cookie("", -1))
		if isFormPost(r) {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// setSessionCookie hands the browser its session; no cache may keep the answer that carries it.
func (s *server) setSessionCookie(w http.ResponseWriter, sess store.Session) {
	w.Header().Set("Cache-Control", "no-store")
	http.SetCookie(w, s.cookie(sess.Token, int(time.Until(sess.ExpiresAt).Seconds())))
}

func (s *server) cookie(value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: s.cookieName, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.opts.PublicURL.Scheme == "https"}
}
