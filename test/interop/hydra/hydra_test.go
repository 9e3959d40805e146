package hydra_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
	"github.com/terdut-server/terdut-server/test/interop/hydra"
	"github.com/terdut-server/terdut-server/test/interop/suite"
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

// TestHydra_PublicElsewhere: a Hydra whose urls.self.public is not its issuer names its
// token endpoint, JWKS and UserInfo on another origin. terdut-server sends neither the code
// nor the client secret there and takes no keys from there: sign-in answers 500
// sso_misconfigured naming token_endpoint, /readyz stays 200 (the log says why); with that origin
// in --oidc-endpoint-origins, people sign in.
func TestHydra_PublicElsewhere(t *testing.T) {
	p := hydra.StartPublicElsewhere(t, bin, suite.CallbackURL)
	product := hydra.Product{Provider: p}
	product.SetPerson(t, suite.Person{Login: "sub-lea", Username: "lea", Email: "lea@example.test", EmailVerified: true,
		Groups: []string{suite.Users}})

	t.Run("Refused", func(t *testing.T) {
		srv := suite.NewServers(t, product, nil)
		srv.Gated.MustClaim(t)
		resp := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/auth/oidc/login"})
		if resp.Status != http.StatusInternalServerError || resp.Code() != "sso_misconfigured" ||
			!strings.Contains(string(resp.Body), "token_endpoint") || !strings.Contains(string(resp.Body), p.PublicURL) {
			t.Errorf("sign-in: got %d %s, want 500 sso_misconfigured naming token_endpoint at %s", resp.Status, resp.Body, p.PublicURL)
		}
		ready := srv.Gated.MustDo(t, apitest.Request{Method: http.MethodGet, Path: "/readyz"})
		if ready.Status != http.StatusOK || strings.Contains(string(ready.Body), "token_endpoint") {
			t.Errorf("readyz: got %d %s, want 200 naming nothing (the log names token_endpoint)", ready.Status, ready.Body)
		}
		if n := suite.Count(t, srv.Gated, `SELECT count(*) FROM users WHERE oidc_subject IS NOT NULL`); n != 0 {
			t.Errorf("SSO users: got %d, want 0", n)
		}
	})

	t.Run("OriginNamed", func(t *testing.T) {
		srv := suite.NewServers(t, product, func(o *api.OIDCOptions) { o.EndpointOrigins = []string{p.PublicURL} })
		srv.Gated.MustClaim(t)
		if me, _ := suite.MustSignIn(t, srv.Gated, product, "sub-lea"); me.Username != "lea" {
			t.Errorf("got %+v, want lea", me)
		}
	})
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

// TestHydra_RememberedLogin: Hydra remembers a person's login and signs them in again without
// asking anything, with the auth_time of that login. That new local session makes no API key
// once the authentication is older than --sso-key-sign-in-window (10s here), however new the
// session; the step-up sign-in makes Hydra ask the login app to authenticate them again, and
// that session makes one.
func TestHydra_RememberedLogin(t *testing.T) {
	p := hydra.Start(t, bin, suite.CallbackURL)
	product := hydra.Product{Provider: p}
	const sub = "sub-remy"
	product.SetPerson(t, suite.Person{Login: sub, Username: "remy", Email: "remy@example.test", EmailVerified: true,
		Groups: []string{suite.Users}})
	p.Remember(sub)
	const window = 10 * time.Second
	srv := suite.NewServersWith(t, product, func(o *api.Options) { o.SSOKeySignInWindow = window })
	srv.Gated.MustClaim(t)

	me, c := suite.MustSignIn(t, srv.Gated, product, sub)
	suite.MustCreateKey(t, srv.Gated, me.ID, c)
	if n := p.Authentications(sub); n != 1 {
		t.Fatalf("authentications at Hydra after the first sign-in: got %d, want 1", n)
	}

	time.Sleep(window + time.Second)
	_, c = suite.MustSignIn(t, srv.Gated, product, sub)
	if n := p.Authentications(sub); n != 1 {
		t.Fatalf("authentications at Hydra after the remembered sign-in: got %d, want 1 (Hydra skipped the login app)", n)
	}
	resp := suite.CreateKey(t, srv.Gated, me.ID, c)
	if resp.Status != http.StatusForbidden || resp.Code() != "recent_sign_in_required" {
		t.Fatalf("API key from the remembered sign-in's new session: got %d %s, want 403 recent_sign_in_required", resp.Status, resp.Body)
	}

	f, err := srv.Gated.StartOIDCStepUp(t.Context(), product, sub)
	if err != nil {
		t.Fatal(err)
	}
	if n := p.Authentications(sub); n != 2 {
		t.Fatalf("authentications at Hydra after the step-up: got %d, want 2 (Hydra asked the login app again)", n)
	}
	resp, err = srv.Gated.FinishOIDC(f)
	if err != nil {
		t.Fatal(err)
	}
	c = resp.Cookie("terdut_session")
	if resp.Status != http.StatusSeeOther || c == nil {
		t.Fatalf("step-up callback: got %d %s, want 303 with a session", resp.Status, resp.Body)
	}
	suite.MustCreateKey(t, srv.Gated, me.ID, c)
}
