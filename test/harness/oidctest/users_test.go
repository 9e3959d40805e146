package oidctest_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"golang.org/x/oauth2"

	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

func TestSetUserGroupsClaimAndExtraClaims(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	p.SetGroupsClaim("roles")
	p.SetUser(oidctest.User{
		Subject:     "carol",
		Email:       "carol@example.test",
		Groups:      []string{"admins", "users"},
		ExtraClaims: map[string]any{"tenant": "acme", "email_verified": false},
	})
	idt, err := newRelyingParty(t, p, oauth2.AuthStyleInHeader).login(t, p)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Roles         []string `json:"roles"`
		Groups        []string `json:"groups"`
		Tenant        string   `json:"tenant"`
		EmailVerified bool     `json:"email_verified"`
	}
	if err := idt.Claims(&c); err != nil {
		t.Fatal(err)
	}
	if idt.Subject != "carol" || !slices.Equal(c.Roles, []string{"admins", "users"}) ||
		c.Groups != nil || c.Tenant != "acme" || c.EmailVerified {
		t.Errorf("sub=%q claims=%+v", idt.Subject, c)
	}
}

func TestLoginHint(t *testing.T) {
	t.Parallel()
	p := oidctest.NewProvider(t)
	p.AddUser(oidctest.User{Subject: "bob", Groups: []string{"ops"}})
	rp := newRelyingParty(t, p, oauth2.AuthStyleInParams)
	for hint, wantSub := range map[string]string{"bob": "bob", "nobody": "alice"} {
		idt, err := rp.login(t, p, oauth2.SetAuthURLParam("login_hint", hint))
		if err != nil {
			t.Fatal(err)
		}
		if idt.Subject != wantSub {
			t.Errorf("login_hint=%s: sub %q, want %q", hint, idt.Subject, wantSub)
		}
	}
}

// TestConcurrentLogins runs many sign-ins for different users at once.
func TestConcurrentLogins(t *testing.T) {
	t.Parallel()
	const n = 120
	p := oidctest.NewProvider(t)
	rp := newRelyingParty(t, p, oauth2.AuthStyleAutoDetect)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		sub := fmt.Sprintf("user-%d", i)
		p.AddUser(oidctest.User{Subject: sub, Groups: []string{sub}})
		wg.Go(func() {
			a := rp.begin(oauth2.SetAuthURLParam("login_hint", sub))
			cb, err := p.TryAuthorize(t.Context(), a.authURL)
			if err != nil {
				errs <- err
				return
			}
			idt, err := rp.finish(t.Context(), a, cb)
			var c claims
			if err == nil {
				err = idt.Claims(&c)
			}
			if err == nil && (idt.Subject != sub || !slices.Equal(c.Groups, []string{sub})) {
				err = fmt.Errorf("got sub %q groups %v, want %s", idt.Subject, c.Groups, sub)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if got := p.TokensIssued(); got != n {
		t.Errorf("TokensIssued = %d, want %d", got, n)
	}
}
