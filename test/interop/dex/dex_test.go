package dex_test

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/interop/dex"
	"github.com/terdut-server/terdut-server/test/interop/suite"
)

func TestMain(m *testing.M) {
	pgtest.Main(m, store.MigrateUp)
}

// TestDex runs every sign-in scenario through Dex's login form.
func TestDex(t *testing.T) {
	p := dex.Start(t, suite.CallbackURL)
	suite.Run(t, dex.Product{Provider: p}, func(name string) string { return name + "@example.test" })
}

// TestDex_Quirks pins what a person configuring Dex would not guess.
func TestDex_Quirks(t *testing.T) {
	p := dex.Start(t, suite.CallbackURL)
	product := dex.Product{Provider: p}

	t.Run("GroupsOnlyWithTheGroupsScope", func(t *testing.T) {
		// terdut-server's default scopes (openid profile email) get no groups claim from Dex:
		// everyone is refused until --oidc-scopes adds groups.
		srv := suite.NewServers(t, product, func(o *api.OIDCOptions) { o.Scopes = nil })
		srv.Gated.MustClaim(t)
		product.SetPerson(t, suite.Person{Login: "gil@example.test", Username: "gil", Email: "gil@example.test",
			EmailVerified: true, Groups: []string{suite.Users}})
		resp := suite.SignIn(t, srv.Gated, product, "gil@example.test")
		if resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
			t.Errorf("without the groups scope: got %d %s, want 403 group_not_allowed", resp.Status, resp.Body)
		}
		if !strings.Contains(srv.Gated.Logs.String(), "carry no groups claim") {
			t.Error("the log does not say that the groups claim is missing")
		}
	})

	t.Run("EncodedSubjectAndNoPreferredUsername", func(t *testing.T) {
		// Dex's sub is its user id and connector id, encoded; without preferredUsername it
		// sends no preferred_username, so terdut-server asks UserInfo (which has none either)
		// and the verified e-mail becomes the username.
		srv := suite.NewServers(t, product, nil)
		srv.Gated.MustClaim(t)
		p.SetPerson(t, dex.Person{Email: "hal@example.test", Password: "hal-password", Name: "Hal",
			Groups: []string{suite.Users}})
		calls := p.UserInfoRequests()
		me, _ := suite.MustSignIn(t, srv.Gated, product, "hal@example.test")
		if me.Username != "hal@example.test" || me.Email != "hal@example.test" {
			t.Errorf("got %+v, want the verified e-mail as username", me)
		}
		if n := p.UserInfoRequests() - calls; n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1 (the ID token has no preferred_username)", n)
		}
		var sub string
		if err := srv.Gated.Store.Pool().QueryRow(t.Context(), `SELECT oidc_subject FROM users WHERE id = $1`, me.ID).Scan(&sub); err != nil {
			t.Fatal(err)
		}
		raw, err := base64.RawURLEncoding.DecodeString(sub)
		if err != nil || !strings.Contains(string(raw), "uid-hal@example.test") || !strings.Contains(string(raw), "local") {
			t.Errorf("subject %q: got %q (%v), want Dex's encoding of the user id and the connector local", sub, raw, err)
		}
	})

	t.Run("NoUserInfoWhenTheIDTokenHasItAll", func(t *testing.T) {
		srv := suite.NewServers(t, product, nil)
		srv.Gated.MustClaim(t)
		product.SetPerson(t, suite.Person{Login: "ivy@example.test", Username: "ivy", Email: "ivy@example.test",
			EmailVerified: true, Groups: []string{suite.Users}})
		calls := p.UserInfoRequests()
		suite.MustSignIn(t, srv.Gated, product, "ivy@example.test")
		if n := p.UserInfoRequests() - calls; n != 0 {
			t.Errorf("UserInfo requests: got %d, want 0", n)
		}
	})
}
