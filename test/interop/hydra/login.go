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
	jar, remember := p.browsers[subject]
	p.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("hydra: no person %q (login_hint) was set", subject)
	}
	if !remember {
		jar, _ = cookiejar.New(nil) // Hydra's CSRF cookies tie the steps to this browser
	}
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
			err = p.acceptLogin(ctx, q.Get("login_challenge"), subject, remember, &accepted)
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

// acceptLogin plays the login app: when Hydra skips the login (it remembers the subject's
// authentication, and the request asked for no new one) it accepts it as Hydra requires;
// otherwise it authenticates the subject, counted by Authentications, and asks Hydra to
// remember that when the subject's browser is kept (Remember).
func (p *Provider) acceptLogin(ctx context.Context, challenge, subject string, remember bool, accepted any) error {
	challenge = url.QueryEscape(challenge)
	var request struct {
		Skip bool `json:"skip"`
	}
	if err := p.tryAdmin(ctx, http.MethodGet, "/admin/oauth2/auth/requests/login?login_challenge="+challenge, nil, &request); err != nil {
		return err
	}
	accept := map[string]any{"subject": subject}
	if !request.Skip {
		p.mu.Lock()
		p.authentications[subject]++
		p.mu.Unlock()
		accept["remember"], accept["remember_for"] = remember, 0 // 0: until the browser's session ends
	}
	return p.tryAdmin(ctx, http.MethodPut, "/admin/oauth2/auth/requests/login/accept?login_challenge="+challenge, accept, accepted)
}

// Remember keeps a browser for the subject from now on, as a person who stays signed in at
// Hydra: the login app asks Hydra to remember their authentication, and Hydra then signs them
// in again without the login app, with the auth_time of that authentication, unless the
// authorization request asks for a new one (prompt=login, max_age).
func (p *Provider) Remember(subject string) {
	jar, _ := cookiejar.New(nil)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.browsers[subject] = jar
}

// Authentications returns how many times the login app authenticated the subject: the
// logins Hydra asked it for and did not skip.
func (p *Provider) Authentications(subject string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.authentications[subject]
}
