package api

import (
	"context"
	"errors"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/sso"
	"github.com/terdut-server/terdut-server/internal/store"
)

// apiError is an error meant for the client: a status, a stable code and a sentence for a person.
type apiError struct {
	Status     int
	Code       string
	Message    string
	RetryAfter time.Duration
	// SignInURL, when set, is where the client sends the person to sign in as the refusal
	// asks (the answer's sign_in_url).
	SignInURL string
	logged    bool // its handler logs it, at a bounded rate: writeError does not
}

func (e *apiError) Error() string { return e.Message }

func errBadRequest(code, msg string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Code: code, Message: msg}
}

var (
	errUnauthorized = &apiError{Status: http.StatusUnauthorized, Code: "unauthorized",
		Message: "Authentication is required: send a valid API key as a Bearer token, or sign in."}
	errForbidden = &apiError{Status: http.StatusForbidden, Code: "forbidden",
		Message: "You may not do this: only admins manage other users."}
	errBootstrapPending = &apiError{Status: http.StatusServiceUnavailable, Code: "bootstrap_pending",
		Message: "terdut-server is still being set up by its operator; try again shortly.", RetryAfter: 10 * time.Second}
	// errCanceled answers a request whose client hung up before its answer was ready: nobody
	// reads it, but the metrics and the access log count it as 499, not as the server's failure.
	errCanceled = &apiError{Status: statusClientClosed, Code: "canceled", Message: "The request was canceled."}
)

// openClaim reports whether the claim is open: no operator token and no operator issuer is
// configured, so no operator will claim the install and whoever runs the server must.
func (s *server) openClaim() bool {
	return !s.opts.OperatorTokens.Configured() && s.opts.OperatorIdentity == nil
}

// claimCommand is the curl line that takes the open claim from the server's own machine:
// at the public URL when it is this machine's (as under make run), else at the port the
// server listens on there, which only its administrator knows.
func (s *server) claimCommand() string {
	if u := s.opts.PublicURL; u != nil && !s.split && isLoopbackHost(u.Hostname()) {
		return "curl -X POST " + u.JoinPath("/api/bootstrap").String()
	}
	port := "--listen"
	if s.split {
		port = "--operator-listen"
	}
	return "curl -X POST http://127.0.0.1:<the port of " + port + ">/api/bootstrap"
}

// isLoopbackHost reports whether host (a URL's, without port or brackets) is this machine.
func isLoopbackHost(host string) bool {
	if strings.EqualFold(strings.TrimSuffix(host, "."), "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// pendingError is the gate's refusal. Where an operator is configured it says to wait for
// it; on an open claim (no operator, as under make run) waiting never helps, so it says how
// to claim the install. The code is bootstrap_pending either way.
func (s *server) pendingError() *apiError {
	if !s.openClaim() {
		return errBootstrapPending
	}
	e := *errBootstrapPending
	e.Message = "terdut-server is not claimed yet, so nobody can sign in, and no operator is configured to claim it. " +
		"Claim it on the server's machine: run `terdut-server bootstrap claim` with the server's database settings, " +
		"or `" + s.claimCommand() + "`, and keep the API key it returns."
	return &e
}

// statusClientClosed is the status of a request its client canceled, as nginx logs it.
const statusClientClosed = 499

type errorBody struct {
	Error     string `json:"error"`
	Code      string `json:"code"`
	SignInURL string `json:"sign_in_url,omitempty"`
}

// writeError is the one place an error becomes a response. Client errors say what is wrong;
// server errors are logged with their cause and tell the client only "internal error".
func (s *server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.classify(err)
	s.logFailure(r, e, err)
	setRetryAfter(w, e.RetryAfter)
	if e.Status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="terdut-server"`)
	}
	writeJSON(w, e.Status, errorBody{Error: e.Message, Code: e.Code, SignInURL: e.SignInURL})
}

// failure reports whether e is the server's failure, worth an ERROR in the log, rather than
// a refusal it means to give however often it is asked: the gate, and the back-pressure of
// the password checks (counted in the metrics; checkPassword logs it once a second).
func (e *apiError) failure() bool {
	return e.Status >= 500 && e.Code != "bootstrap_pending" && e.Code != "overloaded" && !e.logged
}

// logFailure logs an error answer that is worth a line: the server's failures at ERROR with
// their cause, and a request canceled by its client at INFO.
func (s *server) logFailure(r *http.Request, e *apiError, err error) {
	switch {
	case e.Status == statusClientClosed:
		s.log.InfoContext(r.Context(), "request canceled by its client", "method", logcap.String(r.Method),
			"path", logcap.String(r.URL.Path), "request_id", requestID(r.Context()), "err", err)
	case e.failure():
		s.log.ErrorContext(r.Context(), "request failed", "method", logcap.String(r.Method), "path", logcap.String(r.URL.Path),
			"status", e.Status, "request_id", requestID(r.Context()), "err", err)
	}
}

// setRetryAfter tells the client when to try again, in whole seconds rounded up; nothing for 0.
func setRetryAfter(w http.ResponseWriter, d time.Duration) {
	if d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	}
}

func (s *server) classify(err error) *apiError {
	var ae *apiError
	var se *sso.Error
	var rl *store.RateLimitedError
	var held *store.DatesHeldError
	switch {
	case errors.Is(err, context.Canceled):
		return errCanceled
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &se):
		return ssoError(se)
	case errors.Is(err, store.ErrTooManyAPIKeys):
		return errTooManyAPIKeys(s.opts.APIKeysPerUser)
	case errors.Is(err, store.ErrExpiryTooLate):
		return errExpiryTooLate(s.opts.SSOAPIKeyMaxTTL)
	case errors.Is(err, store.ErrSSOSignInTooOld):
		return errSSOSignInTooOld(s.opts.SSOAPIKeyMaxTTL)
	case errors.Is(err, store.ErrServiceUserKey):
		return errKeysOnlyFromClaim
	case errors.Is(err, store.ErrCallerRevoked):
		return errUnauthorized
	case errors.Is(err, store.ErrSignInTooOld):
		return errRecentSignIn(s.opts.SSOKeySignInWindow)
	case errors.Is(err, store.ErrPasswordLinkInvalid):
		return errPasswordLinkInvalid
	case errors.Is(err, store.ErrAdminsOwnPassword):
		return errAdminsOwnPassword
	case errors.Is(err, store.ErrPasswordChanged):
		// Their current password stopped being current while the change was made (checked
		// once more: recheckPassword): the answer a change made after that one gets.
		return errWrongCurrentPassword
	case errors.Is(err, store.ErrNoPassword):
		return &apiError{Status: http.StatusForbidden, Code: "no_password",
			Message: "Machine users and people who sign in with single sign-on have no password."}
	case errors.As(err, &rl):
		return &apiError{Status: http.StatusTooManyRequests, Code: "rate_limited",
			Message: "Too many requests of this kind; try again later.", RetryAfter: rl.RetryAfter}
	case errors.Is(err, store.ErrIncidentResolved):
		return &apiError{Status: http.StatusConflict, Code: "incident_resolved", Message: "incident is resolved"}
	case errors.Is(err, store.ErrIncidentOpen):
		return &apiError{Status: http.StatusConflict, Code: "incident_open", Message: "Only a resolved incident can be archived."}
	case errors.Is(err, store.ErrUnknownUser):
		return errBadRequest("unknown_user", "No such user.")
	case errors.Is(err, store.ErrNotANote):
		return &apiError{Status: http.StatusConflict, Code: "not_a_note", Message: "Only notes can be deleted: the rest of the timeline is a record of what happened."}
	case errors.Is(err, store.ErrNotAuthor):
		return &apiError{Status: http.StatusForbidden, Code: "not_author", Message: "Only its author can delete a note."}
	case errors.As(err, &held):
		return &apiError{Status: http.StatusConflict, Code: "dates_held",
			Message: "Already on call: " + held.Days() + `. Nothing was assigned; an admin may take these days over with "replace": true.`}
	case errors.Is(err, store.ErrNotYourDay):
		return &apiError{Status: http.StatusForbidden, Code: "not_your_day",
			Message: "That day is another person's: a member adds and removes only their own days, and only an admin takes over another person's."}
	case errors.Is(err, store.ErrTooManyIntegrationKeys):
		return &apiError{Status: http.StatusConflict, Code: "too_many_keys",
			Message: "An integration holds two live keys at most: revoke the old one first."}
	case errors.Is(err, store.ErrNotFound):
		return &apiError{Status: http.StatusNotFound, Code: "not_found", Message: "No such resource."}
	case errors.Is(err, store.ErrConflict):
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: "That name is already taken."}
	case errors.Is(err, store.ErrProtectedUser):
		return &apiError{Status: http.StatusForbidden, Code: "protected_user",
			Message: "The bootstrap principal cannot be deleted; reset the bootstrap claim instead."}
	case errors.Is(err, store.ErrBootstrapPending):
		return s.pendingError()
	case errors.Is(err, store.ErrAlreadyClaimed):
		return &apiError{Status: http.StatusForbidden, Code: "bootstrap_already_completed",
			Message: "This install has already been claimed. Its operator can reopen the claim with POST /api/bootstrap/reset."}
	case errors.Is(err, store.ErrUnavailable):
		return &apiError{Status: http.StatusServiceUnavailable, Code: "unavailable",
			Message: "The database is unavailable; try again shortly.", RetryAfter: 5 * time.Second}
	}
	return &apiError{Status: http.StatusInternalServerError, Code: "internal", Message: "internal error"}
}
