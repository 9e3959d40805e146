package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/terdut-server/terdut-server/internal/sso"
	"github.com/terdut-server/terdut-server/internal/store"
)

// OIDCOptions configures single sign-on (see sso.Options). An empty Issuer turns it off.
type OIDCOptions = sso.Options

// stepUpPath starts a step-up sign-in: one that asks the provider to authenticate the person
// again (max_age=0 and prompt=login), so that the session it makes may create API keys.
const stepUpPath = "/auth/oidc/login?reauth=1"

var (
	errSSONotConfigured = &apiError{Status: http.StatusNotFound, Code: "sso_not_configured",
		Message: "Single sign-on is not configured on this server."}
	errInvalidState = errBadRequest("invalid_state",
		"This sign-in link is invalid, expired or already used, or was started in another browser; start again.")
)

func (s *server) handleOIDCLogin() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.allowAddress(r, "oidc"); err != nil {
			s.fail(w, r, err)
			return
		}
		if s.oidc == nil {
			s.fail(w, r, errSSONotConfigured)
			return
		}
		// A sign-in is recorded only once the provider is known, so starts while it is down
		// take no place among those in progress. The gate still answers first: while pending,
		// nobody needs to hear about the provider.
		q := r.URL.Query()
		begun, err := s.oidc.Begin(r.Context(), q.Get("reauth") == "1", q.Get("login_hint"))
		if err != nil {
			if s.opts.Gate {
				if b, berr := s.store.Bootstrap(r.Context()); berr == nil && b.State != store.StateComplete {
					s.refusePending(w, r, "oidc")
					return
				}
			}
			s.fail(w, r, err)
			return
		}
		evicted, err := s.store.SaveOIDCLogin(r.Context(), begun.State, begun.Login, sso.LoginTTL, store.Gate(s.opts.Gate), s.opts.OIDCPendingLimit)
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if evicted > 0 {
			s.log.WarnContext(r.Context(), "single sign-ons in progress reached --oidc-pending-limit: the oldest were ended",
				"evicted", evicted, "oidc_pending_limit", s.opts.OIDCPendingLimit)
		}
		s.stateCookies().Set(w, r, begun.State)
		http.Redirect(w, r, begun.URL, http.StatusFound)
	})
}

func (s *server) handleOIDCCallback() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.oidc == nil {
			s.fail(w, r, errSSONotConfigured)
			return
		}
		id, err := s.finishOIDC(w, r)
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			if derr := s.disarmRefused(r, err); derr != nil {
				s.fail(w, r, derr)
				return
			}
			s.metrics.signinRefused.WithLabelValues("oidc", s.classify(err).Code).Inc()
			s.refusedEvent(r, "login.sso.refused", s.classify(err).Code)
			s.fail(w, r, err)
			return
		}
		si, err := s.store.SignInSSO(r.Context(), id, s.opts.SessionTTL, store.Gate(s.opts.Gate))
		if errors.Is(err, store.ErrBootstrapPending) {
			s.refusePending(w, r, "oidc")
			return
		}
		if err != nil {
			s.fail(w, r, err)
			return
		}
		u, sess := si.User, si.Session
		s.ssoEvents(r, id.Issuer, si)
		if !si.Created {
			s.oidc.FollowUsername(r.Context(), u, id)
		}
		s.setSessionCookie(w, sess)
		s.metrics.signins.WithLabelValues("oidc").Inc()
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})
}

// finishOIDC checks the callback against the sign-in it finishes and returns the verified
// identity (see sso.Client.Finish). It creates nothing. While the gate is closed it returns
// store.ErrBootstrapPending, whatever the callback holds: the gate is read in the same round
// trip that consumes the sign-in, which happens only when the state matches this browser's
// cookie.
func (s *server) finishOIDC(w http.ResponseWriter, r *http.Request) (store.SSOIdentity, error) {
	state := r.URL.Query().Get("state")
	cookies := s.stateCookies()
	matches := state != "" && len(state) <= 128 && cookies.Matches(r, state)
	if !matches {
		state = "" // no sign-in has this state: the lookup below only reads the gate
	}
	login, err := s.store.TakeOIDCLogin(r.Context(), state, store.Gate(s.opts.Gate))
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return store.SSOIdentity{}, err
	}
	if matches {
		cookies.Clear(w, state)
	}
	if !matches || err != nil {
		return store.SSOIdentity{}, errInvalidState
	}
	return s.oidc.Finish(r.Context(), login, r.URL.Query())
}

// stateCookies binds sign-ins to browsers, with Secure cookies when the public URL is https.
func (s *server) stateCookies() sso.StateCookies {
	return sso.StateCookies{Secure: s.opts.PublicURL.Scheme == "https"}
}

// disarmRefused acts on a refused sign-in (see sso.Client.Deprovision) and records what it
// revoked, in the log and in audit_events. It returns an error only when that failed. A client
// that goes away must not stop the revocation half-way: it runs to the end regardless.
func (s *server) disarmRefused(r *http.Request, refusal error) error {
	ctx := context.WithoutCancel(r.Context())
	d, issuer, err := s.oidc.Deprovision(ctx, refusal)
	if err != nil {
		return err
	}
	if d.WasAdmin || d.RevokedAPIKeys > 0 || d.RevokedSessions > 0 {
		s.log.WarnContext(ctx, "single sign-on refused this person for their groups: revoked their sessions and API keys",
			"event", "user.deprovisioned", "user_id", d.UserID, "was_admin", d.WasAdmin, "revoked_api_keys", d.RevokedAPIKeys,
			"revoked_sessions", d.RevokedSessions, "request_id", requestID(ctx))
		s.audit(r, store.Event{Event: "user.deprovisioned", ActorKind: store.ActorKindProvider, ActorName: issuer,
			TargetID: d.UserID, Detail: fmt.Sprintf("was admin: %v; revoked %d API keys, %d sessions",
				d.WasAdmin, d.RevokedAPIKeys, d.RevokedSessions)})
	}
	return nil
}

// ssoStatus is the status of each kind of single sign-on error.
var ssoStatus = map[sso.Kind]int{
	sso.Invalid:         http.StatusBadRequest,
	sso.Unauthenticated: http.StatusUnauthorized,
	sso.Forbidden:       http.StatusForbidden,
	sso.Misconfigured:   http.StatusInternalServerError,
	sso.ProviderFailed:  http.StatusBadGateway,
	sso.Unavailable:     http.StatusServiceUnavailable,
}

// ssoError is e as the API answers it.
func ssoError(e *sso.Error) *apiError {
	status, ok := ssoStatus[e.Kind]
	if !ok {
		status = http.StatusInternalServerError
	}
	return &apiError{Status: status, Code: e.Code, Message: e.Message, RetryAfter: e.RetryAfter, logged: e.Logged}
}
