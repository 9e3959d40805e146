package oidctest

import (
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"time"
)

// tokenLifetime is the lifetime of issued access and ID tokens.
const tokenLifetime = time.Hour

// tokenResponse is a successful token endpoint response.
type tokenResponse struct {
	AccessToken string `json:"access_token"`
	TokenType   string `json:"token_type"`
	ExpiresIn   int    `json:"expires_in"`
	IDToken     string `json:"id_token"`
}

// handleToken redeems an authorization code for an access token and ID token.
func (p *Provider) handleToken(w http.ResponseWriter, r *http.Request) {
	p.tokenRequests.Add(1)
	if to := p.takeTokenRedirect(); to != "" {
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
		return
	}
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return
	}
	if !p.authenticateClient(r) {
		w.Header().Set("WWW-Authenticate", `Basic realm="oidctest"`)
		tokenError(w, http.StatusUnauthorized, "invalid_client", "client authentication failed")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != "authorization_code" {
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type", "unsupported grant_type "+gt)
		return
	}
	g, err := p.redeem(r.PostForm)
	if err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_grant", err.Error())
		return
	}
	resp, err := p.issue(g)
	if err != nil {
		tokenError(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	p.tokensIssued.Add(1)
	writeJSON(w, http.StatusOK, resp)
}

// authenticateClient accepts client_secret_basic (RFC 6749 section 2.3.1,
// form-encoded credentials) and client_secret_post.
func (p *Provider) authenticateClient(r *http.Request) bool {
	id, secret, ok := r.BasicAuth()
	if ok {
		var errID, errSecret error
		id, errID = url.QueryUnescape(id)
		secret, errSecret = url.QueryUnescape(secret)
		if errID != nil || errSecret != nil {
			return false
		}
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	return id == p.ClientID && subtle.ConstantTimeCompare([]byte(secret), []byte(p.ClientSecret)) == 1
}

// redeem consumes the code in form, whatever the outcome, and checks it
// against the authorization request it was issued for.
func (p *Provider) redeem(form url.Values) (grant, error) {
	code := form.Get("code")
	p.mu.Lock()
	g, ok := p.grants[code]
	delete(p.grants, code)
	p.mu.Unlock()

	verifier := form.Get("code_verifier")
	switch {
	case !ok:
		return grant{}, errors.New("unknown or already used code")
	case time.Now().After(g.expires):
		return grant{}, errors.New("code expired")
	case form.Get("redirect_uri") != g.redirectURI:
		return grant{}, errors.New("redirect_uri does not match the authorization request")
	case verifier == "":
		return grant{}, errors.New("code_verifier is required")
	case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(g.challenge)) != 1:
		return grant{}, errors.New("code_verifier does not match code_challenge")
	}
	return g, nil
}

// issue mints the tokens for g, applying any armed token faults.
func (p *Provider) issue(g grant) (tokenResponse, error) {
	f, groupsClaim := p.takeTokenFaults()
	accessToken := rand.Text()
	now := time.Now()
	claims := map[string]any{
		"iss":       p.Issuer(),
		"sub":       g.user.Subject,
		"aud":       p.ClientID,
		"iat":       now.Unix(),
		"auth_time": now.Unix(),
		"exp":       now.Add(tokenLifetime).Unix(),
		"at_hash":   accessTokenHash(accessToken),
	}
	p.mu.Lock()
	userInfoOnly := p.userInfoOnly
	p.accessTokens[accessToken] = accessGrant{user: g.user, expires: now.Add(tokenLifetime)}
	p.mu.Unlock()
	if !userInfoOnly {
		maps.Copy(claims, personClaims(g.user, groupsClaim))
	}
	if g.nonce != "" {
		claims["nonce"] = g.nonce
	}
	if f.override != nil {
		f.override(claims)
	}

	key := p.key
	if f.foreignKey {
		var err error
		if key, err = p.foreignKey(); err != nil {
			return tokenResponse{}, err
		}
	}
	idToken, err := signJWT(key, p.keyID, claims)
	if err != nil {
		return tokenResponse{}, err
	}
	return tokenResponse{
		AccessToken: accessToken,
		TokenType:   "Bearer",
		ExpiresIn:   int(tokenLifetime / time.Second),
		IDToken:     idToken,
	}, nil
}

// tokenError writes an RFC 6749 section 5.2 error response.
func tokenError(w http.ResponseWriter, status int, code, description string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": description})
}

// personClaims are the claims about u that an ID token or a UserInfo answer
// carries: profile, e-mail, groups, then u.ExtraClaims (a nil one removes the claim).
func personClaims(u User, groupsClaim string) map[string]any {
	claims := map[string]any{
		"sub":                u.Subject,
		"email":              u.Email,
		"email_verified":     true,
		"preferred_username": u.PreferredUsername,
		"name":               u.Name,
		groupsClaim:          append([]string{}, u.Groups...),
	}
	for k, v := range u.ExtraClaims {
		if v == nil {
			delete(claims, k)
		} else {
			claims[k] = v
		}
	}
	return claims
}
