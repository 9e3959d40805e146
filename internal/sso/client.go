package sso

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// LoginTTL is how long a person has to finish a sign-in at the provider.
const LoginTTL = 10 * time.Minute

// Store is what single sign-on needs of the database.
type Store interface {
	DeprovisionSSOUser(ctx context.Context, issuer, subject, missingGroupsClaim string) (store.Deprovisioned, error)
	RenameSSOUser(ctx context.Context, id int64, issuer, subject, username string) (store.User, error)
}

// Config is what New needs.
type Config struct {
	Options     Options
	RedirectURL string // the callback's absolute URL, registered at the provider
	Store       Store
	Log         *slog.Logger
	// ValidUsername and ValidEmail are the server's rules for a username and an e-mail
	// address: a name or address the provider sends that breaks them is not used.
	ValidUsername, ValidEmail func(string) bool
}

// Client is terdut-server as the provider's OpenID Connect client. It discovers the provider
// on first use, so that the server starts (and its probes pass) while the provider is
// unreachable; sign-ins answer sso_unavailable until it is reachable. No lock is held across
// a request to the provider: what the last discovery found is read from an atomic pointer, so
// readiness and the login page never wait for a provider that hangs.
type Client struct {
	opts          Options
	redirectURL   string
	httpClient    *http.Client
	timeout       time.Duration // of one whole discovery
	log           *slog.Logger
	store         Store
	validUsername func(string) bool
	validEmail    func(string) bool

	state atomic.Pointer[discovery] // nil until the first discovery ends

	mu     sync.Mutex    // guards flight alone, never held across a request
	flight chan struct{} // closed when the discovery in progress ends; nil when none is
}

// New returns a client of the provider cfg.Options names. It starts nothing: CheckAtStart
// starts the first discovery.
func New(cfg Config) *Client {
	timeout := cfg.Options.Timeout
	if timeout <= 0 {
		timeout = defaultOIDCTimeout
	}
	return &Client{opts: cfg.Options, redirectURL: cfg.RedirectURL,
		httpClient: &http.Client{Timeout: timeout, CheckRedirect: refuseRedirect}, timeout: timeout, log: cfg.Log,
		store: cfg.Store, validUsername: cfg.ValidUsername, validEmail: cfg.ValidEmail}
}
