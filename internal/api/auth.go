package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/terdut-server/terdut-server/internal/store"
)

// sessionCookie names the cookie that carries a browser's session token. With an https public
// URL it is prefixed __Host- (see server.cookieName): browsers then take it only from this very
// host over https, with Path=/ and no Domain, so no other site or subdomain can plant one.
const sessionCookie = "terdut_session"

// principal is who is calling and how they proved it.
type principal struct {
	User         store.User
	SessionToken string // set when authenticated by cookie
	APIKey       string // set when authenticated by an API key: its secret
}

// principalFrom returns the request's principal: the zero principal before requireUser
// has set one.
func principalFrom(ctx context.Context) principal {
	if c, ok := ctx.Value(requestKey{}).(*requestContext); ok {
		return c.p
	}
	return principal{}
}

// bearerToken returns the token of an "Authorization: Bearer" header, and whether one was sent.
func bearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true
	}
	return strings.TrimSpace(token), true
}

// isSecret reports whether s has the form of an API key or session token: 64 lowercase hex
// characters. Anything else is refused without a database round trip.
func isSecret(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// requireUser lets a request through only with a live API key or session. Requests
// authenticated by cookie that change state must come from this site's own pages.
func (s *server) requireUser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authenticate(r)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if p.SessionToken != "" {
			if err := s.crossOrigin.Check(r); err != nil {
				s.writeError(w, r, &apiError{Status: http.StatusForbidden, Code: "cross_origin",
					Message: "Cross-site requests may not change anything here."})
				return
			}
		}
		withPrincipal(r, p)
		next.ServeHTTP(w, r)
	})
}

func (s *server) authenticate(r *http.Request) (principal, error) {
	if token, sent := bearerToken(r); sent {
		if !isSecret(token) {
			return principal{}, errUnauthorized
		}
		u, err := s.store.AuthenticateAPIKey(r.Context(), token)
		if errors.Is(err, store.ErrNotFound) {
			return principal{}, errUnauthorized
		}
		return principal{User: u, APIKey: token}, err
	}
	c, err := r.Cookie(s.cookieName)
	if err != nil || !isSecret(c.Value) {
		return principal{}, errUnauthorized
	}
	u, err := s.store.AuthenticateSession(r.Context(), c.Value)
	if errors.Is(err, store.ErrNotFound) {
		return principal{}, errUnauthorized
	}
	return principal{User: u, SessionToken: c.Value}, err
}

// requireAdmin lets only admins through; it runs after requireUser.
func (s *server) requireAdmin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if principalFrom(r.Context()).User.Role != store.RoleAdmin {
			s.writeError(w, r, errForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
