package apitest

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/optoken"
	"github.com/terdut-server/terdut-server/internal/store"
)

// TokenFile writes tokens to a file, one a line, and returns it loaded as a Source.
func TokenFile(tb testing.TB, tokens ...string) *optoken.Source {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "operator-token")
	WriteFile(tb, path, strings.Join(tokens, "\n")+"\n")
	src, err := optoken.Load(path, nil)
	if err != nil {
		tb.Fatalf("load token file: %v", err)
	}
	return src
}

// WriteFile replaces the file at path with content, atomically, as Kubernetes updates a Secret.
func WriteFile(tb testing.TB, path, content string) {
	tb.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		tb.Fatal(err)
	}
}

// Person is a user made for a test, with the credentials to act as them.
type Person struct {
	User     store.User
	Password string
	APIKey   string
}

// MustPerson creates a human user with a password and an API key, directly in the store.
func MustPerson(tb testing.TB, st *store.Store, username string, role store.Role) Person {
	tb.Helper()
	ctx := context.Background()
	u, err := st.CreateUser(ctx, store.NewUser{Username: username, Email: username + "@example.test", Role: role})
	if err != nil {
		tb.Fatalf("create user %s: %v", username, err)
	}
	password := "password-of-" + username
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		tb.Fatal(err)
	}
	if err := st.SetPasswordHash(ctx, u.ID, string(hash), ""); err != nil {
		tb.Fatalf("set password: %v", err)
	}
	_, key, err := st.CreateAPIKey(ctx, u.ID, "test")
	if err != nil {
		tb.Fatalf("create API key: %v", err)
	}
	u.HasPassword = true
	return Person{User: u, Password: password, APIKey: key}
}

// MustClaim claims the install with the operator token and returns the new key's secret.
func (s *Server) MustClaim(tb testing.TB) string {
	tb.Helper()
	resp := s.MustDo(tb, Request{Method: http.MethodPost, Path: "/api/bootstrap", Bearer: OperatorToken})
	if resp.Status != http.StatusCreated {
		tb.Fatalf("claim: got %d %s, want 201", resp.Status, resp.Body)
	}
	var body struct {
		APIKey struct{ Key string } `json:"api_key"`
	}
	resp.JSON(tb, &body)
	return body.APIKey.Key
}

// MustLogin signs in with a password and returns the session cookie (terdut_session, or
// __Host-terdut_session with an https public URL).
func (s *Server) MustLogin(tb testing.TB, username, password string) *http.Cookie {
	tb.Helper()
	resp := s.MustDo(tb, Request{Method: http.MethodPost, Path: "/api/auth/login",
		Body: map[string]string{"username": username, "password": password}})
	c := resp.Cookie("terdut_session")
	if s.Options.PublicURL.Scheme == "https" {
		c = resp.Cookie("__Host-terdut_session")
	}
	if resp.Status != http.StatusOK || c == nil {
		tb.Fatalf("login %s: got %d %s, want 200 with a session cookie", username, resp.Status, resp.Body)
	}
	return c
}

// LoadTokenFile loads the operator token file at path, logging to log, failing the test if
// it is invalid.
func LoadTokenFile(tb testing.TB, path string, log *slog.Logger) *optoken.Source {
	tb.Helper()
	src, err := optoken.Load(path, log)
	if err != nil {
		tb.Fatalf("load token file: %v", err)
	}
	return src
}
