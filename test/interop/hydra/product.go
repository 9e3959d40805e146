package hydra

import (
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/test/interop/suite"
)

// OIDC returns the settings terdut-server needs for this Hydra: --oidc-issuer, the client,
// and terdut-server's default scopes and claims (preferred_username, groups), which are
// whatever the login and consent app puts in session.id_token.
func (p *Provider) OIDC() api.OIDCOptions {
	return api.OIDCOptions{Issuer: p.URL, ClientID: p.ClientID, ClientSecret: p.ClientSecret,
		UsernameClaim: "preferred_username", GroupsClaim: "groups"}
}

// Product is p as the interop scenarios drive it: a person's login is their subject, and
// the consent app puts their claims in the ID token.
type Product struct{ *Provider }

// SetPerson has the consent app grant the person's claims in session.id_token. A person in no
// group gets no groups claim, as Dex, Okta, Entra ID, Keycloak and Zitadel omit an empty one.
func (p Product) SetPerson(tb testing.TB, person suite.Person) {
	claims := map[string]any{"email": person.Email, "email_verified": person.EmailVerified}
	if len(person.Groups) > 0 {
		claims["groups"] = person.Groups
	}
	if person.Username != "" {
		claims["preferred_username"] = person.Username
	}
	p.SetClaims(person.Login, Claims{IDToken: claims})
}
