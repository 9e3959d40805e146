package sso

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

// StateCookies binds sign-ins to the browsers that started them (see stateCookie).
type StateCookies struct {
	// Secure: the public URL is https, so the cookies are Secure and their names carry the
	// __Host- prefix.
	Secure bool
}

// prefix is what the names of this server's state cookies start with.
func (s StateCookies) prefix() string {
	if s.Secure {
		return "__Host-" + stateCookie + "-"
	}
	return stateCookie + "-"
}

// name is the name of the cookie of the sign-in with this state.
func (s StateCookies) name(state string) string {
	sum := sha256.Sum256([]byte(state))
	return s.prefix() + hex.EncodeToString(sum[:6])
}

func (s StateCookies) cookie(name, value string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: name, Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.Secure}
}

// Set binds state to this browser. The value is the start time (base 36 milliseconds)
// and the state; a start that finds maxStateCookies already in the request ends the oldest.
func (s StateCookies) Set(w http.ResponseWriter, r *http.Request, state string) {
	type held struct {
		name string
		at   int64
	}
	var cookies []held
	prefix := s.prefix()
	for _, c := range r.Cookies() {
		if strings.HasPrefix(c.Name, prefix) {
			at, _, _ := parseStateCookie(c.Value)
			cookies = append(cookies, held{c.Name, at})
		}
	}
	if len(cookies) >= maxStateCookies {
		slices.SortFunc(cookies, func(a, b held) int { return cmp.Compare(a.at, b.at) })
		for _, c := range cookies[:len(cookies)-maxStateCookies+1] {
			http.SetCookie(w, s.cookie(c.name, "", -1))
		}
	}
	value := strconv.FormatInt(time.Now().UnixMilli(), 36) + "." + state
	http.SetCookie(w, s.cookie(s.name(state), value, int(LoginTTL.Seconds())))
}

// Matches reports whether the request carries the cookie of the sign-in with state.
func (s StateCookies) Matches(r *http.Request, state string) bool {
	c, err := r.Cookie(s.name(state))
	if err != nil {
		return false
	}
	_, got, ok := parseStateCookie(c.Value)
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(state)) == 1
}

// Clear ends the browser's cookie of the sign-in with state.
func (s StateCookies) Clear(w http.ResponseWriter, state string) {
	http.SetCookie(w, s.cookie(s.name(state), "", -1))
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
