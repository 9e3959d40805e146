package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/terdut-server/terdut-server/internal/store"
)

// userJSON is a user as the API shows it.
type userJSON struct {
	ID        int64     `json:"id"`
	Username  string    `json:"username"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	Kind      string    `json:"kind"`
	SSO       bool      `json:"sso"`
	CreatedAt time.Time `json:"created_at"`
}

func toUserJSON(u store.User) userJSON {
	return userJSON{ID: u.ID, Username: u.Username, Email: u.Email, Role: string(u.Role),
		Kind: string(u.Kind), SSO: u.SSO(), CreatedAt: u.CreatedAt}
}

func (s *server) handleMe() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u := principalFrom(r.Context()).User
		writeMe(w, toUserJSON(u), u.HasPassword)
	})
}

// handleUserCreate answers the created user itself, not wrapped: existing clients decode it as a
// User. From a session it needs the step-up of key creation (stepUp): a stolen cookie would
// otherwise make an admin of its own.
func (s *server) handleUserCreate() http.Handler {
	type request struct {
		Username string `json:"username"`
		Email    string `json:"email"`
		Role     string `json:"role"`
		// CurrentPassword is the caller's own, which a password session must send: see stepUp.
		CurrentPassword string `json:"current_password"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := validateUsername(req.Username); err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := validateEmail(req.Email); err != nil {
			s.writeError(w, r, err)
			return
		}
		role := store.Role(req.Role)
		if role == "" {
			role = store.RoleMember
		}
		if role != store.RoleAdmin && role != store.RoleMember {
			s.writeError(w, r, errBadRequest("invalid_role", `The role must be "admin" or "member".`))
			return
		}
		by, err := s.stepUp(r, req.CurrentPassword)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		u, err := s.store.CreateUser(r.Context(), store.NewUser{Username: req.Username, Email: req.Email, Role: role, By: by})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "user.created", TargetID: u.ID, TargetName: u.Username, Detail: "role " + string(u.Role)})
		writeJSON(w, http.StatusCreated, toUserJSON(u))
	})
}

func (s *server) handleUserDelete() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		// Read first for the audit: once deleted, the id names nobody.
		target, err := s.store.User(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.store.DeleteUser(r.Context(), id); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "user.deleted", TargetID: id, TargetName: target.Username})
		w.WriteHeader(http.StatusNoContent)
	})
}

// pathID parses a positive integer URL parameter.
func pathID(r *http.Request, name string) (int64, error) {
	id, err := strconv.ParseInt(chi.URLParam(r, name), 10, 64)
	if err != nil || id <= 0 {
		return 0, errBadRequest("invalid_id", "The id in the path must be a positive whole number.")
	}
	return id, nil
}

// validateUsername admits 1 to 64 characters of ASCII letters, digits and . _ - @, starting
// with a letter or digit: no spaces, control characters or look-alike Unicode.
func validateUsername(name string) error {
	bad := errBadRequest("invalid_username",
		"A username is 1 to 64 characters: ASCII letters, digits and . _ - @, starting with a letter or digit.")
	if name == "" || len(name) > 64 || !isAlnum(name[0]) {
		return bad
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' && c != '@' {
			return bad
		}
	}
	// Any spelling of the principal's name is reserved: "Terdut-Operator-Bootstrap" would pass for it.
	if strings.EqualFold(name, store.PrincipalUsername) {
		return &apiError{Status: http.StatusConflict, Code: "conflict", Message: "That name is reserved."}
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

func validateEmail(email string) error {
	if len(email) > 254 || !utf8.ValidString(email) {
		return errBadRequest("invalid_email", "The e-mail address is too long or not valid text.")
	}
	for _, c := range email {
		if c < 0x20 || c == 0x7f {
			return errBadRequest("invalid_email", "The e-mail address holds control characters.")
		}
	}
	return nil
}
