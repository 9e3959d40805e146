package dex

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/interop/suite"
)

// Scopes are the scopes terdut-server must ask Dex for: Dex sends the groups claim only
// when the groups scope is asked for.
var Scopes = []string{"openid", "profile", "email", "groups"}

// OIDC returns the settings terdut-server needs for this Dex: --oidc-issuer, the client,
// --oidc-scopes "openid profile email groups", and the claims preferred_username and groups
// (terdut-server's defaults for a Dex person: Dex sends preferred_username only when the
// password sets preferredUsername, else the verified e-mail is the username).
func (p *Provider) OIDC() api.OIDCOptions {
	return api.OIDCOptions{Issuer: p.URL, ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		Scopes: Scopes, UsernameClaim: "preferred_username", GroupsClaim: "groups"}
}

// Product is p as the interop scenarios drive it: a person logs in with their e-mail.
type Product struct{ *Provider }

// SetPerson puts the person into Dex's password database under their e-mail (their login),
// with a password of their own.
func (p Product) SetPerson(tb testing.TB, person suite.Person) {
	tb.Helper()
	verified := person.EmailVerified
	p.Provider.SetPerson(tb, Person{Email: person.Login, Password: "pw-" + person.Login, Name: person.Username,
		PreferredUsername: person.Username, EmailVerified: &verified, Groups: person.Groups})
}
