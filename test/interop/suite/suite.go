// Package suite is the sign-in scenarios every identity-provider product must pass with
// terdut-server: the real API (test/harness/apitest, over a real Postgres from test/harness/pgtest)
// signing people in through the product's own authorization code flow with PKCE and nonce,
// its ID token and, when the ID token lacks claims, its UserInfo.
package suite

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/store"
	"github.com/terdut-server/terdut-server/test/harness/apitest"
	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// PublicURL is where the terdut-server instances say they are; products redirect browsers to
// its /auth/oidc/callback, which the tests then send to the instance.
var PublicURL = &url.URL{Scheme: "http", Host: "terdut.test"}

// CallbackURL is the redirect URI a product's client must allow.
var CallbackURL = PublicURL.JoinPath("/auth/oidc/callback").String()

// Groups the scenarios use: members of Users may sign in, of Admins are admins too.
const (
	Users       = "terdut-users"
	Admins      = "terdut-admins"
	Contractors = "contractors"
)

// Person is someone at the product, as the scenarios describe them.
type Person struct {
	// Login is what apitest passes as login_hint and the product signs in: an e-mail at Dex,
	// the subject at Hydra.
	Login         string
	Username      string // preferred_username; "" sends none
	Email         string
	EmailVerified bool
	Groups        []string
}

// Product is a running identity provider.
type Product interface {
	apitest.Authorizer
	// OIDC returns the terdut-server settings it needs, as a person would copy them; the
	// scenarios add the group rules.
	OIDC() api.OIDCOptions
	// SetPerson adds the person or changes the one with the same Login, who stays the same
	// subject.
	SetPerson(tb testing.TB, p Person)
	// LastKeyID returns the key ID of the last ID token it issued.
	LastKeyID() string
	// RotateKeys replaces its signing key with a new one, the product's own way.
	RotateKeys(tb testing.TB)
}

// Me is the user GET /api/me shows.
type Me struct {
	ID       int64
	Username string
	Email    string
	Role     store.Role
	SSO      bool
}

// Servers is an instance with the gate on and, over the same database, one with the gate off
// that can start sign-ins while the install is pending (the login start is gated too).
type Servers struct {
	Gated, Starter *apitest.Server
}

// NewServers starts both instances on a fresh, unclaimed database, signing in through p with
// the group rules Users and Admins.
func NewServers(tb testing.TB, p Product, mutate func(*api.OIDCOptions)) Servers {
	tb.Helper()
	return NewServersWith(tb, p, func(o *api.Options) {
		if mutate != nil {
			mutate(o.OIDC)
		}
	})
}

// NewServersWith is NewServers with mutate applied to each instance's options last (their
// OIDC options are p's with the group rules, and o.OIDC may be changed in place).
func NewServersWith(tb testing.TB, p Product, mutate func(*api.Options)) Servers {
	tb.Helper()
	db := pgtest.MustDatabase(tb)
	opts := func(gate bool) func(*api.Options) {
		return func(o *api.Options) {
			oidc := p.OIDC()
			oidc.AllowedGroups, oidc.AdminGroups = []string{Users}, []string{Admins}
			o.PublicURL, o.OIDC, o.Gate = PublicURL, &oidc, gate
			if mutate != nil {
				mutate(o)
			}
		}
	}
	return Servers{Gated: apitest.NewServer(tb, db, opts(true)), Starter: apitest.NewServer(tb, db, opts(false))}
}

// MustMe returns who the session cookie stands for, failing unless /api/me answers 200.
func MustMe(tb testing.TB, srv *apitest.Server, c *http.Cookie) Me {
	tb.Helper()
	resp := srv.MustDo(tb, apitest.Request{Method: http.MethodGet, Path: "/api/me", Cookie: c})
	if resp.Status != http.StatusOK {
		tb.Fatalf("GET /api/me: got %d %s, want 200", resp.Status, resp.Body)
	}
	var body struct{ User Me }
	resp.JSON(tb, &body)
	return body.User
}

// Count runs a SELECT count(*) query on srv's database.
func Count(tb testing.TB, srv *apitest.Server, query string, args ...any) int {
	tb.Helper()
	var n int
	if err := srv.Store.Pool().QueryRow(tb.Context(), query, args...).Scan(&n); err != nil {
		tb.Fatalf("%s: %v", query, err)
	}
	return n
}

// SignIn signs the person in on srv and returns the callback's answer.
func SignIn(tb testing.TB, srv *apitest.Server, p Product, login string) apitest.Response {
	tb.Helper()
	resp, err := srv.SignInOIDC(tb.Context(), p, login)
	if err != nil {
		tb.Fatalf("sign in %s: %v", login, err)
	}
	return resp
}

// MustSignIn signs the person in on srv and returns who they are there.
func MustSignIn(tb testing.TB, srv *apitest.Server, p Product, login string) (Me, *http.Cookie) {
	tb.Helper()
	c := srv.MustSignInOIDC(tb, p, login)
	return MustMe(tb, srv, c), c
}

// CreateKey asks for an API key for the user with the session cookie c.
func CreateKey(tb testing.TB, srv *apitest.Server, userID int64, c *http.Cookie) apitest.Response {
	tb.Helper()
	return srv.MustDo(tb, apitest.Request{Method: http.MethodPost, Path: fmt.Sprintf("/api/users/%d/api-keys", userID),
		Cookie: c, Body: map[string]string{"name": "from-session"}})
}

// MustCreateKey fails unless the session c makes the user an API key.
func MustCreateKey(tb testing.TB, srv *apitest.Server, userID int64, c *http.Cookie) {
	tb.Helper()
	if resp := CreateKey(tb, srv, userID, c); resp.Status != http.StatusCreated {
		tb.Fatalf("API key from the session: got %d %s, want 201", resp.Status, resp.Body)
	}
}

func mustParse(tb testing.TB, u string) *url.URL {
	tb.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	return parsed
}
