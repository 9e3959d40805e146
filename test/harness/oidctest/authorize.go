package oidctest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// codeLifetime is how long an authorization code can be redeemed.
const codeLifetime = 5 * time.Minute

// grant is what an authorization code was issued for.
type grant struct {
	redirectURI string
	challenge   string
	nonce       string
	user        User
	expires     time.Time
}

// handleAuthorize validates an authorization request and, approving it at
// once, redirects to its redirect_uri with a code (or an injected error).
func (p *Provider) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	p.authorizeRequests.Add(1)
	redirect, err := p.validateAuthorize(r)
	if err != nil {
		http.Error(w, "invalid authorization request: "+err.Error(), http.StatusBadRequest)
		return
	}
	state := r.FormValue("state")
	if e, ok := p.takeAuthorizeError(); ok {
		redirectWith(w, r, redirect, url.Values{
			"error": {e.code}, "error_description": {e.description}, "state": {state},
		})
		return
	}

	code := rand.Text()
	p.mu.Lock()
	p.grants[code] = grant{
		redirectURI: r.FormValue("redirect_uri"),
		challenge:   r.FormValue("code_challenge"),
		nonce:       r.FormValue("nonce"),
		user:        p.userFor(r.FormValue("login_hint")),
		expires:     time.Now().Add(codeLifetime),
	}
	p.mu.Unlock()
	redirectWith(w, r, redirect, url.Values{"code": {code}, "state": {state}})
}

// validateAuthorize checks the request parameters and returns the parsed
// redirect_uri.
func (p *Provider) validateAuthorize(r *http.Request) (*url.URL, error) {
	if r.FormValue("client_id") != p.ClientID {
		return nil, fmt.Errorf("unknown client_id %q", r.FormValue("client_id"))
	}
	redirect, err := url.Parse(r.FormValue("redirect_uri"))
	if err != nil || !redirect.IsAbs() || redirect.Fragment != "" {
		return nil, errors.New("redirect_uri must be an absolute URL without fragment")
	}
	challenge, _ := base64.RawURLEncoding.DecodeString(r.FormValue("code_challenge"))
	switch {
	case r.FormValue("response_type") != "code":
		return nil, errors.New("response_type must be code")
	case !slices.Contains(strings.Fields(r.FormValue("scope")), "openid"):
		return nil, errors.New("scope must include openid")
	case r.FormValue("state") == "":
		return nil, errors.New("state is required")
	case r.FormValue("code_challenge_method") != "S256":
		return nil, errors.New("code_challenge_method must be S256")
	case len(challenge) != 32:
		return nil, errors.New("code_challenge must be a base64url SHA-256 digest")
	}
	return redirect, nil
}

// redirectWith redirects (302) to base with params added to its query.
func redirectWith(w http.ResponseWriter, r *http.Request, base *url.URL, params url.Values) {
	u := *base
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

// Authorize GETs authURL (an authorization URL built by the relying party)
// without following redirects and returns the Location the provider redirects
// to: the relying party's callback URL carrying code and state, or error and
// state. It fails tb otherwise, so it must be called from the test goroutine;
// other goroutines should use [Provider.TryAuthorize].
func (p *Provider) Authorize(tb testing.TB, authURL string) (callbackURL string) {
	tb.Helper()
	callbackURL, err := p.TryAuthorize(tb.Context(), authURL)
	if err != nil {
		tb.Fatalf("oidctest: %v", err)
	}
	return callbackURL
}

// TryAuthorize is [Provider.Authorize] reporting failure as an error, for use
// from any goroutine.
func (p *Provider) TryAuthorize(ctx context.Context, authURL string) (callbackURL string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	client := &http.Client{
		Transport: p.srv.Client().Transport,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusFound {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return "", fmt.Errorf("authorize: GET %s: %s: %s", authURL, resp.Status, bytes.TrimSpace(body))
	}
	loc, err := resp.Location()
	if err != nil {
		return "", fmt.Errorf("authorize: %w", err)
	}
	return loc.String(), nil
}
