package oidctest

import (
	"net/http"
	"strings"
	"time"
)

// accessGrant is what an access token was issued for.
type accessGrant struct {
	user    User
	expires time.Time
}

// handleUserInfo answers who the bearer of an access token is (OpenID Connect
// Core, section 5.3): the person's claims as the token endpoint saw them.
func (p *Provider) handleUserInfo(w http.ResponseWriter, r *http.Request) {
	p.userInfoRequests.Add(1)
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	p.mu.Lock()
	g, known := p.accessTokens[token]
	groupsClaim, refuse := p.groupsClaim, p.refuseTokens
	p.mu.Unlock()
	if !ok || !known || time.Now().After(g.expires) || refuse {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "invalid_token"})
		return
	}
	status, override := p.takeUserInfoFaults()
	if status != 0 {
		writeJSON(w, status, map[string]string{"error": "server_error", "error_description": "injected fault"})
		return
	}
	claims := personClaims(g.user, groupsClaim)
	if override != nil {
		override(claims)
	}
	writeJSON(w, http.StatusOK, claims)
}

// SetUserInfoEndpoint makes the discovery document name u as the UserInfo endpoint from now
// on, instead of the provider's own: "" leaves the endpoint out of discovery, the address of
// a closed port makes it a UserInfo that is down.
func (p *Provider) SetUserInfoEndpoint(u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.userInfoURL = &u
}

// SetUserInfoRefusesTokens makes UserInfo answer 401 invalid_token to every access token
// from now on, as a provider does whose access tokens are issued for an API (a resource
// indicator) and so are not valid at its own UserInfo. Off again with false.
func (p *Provider) SetUserInfoRefusesTokens(on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuseTokens = on
}
