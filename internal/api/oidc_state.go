package api

import (
	"cmp"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A sign-in's state is bound to the browser that started it (against login CSRF) by a cookie
// of its own, named after a short hash of the state, so that several sign-ins can be in flight
// in one browser (two tabs, a retry) without a second start undoing the first. With an https
// public URL the names carry the __Host- prefix: a browser then accepts such a cookie only from
// this host over https, with Path=/ and no Domain, so a sibling subdomain cannot plant its own
// state (and have the victim finish the attacker's sign-in); cookies without the prefix are
// not read at all. Over plain http (a loopback public URL, for trying the server out) the
// prefix cannot be used, since it needs Secure.
const (
	stateCookie = "terdut_oidc_state"
	// maxStateCookies bounds the sign-ins in flight in one browser: a start past it ends the
	// oldest, so that the cookies (which every request carries) stay a few hundred bytes.
	maxStateCookies = 5
)

// stateCookiePrefix is what the names of this server's state cookies start with.
func (s *server) stateCookiePrefix() string {
	if s.secureCookies() {
		return "__Host-" + stateCookie + "-"
	}
	return stateCookie + "-"
}

func (s *server) secureCookies() bool { return s.opts.PublicURL.Scheme == "https" }

// stateCookieName is the name of the cookie of the sign-in with this state.
func (s *server) stateCookieName(state string) string {
	sum := sha256.Sum256([]byte(state))
	return s.stateCookiePrefix() + hex.EncodeToString(sum[:6])
}

func (s *server) newStateCookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secureCookies()}
}

// setStateCookie binds state to this browser. The value is the start time (base 36 milliseconds)
// and the state; a start that finds maxStateCookies already in the request ends the oldest.
func (s *server) setStateCookie(w http.ResponseWriter, r *http.Request, state string) {
	type held struct {
		name string
		at   int64
	}
	var cookies []held
	prefix := s.stateCookiePrefix()
	for _, c := range r.Cookies() {
		if strings.HasPrefix(c.Name, prefix) {
			at, _, _ := parseStateCookie(c.Value)
			cookies = append(cookies, held{c.Name, at})
		}
	}
	if len(cookies) >= maxStateCookies {
		slices.SortFunc(cookies, func(a, b held) int { return cmp.Compare(a.at, b.at) })
		for _, c := range cookies[:len(cookies)-maxStateCookies+1] {
			http.SetCookie(w, s.newStateCookie(c.name, "", -1))
		}
	}
	value := strconv.FormatInt(time.Now().UnixMilli(), 36) + "." + state
	http.SetCookie(w, s.newStateCookie(s.stateCookieName(state), value, int(oidcLoginTTL.Seconds())))
}

// stateCookieMatches reports whether the request carries the cookie of the sign-in with state.
func (s *server) stateCookieMatches(r *http.Request, state string) bool {
	c, err := r.Cookie(s.stateCookieName(state))
	if err != nil {
		return false
	}
	_, got, ok := parseStateCookie(c.Value)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(state)) == 1
}

// clearStateCookie ends the browser's cookie of the sign-in with state.
func (s *server) clearStateCookie(w http.ResponseWriter, state string) {
	http.SetCookie(w, s.newStateCookie(s.stateCookieName(state), "", -1))
}

// parseStateCookie splits a state cookie's value into its start time and state.
func parseStateCookie(v string) (at int64, state string, ok bool) {
	t, state, ok := strings.Cut(v, ".")
	if !ok {
		return 0, "", false
	}
	at, err := strconv.ParseInt(t, 36, 64)
	return at, state, err == nil
}
