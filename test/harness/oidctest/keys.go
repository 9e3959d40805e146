package oidctest

import (
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// handleDiscovery serves the OpenID Provider Configuration document.
func (p *Provider) handleDiscovery(w http.ResponseWriter, _ *http.Request) {
	base := p.URL()
	doc := map[string]any{
		"issuer":                                p.Issuer(),
		"authorization_endpoint":                base + "/authorize",
		"token_endpoint":                        base + "/token",
		"jwks_uri":                              base + "/jwks",
		"userinfo_endpoint":                     base + "/userinfo",
		"response_types_supported":              []string{"code"},
		"response_modes_supported":              []string{"query"},
		"grant_types_supported":                 []string{"authorization_code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.RS256)},
		"code_challenge_methods_supported":      []string{"S256"},
		"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post"},
		"scopes_supported":                      []string{"openid", "email", "profile", "groups"},
		"claims_supported": []string{
			"iss", "sub", "aud", "exp", "iat", "auth_time", "nonce", "at_hash",
			"email", "email_verified", "preferred_username", "name", p.currentGroupsClaim(),
		},
	}
	p.mu.Lock()
	switch {
	case p.userInfoURL == nil:
	case *p.userInfoURL == "":
		delete(doc, "userinfo_endpoint")
	default:
		doc["userinfo_endpoint"] = *p.userInfoURL
	}
	for field, u := range p.endpoints {
		doc[field] = u
	}
	p.mu.Unlock()
	writeJSON(w, http.StatusOK, doc)
}

// handleJWKS serves the public half of the signing key.
func (p *Provider) handleJWKS(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{
		Key:       &p.key.PublicKey,
		KeyID:     p.keyID,
		Algorithm: string(jose.RS256),
		Use:       "sig",
	}}})
}

// currentGroupsClaim returns the configured name of the groups claim.
func (p *Provider) currentGroupsClaim() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.groupsClaim
}

// signJWT serializes claims as a compact RS256 JWT signed by key with header kid.
func signJWT(key *rsa.PrivateKey, kid string, claims map[string]any) (string, error) {
	signer, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"),
	)
	if err != nil {
		return "", err
	}
	return jwt.Signed(signer).Claims(claims).Serialize()
}

// accessTokenHash computes the at_hash claim for an RS256 ID token.
func accessTokenHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return base64.RawURLEncoding.EncodeToString(sum[:len(sum)/2])
}

// s256 computes the PKCE S256 code challenge of verifier.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// writeJSON writes v as a JSON response that must not be cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
