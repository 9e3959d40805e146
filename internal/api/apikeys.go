package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/store"
)

// apiKeyJSON is a key as the API shows it. Key, the secret, is set only in the response
// that created it.
type apiKeyJSON struct {
	ID         int64      `json:"id"`
	UserID     int64      `json:"user_id"`
	Name       string     `json:"name"`
	Key        string     `json:"key,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at"`
	ExpiresAt  *time.Time `json:"expires_at"` // null: never
}

func toAPIKeyJSON(k store.APIKey, secret string) apiKeyJSON {
	return apiKeyJSON{ID: k.ID, UserID: k.UserID, Name: k.Name, Key: secret, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, ExpiresAt: k.ExpiresAt}
}

// requireSelfOrAdmin lets through the user named by {id} in the path, and admins.
func (s *server) requireSelfOrAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, err := pathID(r, "id")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		u := principalFrom(r.Context()).User
		if u.ID != id && u.Role != store.RoleAdmin {
			s.writeError(w, r, errForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

var errServiceUser = &apiError{Status: http.StatusForbidden, Code: "service_user",
	Message: "A machine user's keys are managed only by itself or through the bootstrap claim."}

// refuseOthersServiceUsers keeps people, admins included, away from a machine user's keys:
// the bootstrap principal acts only through the keys its claims issue, and only a reset
// revokes them. Acting on another user, it answers 404 when that user does not exist.
func (s *server) refuseOthersServiceUsers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := pathID(r, "id")
		if principalFrom(r.Context()).User.ID != id {
			target, err := s.store.User(r.Context(), id)
			if err != nil {
				s.writeError(w, r, err)
				return
			}
			if target.Kind == store.KindService {
				s.writeError(w, r, errServiceUser)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *server) handleAPIKeyCreate() http.Handler {
	type request struct {
		Name      string  `json:"name"`
		ExpiresAt *string `json:"expires_at"` // RFC 3339; absent or null: never, or the SSO cap
		// CurrentPassword is the caller's own password, which a password session must send.
		CurrentPassword string `json:"current_password"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := pathID(r, "id")
		req, err := decodeJSON[request](w, r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		name, err := checkName(req.Name, "A key's name")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		expires, err := parseExpiresAt(req.ExpiresAt)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		by, err := s.stepUp(r, req.CurrentPassword)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		k, secret, err := s.store.IssueAPIKey(r.Context(), store.NewAPIKey{UserID: id, Name: name, ExpiresAt: expires, By: by},
			store.APIKeyLimits{PerUser: s.opts.APIKeysPerUser, SSOMaxTTL: s.opts.SSOAPIKeyMaxTTL})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "api_key.created", TargetID: id, Detail: keyDetail(k)})
		w.Header().Set("Cache-Control", "no-store")
		writeJSON(w, http.StatusCreated, toAPIKeyJSON(k, secret))
	})
}

// stepUp is the request's principal as the store re-checks it when it acts. Every session
// action that creates a credential or gives power (an API key, a person, a set-password link)
// outlives the session, so a session must show its person is at the keyboard, not just their
// cookie: a password session with the current password (checked like a sign-in, on the same
// count and in the same check slots), a single sign-on session by a recent authentication at
// the provider (the store checks the time its ID token said, in the transaction that acts).
// An API key acts as before.
func (s *server) stepUp(r *http.Request, currentPassword string) (store.Caller, error) {
	p := principalFrom(r.Context())
	by := store.Caller{UserID: p.User.ID, APIKey: p.APIKey, Session: p.SessionToken}
	switch {
	case p.SessionToken == "":
	case p.User.SSO():
		by.SignedInWithin = s.opts.SSOKeySignInWindow
	case currentPassword == "":
		return store.Caller{}, errCurrentPasswordRequired
	default:
		if _, err := s.checkCurrentPassword(r, p.User, currentPassword, errWrongCurrentPasswordForKey); err != nil {
			return store.Caller{}, err
		}
	}
	return by, nil
}

// handleAPIKeyList answers a bare JSON array of keys, without their secrets.
func (s *server) handleAPIKeyList() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The user exists: it is the caller, or refuseOthersServiceUsers has looked it up.
		id, _ := pathID(r, "id")
		keys, err := s.store.APIKeys(r.Context(), id)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		resp := make([]apiKeyJSON, 0, len(keys))
		for _, k := range keys {
			resp = append(resp, toAPIKeyJSON(k, ""))
		}
		writeJSON(w, http.StatusOK, resp)
	})
}

func (s *server) handleAPIKeyDelete() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, _ := pathID(r, "id")
		keyID, err := pathID(r, "keyID")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if err := s.store.RevokeAPIKey(r.Context(), id, keyID); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.audit(r, store.Event{Event: "api_key.revoked", TargetID: id, Detail: "key " + strconv.FormatInt(keyID, 10)})
		w.WriteHeader(http.StatusNoContent)
	})
}

// keyDetail describes a new key for the audit: its id, name and expiry, never its secret.
func keyDetail(k store.APIKey) string {
	d := "key " + strconv.FormatInt(k.ID, 10) + " " + strconv.Quote(logcap.String(k.Name))
	if k.ExpiresAt != nil {
		d += ", expires " + k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return d
}

// checkName trims a name a person gives to something (a key, an integration) and admits 1 to
// 100 bytes without control characters; what names it in the error.
func checkName(raw, what string) (string, error) {
	name := strings.TrimSpace(raw)
	if name == "" || len(name) > 100 || strings.IndexFunc(name, unicode.IsControl) >= 0 {
		return "", errBadRequest("invalid_name", what+" is 1 to 100 characters, without control characters.")
	}
	return name, nil
}
