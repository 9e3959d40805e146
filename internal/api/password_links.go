package api

import (
	"net/http"
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
// as a hash.
type passwordLinkJSON struct {
	UserID    int64     `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
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
		writeJSON(w, http.StatusCreated, passwordLinkJSON{UserID: l.UserID, Token: l.Token, ExpiresAt: l.ExpiresAt})
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
		if !isSecret(req.Token) {
			s.writeError(w, r, errPasswordLinkInvalid)
			return
		}
		if err := validatePassword(req.Password); err != nil {
			s.writeError(w, r, err)
			return
		}
		// A dead token is refused before bcrypt runs: anyone can send one.
		if err := s.store.PasswordLinkLive(r.Context(), req.Token); err != nil {
			s.writeError(w, r, err)
			return
		}
		hash, err := s.hashPassword(r.Context(), req.Password)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		u, err := s.store.RedeemPasswordLink(r.Context(), req.Token, hash)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "user.password_set", ActorKind: store.ActorKindUser, ActorID: u.ID,
			ActorName: u.Username, TargetID: u.ID, TargetName: u.Username, Detail: "by set-password link"})
		w.WriteHeader(http.StatusNoContent)
	})
}
