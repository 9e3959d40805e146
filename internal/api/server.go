// Package api is terdut-server's HTTP interface: the JSON API, sign-in, the bootstrap
// endpoints and the few pages a browser needs. It depends on the store only through the
// small Store interface below; single sign-on's dealings with the provider are internal/sso's.
package api

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/terdut-server/terdut-server/internal/logcap"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/optoken"
	"github.com/terdut-server/terdut-server/internal/sso"
	"github.com/terdut-server/terdut-server/internal/store"
)

// Store is what the API needs of the database.
type Store interface {
	Ping(ctx context.Context) error
	CheckSchema(ctx context.Context) error

	CreateUser(ctx context.Context, nu store.NewUser) (store.User, error)
	User(ctx context.Context, id int64) (store.User, error)
	UsersAfter(ctx context.Context, after int64, limit int) ([]store.User, error)
	DeleteUser(ctx context.Context, id int64) error
	UserForSignIn(ctx context.Context, username string, gate store.Gate, limit store.RateLimit) (store.User, string, store.Attempt, error)
	ReleaseAttempt(ctx context.Context, a store.Attempt) error
	FailedAttempt(ctx context.Context, a store.Attempt) error
	ChangePassword(ctx context.Context, c store.PasswordChange) (int64, error)
	PasswordHash(ctx context.Context, userID int64) (string, error)
	RehashPassword(ctx context.Context, id int64, oldHash, newHash string) error
	IssuePasswordLink(ctx context.Context, userID int64, by store.Caller, ttl time.Duration) (store.PasswordLink, error)
	PasswordLinkLive(ctx context.Context, token string) error
	PasswordLinkPerson(ctx context.Context, token string) (store.User, error)
	RedeemPasswordLink(ctx context.Context, token, hash string) (store.User, error)

	IssueAPIKey(ctx context.Context, nk store.NewAPIKey, lim store.APIKeyLimits) (store.APIKey, string, error)
	APIKeys(ctx context.Context, userID int64) ([]store.APIKey, error)
	RevokeAPIKey(ctx context.Context, userID, keyID int64) error
	AuthenticateAPIKey(ctx context.Context, secret string) (store.User, error)

	CreateSession(ctx context.Context, userID int64, ttl time.Duration, gate store.Gate) (store.Session, error)
	CreatePasswordSession(ctx context.Context, userID int64, checkedHash string, a store.Attempt, ttl time.Duration, gate store.Gate) (store.Session, error)
	AuthenticateSession(ctx context.Context, token string) (store.User, error)
	EndSession(ctx context.Context, token string) error

	SaveOIDCLogin(ctx context.Context, state string, l store.OIDCLogin, ttl time.Duration, gate store.Gate, limit int) (int, error)
	TakeOIDCLogin(ctx context.Context, state string, gate store.Gate) (store.OIDCLogin, error)
	SignInSSO(ctx context.Context, id store.SSOIdentity, ttl time.Duration, gate store.Gate) (store.SSOSignIn, error)
	sso.Store // what single sign-on does itself: deprovision and rename its people

	Bootstrap(ctx context.Context) (store.BootstrapStatus, error)
	Claim(ctx context.Context, who store.AuditInfo) (store.ClaimResult, error)
	Reset(ctx context.Context, who store.AuditInfo, limit store.RateLimit) (store.ResetResult, error)

	AppendEvent(ctx context.Context, e store.Event) error
	Events(ctx context.Context, q store.EventQuery) ([]store.Event, error)

	CreateIntegration(ctx context.Context, ni store.NewIntegration) (store.Integration, string, error)
	Integrations(ctx context.Context) ([]store.Integration, error)
	DeleteIntegration(ctx context.Context, id int64) (string, error)
	AddIntegrationKey(ctx context.Context, integrationID, by int64) (store.IntegrationKey, string, error)
	RevokeIntegrationKey(ctx context.Context, integrationID, keyID int64) error
	RecordIntegrationError(ctx context.Context, integrationID int64, msg string) error
	AuthenticateDelivery(ctx context.Context, secret string, sum []byte) (c store.IntegrationCaller, alerts int, replay bool, err error)
	ReplayedBody(ctx context.Context, caller store.IntegrationCaller, sum []byte) (alerts int, replay bool, err error)
	Ingest(ctx context.Context, caller store.IntegrationCaller, n store.Notification) (store.IngestResult, error)

	Incidents(ctx context.Context, q store.IncidentQuery) ([]store.Incident, error)
	Incident(ctx context.Context, id int64) (store.Incident, error)
	OpenIncidents(ctx context.Context) (int, error)
	Timeline(ctx context.Context, id int64) ([]store.IncidentEvent, error)
	Acknowledge(ctx context.Context, id int64, by store.Worker) (store.Incident, error)
	Unacknowledge(ctx context.Context, id int64, by store.Worker) error
	Resolve(ctx context.Context, id int64, by store.Worker) (store.Incident, error)
	Assign(ctx context.Context, id, userID int64) (store.Incident, error)
	Snooze(ctx context.Context, id int64, d time.Duration, by store.Worker) (store.Incident, error)
	Unsnooze(ctx context.Context, id int64, by store.Worker) error
	Archive(ctx context.Context, id int64) (store.Incident, error)
	Unarchive(ctx context.Context, id int64) error
	AddNote(ctx context.Context, id int64, content string, by store.Worker) (store.IncidentEvent, error)
	DeleteNote(ctx context.Context, id, eventID int64, by store.Worker) error
	Alerts(ctx context.Context, q store.AlertQuery) ([]store.Alert, error)
	AlertByID(ctx context.Context, id int64) (store.Alert, error)

	Schedule(ctx context.Context, from, to time.Time) ([]store.ScheduleEntry, error)
	OnCall(ctx context.Context) (store.ScheduleEntry, error)
	AssignSchedule(ctx context.Context, a store.ScheduleAssignment) (store.ScheduleChange, error)
	DeleteScheduleEntry(ctx context.Context, id, onlyOf int64) (store.ScheduleEntry, error)
	AlertStats(ctx context.Context) (store.AlertStats, error)
	IncidentStats(ctx context.Context) (store.IncidentStats, error)
	TopAlerts(ctx context.Context, limit int) ([]store.Count, error)
	AlertsByHour(ctx context.Context) ([]store.Count, error)
	AlertsByDay(ctx context.Context) ([]store.Count, error)
}

// Options configures the API.
type Options struct {
	PublicURL      *url.URL        // where people reach the server; its scheme decides Secure cookies
	Gate           bool            // refuse sign-in while the install is unclaimed
	PasswordLogin  bool            // allow POST /api/auth/login
	SessionTTL     time.Duration   // how long a sign-in lasts
	OperatorTokens *optoken.Source // nil: none configured
	// OperatorIdentity verifies the operator's service-account tokens; nil: not configured.
	OperatorIdentity *opjwt.Verifier
	ResetLimit       store.RateLimit // resets over the API, across all replicas
	LoginLimit       store.RateLimit // failed password sign-ins per username, across all replicas; zero: 10 in 15m
	OIDC             *OIDCOptions    // nil: single sign-on off
	Passwords        *Passwords
	Logger           *slog.Logger
	AccessLog        io.Writer // nil: none; else a line for every request, as Logger's JSON handler writes it (see accessLog)
	Registry         prometheus.Registerer
	Gatherer         prometheus.Gatherer
	// MetricsOwnPort is true when the handlers must not serve GET /metrics (they answer it
	// 404): the binary sets it always, serving /metrics on a port of its own
	// (NewMetricsHandler) or nowhere, never on the port a route exposes.
	MetricsOwnPort bool

	// OIDCPendingLimit bounds the sign-ins in progress (started, not finished, not expired)
	// across replicas: past it, a new start ends the oldest; zero: 10000.
	OIDCPendingLimit int
	// APIKeysPerUser bounds each user's live API keys; zero: 100.
	APIKeysPerUser int
	// WebhookMaxBytes bounds a body of POST /api/webhooks/alertmanager; zero: DefaultWebhookMaxBytes.
	WebhookMaxBytes int64
	// SSOAPIKeyMaxTTL bounds the life of the API keys of single sign-on people past their last
	// single sign-on; zero: 2160h.
	SSOAPIKeyMaxTTL time.Duration
	// SSOKeySignInWindow is how recent a single sign-on must be for its session to create an
	// API key (a password session sends current_password instead); zero: 15m.
	SSOKeySignInWindow time.Duration

	// Bounds on what anonymous callers can make one replica do (see limits.go).
	LoginRatePerAddress int            // sign-ins (password, or SSO start) a minute per client address; 0: no limit
	TrustedProxies      []netip.Prefix // peers whose ForwardedHeader names the client; none: it is ignored
	// ForwardedHeader is the one header in which the trusted proxies name their client:
	// "X-Forwarded-For" (also when empty), "Forwarded" or "X-Real-IP", in any case (see
	// clientAddr). NewServer panics on another: check it with ForwardedHeader first.
	ForwardedHeader   string
	PasswordChecks    int           // password checks at once; 0: GOMAXPROCS
	PasswordCheckWait time.Duration // how long a check waits for a free slot; 0: 1s
	// ReadyCacheTTL is how long one readiness check answers every GET /readyz; 0: a second.
	ReadyCacheTTL time.Duration
	// AddressRefusalPause is how long a sign-in over its address's rate waits for its 429;
	// 0: a second (see allowAddress).
	AddressRefusalPause time.Duration
}

type server struct {
	store       Store
	opts        Options
	log         *slog.Logger
	metrics     *metrics
	oidc        *sso.Client // nil: single sign-on off
	passwords   *Passwords
	crossOrigin *http.CrossOriginProtection
	addresses   *addressLimiter
	checks      *checkSlots
	cookieName  string          // of the session cookie
	refusalLogs *logcap.PerKey  // bounds the lines of refusals anyone can cause, by event and reason
	overloadLog *logcap.Limiter // bounds the lines of refused password checks
	nameTags    nameTagger      // names an unknown username in a log line without writing it
	split       bool            // the operator's endpoints are on a port of their own (routes)
	readiness   *readiness      // the last readiness check, shared by /readyz's probes
}

// DefaultCheckLease is how long a password check counts against its person's limit while it
// runs (Options.LoginLimit.Lease when zero), for a check that waits at most checkWait for a
// slot: that wait and a bcrypt run, and a margin for the writes around it on a busy machine.
func DefaultCheckLease(checkWait time.Duration) time.Duration { return checkWait + 5*time.Second }

// NewServer returns the HTTP handler for every endpoint (see routes.go).
func NewServer(st Store, opts Options) http.Handler {
	h, _ := newServer(st, opts).routes(false)
	return h
}

// NewSplitServer returns two handlers of one server, which share its limits, metrics and
// logs: people's, which answers the operator's endpoints (the claim, its status and the
// reset) 404, and the operator's, which answers only those and every other path 404. Each
// is meant for a port of its own (see routes.go).
func NewSplitServer(st Store, opts Options) (people, operator http.Handler) {
	return newServer(st, opts).routes(true)
}

// Handlers are the handlers of one server, for its ports: people's, the operator's (nil
// unless split) and the webhook's, which serves Alertmanager's webhook alone (see
// routes.webhookPort).
type Handlers struct {
	People, Operator, Webhook http.Handler
}

// NewHandlers returns every handler of one server, which share its limits, metrics and logs;
// split as NewSplitServer does.
func NewHandlers(st Store, opts Options, split bool) Handlers {
	s := newServer(st, opts)
	people, operator := s.routes(split)
	return Handlers{People: people, Operator: operator, Webhook: s.webhookPort()}
}

func newServer(st Store, opts Options) *server {
	s := &server{store: st, opts: opts, log: opts.Logger, passwords: opts.Passwords,
		crossOrigin: http.NewCrossOriginProtection(), nameTags: newNameTagger()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.cookieName = sessionCookie
	if opts.PublicURL != nil && opts.PublicURL.Scheme == "https" {
		s.cookieName = "__Host-" + sessionCookie
	}
	if h, ok := ForwardedHeader(opts.ForwardedHeader); ok {
		s.opts.ForwardedHeader = h
	} else {
		panic("api: Options.ForwardedHeader " + opts.ForwardedHeader + " is none of X-Forwarded-For, Forwarded, X-Real-IP")
	}
	if opts.SessionTTL == 0 {
		s.opts.SessionTTL = 12 * time.Hour
	}
	if opts.LoginLimit.Max == 0 {
		s.opts.LoginLimit = store.RateLimit{Max: 10, Window: 15 * time.Minute}
	}
	if opts.OIDCPendingLimit == 0 {
		s.opts.OIDCPendingLimit = 10000
	}
	if opts.APIKeysPerUser == 0 {
		s.opts.APIKeysPerUser = 100
	}
	if opts.SSOAPIKeyMaxTTL == 0 {
		s.opts.SSOAPIKeyMaxTTL = 2160 * time.Hour
	}
	if opts.SSOKeySignInWindow == 0 {
		s.opts.SSOKeySignInWindow = 15 * time.Minute
	}
	if opts.Registry == nil {
		reg := prometheus.NewRegistry()
		s.opts.Registry, s.opts.Gatherer = reg, reg
	}
	s.metrics = newMetrics(s.opts.Registry, st)
	s.readiness = newReadiness(s.opts.ReadyCacheTTL, s.opts.Registry)
	s.refusalLogs = logcap.NewPerKey(refusalLogPeriod)
	s.overloadLog = logcap.NewLimiter(time.Second)
	s.addresses = newAddressLimiter(opts.LoginRatePerAddress, maxTrackedAddresses)
	if s.opts.PasswordChecks <= 0 {
		s.opts.PasswordChecks = runtime.GOMAXPROCS(0)
	}
	if s.opts.PasswordCheckWait <= 0 {
		s.opts.PasswordCheckWait = time.Second
	}
	if s.opts.AddressRefusalPause <= 0 {
		s.opts.AddressRefusalPause = time.Second
	}
	if s.opts.LoginLimit.Lease <= 0 {
		s.opts.LoginLimit.Lease = DefaultCheckLease(s.opts.PasswordCheckWait)
	}
	s.checks = newCheckSlots(s.opts.PasswordChecks, s.opts.PasswordCheckWait, s.opts.Registry)
	if opts.OIDC != nil && opts.OIDC.Issuer != "" {
		redirect := opts.PublicURL.JoinPath("/auth/oidc/callback").String()
		s.oidc = sso.New(sso.Config{Options: *opts.OIDC, RedirectURL: redirect, Store: st, Log: s.log,
			ValidUsername: func(n string) bool { return validateUsername(n) == nil },
			ValidEmail:    func(e string) bool { return validateEmail(e) == nil }})
		s.oidc.CheckAtStart()
	}
	return s
}
