package hydra_test

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/pgtest"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/interop/hydra"
	"github.com/terdut-server/terdut-server/interop/suite"
)

// bin is the Hydra program the tests run, built (or found in the cache) by TestMain.
var bin string

func TestMain(m *testing.M) {
	start := time.Now()
	var err error
	if bin, err = hydra.Build("../hydrabin"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "hydra %s: %s (ready in %s)\n", hydra.Version, bin, time.Since(start).Round(time.Millisecond))
	pgtest.Main(m, store.MigrateUp)
}

// TestHydra runs every sign-in scenario through Hydra's login and consent challenges.
func TestHydra(t *testing.T) {
	p := hydra.Start(t, bin, suite.CallbackURL)
	suite.Run(t, hydra.Product{Provider: p}, func(name string) string { return "sub-" + name })
}

// TestHydra_ClaimsPlacement pins what a person writing Hydra's login and consent app would
// not guess: terdut-server reads the claims of session.id_token (in the ID token, and in
// UserInfo), never those of session.access_token.
func TestHydra_ClaimsPlacement(t *testing.T) {
	p := hydra.Start(t, bin, suite.CallbackURL)
	product := hydra.Product{Provider: p}
	srv := suite.NewServers(t, product, nil)
	srv.Gated.MustClaim(t)
	claims := map[string]any{"preferred_username": "lea", "email": "lea@example.test", "email_verified": true,
		"groups": []string{suite.Users, suite.Admins}}

	t.Run("IDToken", func(t *testing.T) {
		p.SetClaims("sub-lea", hydra.Claims{IDToken: claims})
		calls := p.UserInfoRequests()
		me, _ := suite.MustSignIn(t, srv.Gated, product, "sub-lea")
		if me.Username != "lea" || me.Role != "admin" {
			t.Errorf("got %+v, want lea, an admin", me)
		}
		if n := p.UserInfoRequests() - calls; n != 0 {
			t.Errorf("UserInfo requests: got %d, want 0 (the ID token has every claim)", n)
		}
	})

	t.Run("AccessTokenOnly", func(t *testing.T) {
		// The ID token lacks the claims, so terdut-server asks UserInfo, which Hydra answers
		// from session.id_token too: no groups anywhere, the sign-in is refused.
		p.SetClaims("sub-max", hydra.Claims{AccessToken: claims})
		calls := p.UserInfoRequests()
		resp := suite.SignIn(t, srv.Gated, product, "sub-max")
		if resp.Status != http.StatusForbidden || resp.Code() != "group_not_allowed" {
			t.Errorf("got %d %s, want 403 group_not_allowed", resp.Status, resp.Body)
		}
		if n := p.UserInfoRequests() - calls; n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1", n)
		}
	})

	t.Run("SplitWithUserInfo", func(t *testing.T) {
		// A person without an e-mail: the ID token lacks it, UserInfo is read (its subject
		// checked) and adds nothing; the username claim and groups stand.
		p.SetClaims("sub-ned", hydra.Claims{IDToken: map[string]any{"preferred_username": "ned", "groups": []string{suite.Users}}})
		calls := p.UserInfoRequests()
		me, _ := suite.MustSignIn(t, srv.Gated, product, "sub-ned")
		if me.Username != "ned" || me.Email != "" || me.Role != "member" {
			t.Errorf("got %+v, want ned, a member without an e-mail", me)
		}
		if n := p.UserInfoRequests() - calls; n != 1 {
			t.Errorf("UserInfo requests: got %d, want 1", n)
		}
	})
}
