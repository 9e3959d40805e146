package dex

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"

	"golang.org/x/net/html"
)

// TryAuthorize signs a person in at Dex as a browser would: it opens authURL (where
// terdut-server sent the browser), follows Dex's redirects to its login form, fills in the
// e-mail that authURL's login_hint names and that person's password (see SetPerson), posts
// it, approves on Dex's approval screen, and returns the URL Dex then sends the browser to:
// terdut-server's callback with code and state, or with an error. It implements
// apitest.Authorizer.
func (p *Provider) TryAuthorize(ctx context.Context, authURL string) (string, error) {
	u, err := url.Parse(authURL)
	if err != nil {
		return "", err
	}
	email := u.Query().Get("login_hint")
	pw, ok := p.passwords.Load(email)
	if !ok {
		return "", fmt.Errorf("dex: no person %q (login_hint) was set", email)
	}
	jar, _ := cookiejar.New(nil)
	dexHost := strings.TrimPrefix(p.URL, "http://")
	client := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host != dexHost {
			return http.ErrUseLastResponse // back to terdut-server: the browser's journey at Dex ends
		}
		return nil
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return "", err
	}
	for range 6 {
		resp, err := client.Do(req)
		if err != nil {
			return "", fmt.Errorf("dex: %s %s: %w", req.Method, req.URL.Path, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if err != nil {
			return "", err
		}
		if loc := resp.Header.Get("Location"); resp.StatusCode/100 == 3 && loc != "" {
			next, err := resp.Request.URL.Parse(loc)
			return next.String(), err
		}
		if resp.StatusCode != http.StatusOK {
			return "", fmt.Errorf("dex: %s %s: %s: %s", req.Method, req.URL.Path, resp.Status, bytes.TrimSpace(body))
		}
		f, err := formOf(body, func(values url.Values) bool { return values.Get("approval") != "rejected" })
		if err != nil {
			return "", fmt.Errorf("dex: page %s: %w", resp.Request.URL.Path, err)
		}
		if f.values.Has("login") || f.values.Has("password") {
			f.values.Set("login", email)
			f.values.Set("password", pw.(string))
		}
		action, err := resp.Request.URL.Parse(f.action)
		if err != nil {
			return "", err
		}
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, action.String(), strings.NewReader(f.values.Encode()))
		if err != nil {
			return "", err
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	return "", errors.New("dex: too many pages without a redirect back")
}

// form is an HTML form with the values a browser would submit.
type form struct {
	action string
	values url.Values
}

// formOf returns the first POST form of page whose values want accepts: its action ("" is the
// page itself) and its inputs with their values.
func formOf(page []byte, want func(url.Values) bool) (form, error) {
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		return form{}, err
	}
	var forms []form
	var walk func(n *html.Node, in *form)
	walk = func(n *html.Node, in *form) {
		if n.Type == html.ElementNode && n.Data == "form" && strings.EqualFold(attr(n, "method"), "post") {
			in = &form{action: attr(n, "action"), values: url.Values{}}
			defer func() { forms = append(forms, *in) }()
		}
		if n.Type == html.ElementNode && n.Data == "input" && in != nil && attr(n, "name") != "" && attr(n, "type") != "checkbox" {
			in.values.Set(attr(n, "name"), attr(n, "value"))
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c, in)
		}
	}
	walk(doc, nil)
	for _, f := range forms {
		if want(f.values) {
			return f, nil
		}
	}
	return form{}, errors.New("no form to submit")
}

func attr(n *html.Node, name string) string {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val
		}
	}
	return ""
}
