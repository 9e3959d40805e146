package hydra

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
)

// loginApp is where Hydra sends browsers to sign in and to consent (urls.login and
// urls.consent). Nothing listens there: TryAuthorize plays that app.
const loginApp = "login-app.test"

// TryAuthorize signs a person in at Hydra as a browser with a login and consent app would: it
// opens authURL, and when Hydra sends the browser to the login app it accepts the login
// challenge for the subject that authURL's login_hint names (PUT
// /admin/oauth2/auth/requests/login/accept), follows Hydra on, accepts the consent challenge
// with the requested scopes and the subject's claims (see SetClaims), and returns the URL
// Hydra then sends the browser to: terdut-server's callback. It implements
// apitest.Authorizer.
func (p *Provider) TryAuthorize(ctx context.Context, authURL string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	subject := u.Query().Get("login_hint")
	p.mu.Lock()
	claims, ok := p.people[subject]
	p.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("hydra: no person %q (login_hint) was set", subject)
	}
	jar, _ := cookiejar.New(nil) // Hydra's CSRF cookies tie the steps to this browser
	browser := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	next := authURL
	for range 8 {
		loc, err := redirect(ctx, browser, next)
		if err != nil {
			return "", err
		}
		if loc.Host != loginApp {
			if strings.HasPrefix(loc.String(), p.URL) {
				next = loc.String()
				continue
			}
			return loc.String(), nil // Hydra is done: back to terdut-server
		}
		var accepted struct {
			RedirectTo string `json:"redirect_to"`
		}
		q := loc.Query()
		switch {
		case q.Has("login_challenge"):
			err = p.tryAdmin(ctx, http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+url.QueryEscape(q.Get("login_challenge")),
				map[string]any{"subject": subject, "remember": false}, &accepted)
		case q.Has("consent_challenge"):
			challenge := url.QueryEscape(q.Get("consent_challenge"))
			var request struct {
				RequestedScope []string `json:"requested_scope"`
			}
			if err = p.tryAdmin(ctx, http.MethodGet, "/admin/oauth2/auth/requests/consent?consent_challenge="+challenge, nil, &request); err != nil {
				return "", err
			}
			err = p.tryAdmin(ctx, http.MethodPut, "/admin/oauth2/auth/requests/consent/accept?consent_challenge="+challenge,
				map[string]any{"grant_scope": request.RequestedScope, "remember": false,
					"session": map[string]any{"id_token": claims.IDToken, "access_token": claims.AccessToken}}, &accepted)
		default:
			return "", fmt.Errorf("hydra: sent the browser to %s with no challenge", loc)
		}
		if err != nil {
			return "", err
		}
		next = accepted.RedirectTo
	}
	return "", errors.New("hydra: too many redirects")
}

// redirect GETs u with the browser and returns where the answer redirects to.
func redirect(ctx context.Context, browser *http.Client, u string) (*url.URL, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := browser.Do(req)
	if err != nil {
		return nil, fmt.Errorf("hydra: GET %s: %w", req.URL.Path, err)
	}
	resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		return nil, fmt.Errorf("hydra: GET %s: %s without a redirect", req.URL.Path, resp.Status)
	}
	return loc, nil
}
