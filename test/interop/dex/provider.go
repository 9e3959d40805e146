// Package dex runs Dex, the identity provider, in-process as a library for terdut-server's
// interop tests: its real server (server.NewServer) with memory storage, its password
// database holding people with groups, one static client, and its own login form.
//
// Dex is pinned in test/interop/go.mod at github.com/dexidp/dex v0.0.0-20260806151424-ab64ed778070,
// its master of 2026-08-06, taken with `go get github.com/dexidp/dex@<that version>`: `go list
// -m github.com/dexidp/dex@latest` answers v2.13.0+incompatible of 2018-11-07 (Dex's v2 tags
// have no /v2 module path), so @latest must never be used. Dex's main package (cmd/dex)
// cannot be built from another module, hence the library.
package dex

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	gosundheit "github.com/AppsFlyer/go-sundheit"
	"github.com/dexidp/dex/server"
	"github.com/dexidp/dex/server/connectors"
	"github.com/dexidp/dex/server/signer"
	"github.com/dexidp/dex/storage"
	"github.com/dexidp/dex/storage/memory"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/test/interop/suite"
)

// idTokensValidFor is Dex's ID token lifetime here, and how long a key it rotated out still
// verifies tokens.
const idTokensValidFor = time.Hour

// rotationPeriod is how often Dex's own rotator would replace the signing key; RotateKeys
// makes it happen at once.
const rotationPeriod = 6 * time.Hour

// Person is someone in Dex's password database. Email is what they type to sign in.
type Person struct {
	Email    string
	Password string
	// Name is Dex's "username" of a password, sent as the name claim.
	Name string
	// PreferredUsername is sent as preferred_username; Dex sends none when it is empty.
	PreferredUsername string
	// EmailVerified is sent as email_verified; nil sends true, as Dex does.
	EmailVerified *bool
	Groups        []string
}

// Provider is a running Dex.
type Provider struct {
	// URL is Dex's issuer, the base URL of its endpoints.
	URL          string
	ClientID     string
	ClientSecret string

	store     storage.Storage
	logger    *slog.Logger
	watch     suite.Watch
	passwords sync.Map // e-mail → what the person types, for TryAuthorize
	hashes    sync.Map // password → its hash
}

// Start runs Dex on 127.0.0.1 until tb's test ends, with one client whose only redirect URI
// is redirectURL. Dex shows its approval screen: signing in is its login form, then approval.
func Start(tb testing.TB, redirectURL string) *Provider {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("dex: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	p := &Provider{URL: "http://" + ln.Addr().String(), ClientID: "terdut-server", ClientSecret: rand.Text(),
		store: memory.New(logger), logger: logger}
	// As Dex's configuration file makes them: the client is a static client (staticClients),
	// the password database the "local" connector (enablePasswordDB).
	st := storage.WithStaticClients(p.store, []storage.Client{{ID: p.ClientID, Secret: p.ClientSecret,
		RedirectURIs: []string{redirectURL}, Name: "terdut-server"}})
	st = storage.WithStaticConnectors(st, []storage.Connector{{ID: connectors.LocalConnector,
		Type: connectors.LocalConnector, Name: "Email"}})
	sig, err := (&signer.LocalConfig{KeysRotationPeriod: rotationPeriod.String()}).Open(ctx, p.store, idTokensValidFor, time.Now, logger)
	if err != nil {
		tb.Fatalf("dex: signer: %v", err)
	}
	srv, err := server.NewServer(ctx, server.Config{
		Issuer:             p.URL,
		Storage:            st,
		IDTokensValidFor:   idTokensValidFor,
		Logger:             logger,
		Signer:             sig,
		PrometheusRegistry: prometheus.NewRegistry(),
		HealthChecker:      gosundheit.New(),
	})
	if err != nil {
		tb.Fatalf("dex: new server: %v", err)
	}
	hs := &http.Server{Handler: p.watch.Wrap(srv, "/token", "/userinfo"), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	tb.Cleanup(func() { _ = hs.Close() })
	return p
}

// hash returns a bcrypt hash of password at cost 10, the least Dex accepts, computed once
// per password: under the race detector each one takes seconds.
func (p *Provider) hash(password string) ([]byte, error) {
	if h, ok := p.hashes.Load(password); ok {
		return h.([]byte), nil
	}
	h, err := bcrypt.GenerateFromPassword([]byte(password), 10)
	if err == nil {
		p.hashes.Store(password, h)
	}
	return h, err
}

// SetPerson adds a person to Dex's password database, or changes the one with that e-mail
// (keeping their Dex user id, so they stay the same subject), as Dex's API does.
func (p *Provider) SetPerson(tb testing.TB, person Person) {
	tb.Helper()
	hash, err := p.hash(person.Password)
	if err != nil {
		tb.Fatal(err)
	}
	pw := storage.Password{Email: person.Email, Hash: hash, Username: person.Name, Name: person.Name,
		PreferredUsername: person.PreferredUsername, EmailVerified: person.EmailVerified, Groups: person.Groups}
	ctx := tb.Context()
	err = p.store.UpdatePassword(ctx, person.Email, func(old storage.Password) (storage.Password, error) {
		pw.UserID = old.UserID
		return pw, nil
	})
	if err == storage.ErrNotFound {
		pw.UserID = "uid-" + person.Email
		err = p.store.CreatePassword(ctx, pw)
	}
	if err != nil {
		tb.Fatalf("dex: set person %s: %v", person.Email, err)
	}
	p.passwords.Store(person.Email, person.Password)
}

// RotateKeys makes Dex rotate its signing key now, with Dex's own rotator: a local signer on
// the same storage whose clock is past the next rotation rotates once when started. The old
// key stays published for verification, as Dex keeps it for the lifetime of an ID token.
func (p *Provider) RotateKeys(tb testing.TB) {
	tb.Helper()
	later := func() time.Time { return time.Now().Add(rotationPeriod + time.Minute) }
	sig, err := (&signer.LocalConfig{KeysRotationPeriod: rotationPeriod.String()}).Open(tb.Context(), p.store, idTokensValidFor, later, p.logger)
	if err != nil {
		tb.Fatalf("dex: rotation signer: %v", err)
	}
	ctx, cancel := context.WithCancel(tb.Context())
	sig.Start(ctx) // rotates before it returns
	cancel()
}

// UserInfoRequests returns how many requests Dex's UserInfo endpoint received.
func (p *Provider) UserInfoRequests() int64 { return p.watch.UserInfoRequests() }

// LastKeyID returns the key ID of the last ID token Dex issued.
func (p *Provider) LastKeyID() string { return p.watch.LastKeyID() }

// String names the provider in failure messages.
func (p *Provider) String() string { return fmt.Sprintf("Dex at %s", p.URL) }
