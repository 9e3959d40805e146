package oidctest

// faults holds the one-shot faults armed for upcoming requests.
type faults struct {
	authorizeError   *authorizeError
	tokenOverride    func(claims map[string]any)
	foreignKey       bool
	userInfoStatus   int
	userInfoOverride func(claims map[string]any)
	tokenRedirect    string
}

// authorizeError is an error response for the authorization endpoint.
type authorizeError struct {
	code, description string
}

// tokenFaults are the faults a single token response is issued with.
type tokenFaults struct {
	override   func(claims map[string]any)
	foreignKey bool
}

// NextAuthorizeError makes the next valid authorization request redirect back
// with error=code, error_description=description and the request's state
// instead of a code, as if the user had refused (use code "access_denied").
func (p *Provider) NextAuthorizeError(code, description string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.authorizeError = &authorizeError{code: code, description: description}
}

// NextTokenOverride makes the next successful token response call mutate on
// the ID token's claims just before signing. mutate may change or delete any
// claim (aud, exp, iss, nonce, ...); numeric dates are int64 Unix seconds.
// A later call replaces an override that has not been consumed yet.
func (p *Provider) NextTokenOverride(mutate func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.tokenOverride = mutate
}

// NextSignWithForeignKey makes the next successful token response sign its ID
// token with an RSA key that is not in the JWKS, under the published key ID,
// so that signature verification fails.
func (p *Provider) NextSignWithForeignKey() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.foreignKey = true
}

// takeAuthorizeError consumes the armed authorization error, if any.
func (p *Provider) takeAuthorizeError() (authorizeError, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e := p.faults.authorizeError
	p.faults.authorizeError = nil
	if e == nil {
		return authorizeError{}, false
	}
	return *e, true
}

// takeTokenFaults consumes the faults armed for the next token response and
// returns them with the current groups claim name.
func (p *Provider) takeTokenFaults() (tokenFaults, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := tokenFaults{override: p.faults.tokenOverride, foreignKey: p.faults.foreignKey}
	p.faults.tokenOverride = nil
	p.faults.foreignKey = false
	return f, p.groupsClaim
}

// NextUserInfoError makes the next UserInfo request that presents a valid
// access token fail with this HTTP status (use 500, or 401 for a token the
// provider no longer accepts).
func (p *Provider) NextUserInfoError(status int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.userInfoStatus = status
}

// NextUserInfoOverride makes the next successful UserInfo answer call mutate on
// its claims before sending them; mutate may change or delete any claim (sub,
// say, to answer about another person).
func (p *Provider) NextUserInfoOverride(mutate func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.userInfoOverride = mutate
}

// takeUserInfoFaults consumes the faults armed for the next UserInfo answer.
func (p *Provider) takeUserInfoFaults() (status int, override func(claims map[string]any)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	status, override = p.faults.userInfoStatus, p.faults.userInfoOverride
	p.faults.userInfoStatus, p.faults.userInfoOverride = 0, nil
	return status, override
}

// SetEndpoint makes the discovery document name u as field (token_endpoint, jwks_uri,
// userinfo_endpoint, authorization_endpoint), as a provider whose discovery names endpoints
// elsewhere than its issuer: behind a proxy that drops the scheme, or moved. The provider
// still serves its own endpoints; whatever is at u answers requests sent there.
func (p *Provider) SetEndpoint(field, u string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.endpoints == nil {
		p.endpoints = map[string]string{}
	}
	p.endpoints[field] = u
}

// NextTokenRedirect makes the next token request answer 307 Temporary Redirect to location,
// which keeps the method and the body (the code, the PKCE verifier, a client_secret_post
// secret): as a token endpoint whose server sends https callers to somewhere else.
func (p *Provider) NextTokenRedirect(location string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults.tokenRedirect = location
}

// takeTokenRedirect returns and disarms the redirect armed by NextTokenRedirect, or "".
func (p *Provider) takeTokenRedirect() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	to := p.faults.tokenRedirect
	p.faults.tokenRedirect = ""
	return to
}
