package e2e

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/test/harness/oidctest"
)

// publicURL is where people reach the install, through a load balancer in front of its
// replicas. Nothing listens there: a browser sends each request to the replica a test
// names, as the load balancer would (see browser.do).
const publicURL = "http://terdut.e2e.test"

// The groups of the provider's users that the install admits, and makes admins.
const (
	groupOncall = "oncall"
	groupAdmins = "terdut-admins"
)

// install is one terdut-server install: its database, its operator token, its OIDC
// provider, and the settings its replicas run with.
type install struct {
	db            string
	operatorToken string
	idp           *oidctest.Provider
	settings      map[string]string
}

// newInstall prepares an install on an empty database, with an operator token file and
// single sign-on through a fresh provider, as terdut-operator would configure it.
func newInstall(t *testing.T, db string) *install {
	t.Helper()
	idp := oidctest.NewProvider(t)
	dir := t.TempDir()
	token := "e2e-operator-token-" + rand.Text()
	tokenFile := writeSecret(t, dir, "operator-token", "# the operator's token\n"+token+"\n")
	secretFile := writeSecret(t, dir, "oidc-client-secret", idp.ClientSecret+"\n")
	return &install{db: db, operatorToken: token, idp: idp, settings: map[string]string{
		"TERDUT_LISTEN":                  "127.0.0.1:0",
		"TERDUT_DATABASE_URL":            db,
		"TERDUT_PUBLIC_URL":              publicURL,
		"TERDUT_OPERATOR_TOKEN_FILE":     tokenFile,
		"TERDUT_OIDC_ISSUER":             idp.Issuer(),
		"TERDUT_OIDC_CLIENT_ID":          idp.ClientID,
		"TERDUT_OIDC_CLIENT_SECRET_FILE": secretFile,
		"TERDUT_OIDC_ALLOWED_GROUPS":     groupOncall + "," + groupAdmins,
		"TERDUT_OIDC_ADMIN_GROUPS":       groupAdmins,
		"TERDUT_PASSWORD_HASH_COST":      "4",
		"TERDUT_SESSION_TTL":             "1h",
		"TERDUT_SHUTDOWN_TIMEOUT":        "5s",
		"TERDUT_LOG_LEVEL":               "debug",
	}}
}

// addPerson registers a person with the provider; they sign in with login_hint=sub.
func (in *install) addPerson(sub string, groups ...string) {
	in.idp.AddUser(oidctest.User{Subject: sub, Email: sub + "@example.test", PreferredUsername: sub,
		Name: strings.ToUpper(sub[:1]) + sub[1:], Groups: groups})
}

// start starts a replica and waits until it is ready.
func (in *install) start(t *testing.T, name string) *server {
	t.Helper()
	s := launch(t, name, in.settings)
	s.waitReady(t)
	return s
}

// operator returns terdut-operator's client of the replica s.
func (in *install) operator(t *testing.T, s *server) *client.Client {
	t.Helper()
	c, err := client.New(s.URL, client.WithOperatorToken(in.operatorToken))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writeSecret writes a file only its owner can read, as a mounted Secret, and returns its path.
func writeSecret(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// assertNoSecrets fails the test when any process wrote any of the secrets.
func assertNoSecrets(t *testing.T, secrets []string, servers ...*server) {
	t.Helper()
	for _, s := range servers {
		out := s.output()
		for _, secret := range secrets {
			if secret != "" && strings.Contains(out, secret) {
				t.Errorf("%s's output: got a secret (%.6s...), want none", s.name, secret)
			}
		}
	}
}
