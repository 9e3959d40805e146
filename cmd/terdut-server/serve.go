package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/certfile"
	"github.com/terdut-server/terdut-server/internal/logbuf"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/optoken"
	"github.com/terdut-server/terdut-server/internal/store"
)

func newLogger(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level}))
}

// accessLog returns where the access lines go: held in logs, or nowhere with --access-log=false
// or a --log-level above info (the lines are info lines, as they were when slog wrote them).
func accessLog(cfg Config, logs *logbuf.Writer) io.Writer {
	if !cfg.AccessLog || cfg.LogLevel > slog.LevelInfo {
		return nil
	}
	return logs.Held()
}

// serve migrates the database, then serves until ctx is cancelled, draining requests in flight.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := parseConfig("terdut-server", args, getenv, stdout)
	if err != nil {
		return err
	}
	// Access lines wait up to --access-log-interval (see internal/logbuf); everything else
	// goes out at once. The deferred Close writes the held lines once serveAll has drained the
	// requests in flight: a clean stop loses none.
	logs := logbuf.New(stderr, cfg.AccessLogInterval)
	defer logs.Close()
	log := newLogger(logs, cfg.LogLevel)
	tokens, err := loadOperatorTokens(cfg, log)
	if err != nil {
		return err
	}
	identity, err := operatorIdentity(cfg.OperatorOIDC, log)
	if err != nil {
		return err
	}
	if identity != nil {
		go warmOperatorIdentity(ctx, identity, log)
	}
	if tokens == nil && identity == nil {
		log.Warn("no operator token configured (--operator-token-file) and no operator identity (--operator-oidc-issuer): POST /api/bootstrap is open to every client on this machine (a loopback address; through --trusted-proxies, the client the proxy names): any local user or process, or a proxy here that --trusted-proxies does not name, can claim this install, and the claim cannot be reset over the API")
	}
	if cfg.OIDCIssuer != "" && !secureOrLoopbackPublicURL(cfg.PublicURL) {
		log.Warn("single sign-on over plain http off loopback (--public-url): its state cookie cannot carry the __Host- prefix, so a sibling host can plant a state and sign a person in as someone else (login CSRF); use an https --public-url",
			"public_url", cfg.PublicURL.String())
	}
	pair, err := loadTLS(cfg, log)
	if err != nil {
		return err
	}
	st, err := openMigrated(ctx, database{url: cfg.DatabaseURL, pooler: cfg.Database.Pooler}, log)
	if err != nil {
		return err
	}
	defer st.Close()
	st.SetAssignOnCall(cfg.AssignOnCall)
	passwords, err := api.NewPasswords(cfg.PasswordCost)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	build := readBuildInfo()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		newBuildInfoMetric(build))
	opts := api.Options{PublicURL: cfg.PublicURL, Gate: cfg.BootstrapGate, PasswordLogin: cfg.PasswordLogin,
		SessionTTL: cfg.SessionTTL, OperatorTokens: tokens, OperatorIdentity: identity, Passwords: passwords, Logger: log,
		AccessLog:  accessLog(cfg, logs),
		ResetLimit: store.RateLimit{Max: cfg.ResetMax, Window: cfg.ResetWindow},
		LoginLimit: store.RateLimit{Max: cfg.LoginLimitMax, Window: cfg.LoginLimitWindow}, Registry: reg, Gatherer: reg,
		OIDCPendingLimit: cfg.OIDCPendingLimit, APIKeysPerUser: cfg.APIKeysPerUser, WebhookMaxBytes: cfg.WebhookMaxBytes,
		SSOAPIKeyMaxTTL: cfg.SSOAPIKeyMaxTTL, SSOKeySignInWindow: cfg.SSOKeySignIn, MetricsOwnPort: true}
	opts.LoginRatePerAddress, opts.TrustedProxies, opts.ForwardedHeader = cfg.LoginRatePerIP, cfg.TrustedProxies, cfg.ForwardedHeader
	if cfg.OIDCIssuer != "" {
		opts.OIDC = &api.OIDCOptions{Issuer: cfg.OIDCIssuer, ClientID: cfg.OIDCClientID, ClientSecret: cfg.OIDCClientSecret,
			Scopes: cfg.OIDCScopes, UsernameClaim: cfg.OIDCUsernameClaim, EndpointOrigins: cfg.OIDCOrigins,
			GroupsClaim: cfg.OIDCGroupsClaim, AllowedGroups: cfg.OIDCAllowedGroups, AdminGroups: cfg.OIDCAdminGroups}
	}
	handlers := api.NewHandlers(st, opts, cfg.OperatorListen != "")
	people, operator := handlers.People, handlers.Operator
	var webhook http.Handler
	if cfg.WebhookListen != "" {
		webhook = handlers.Webhook
	}
	// /metrics is never served on --listen, which a route exposes to everyone for every path:
	// on --metrics-listen, or nowhere.
	var metricsHandler http.Handler
	if cfg.MetricsListen != "" {
		metricsHandler = api.NewMetricsHandler(reg)
	} else {
		log.Info("no --metrics-listen: /metrics is served nowhere (--listen never serves it); set --metrics-listen, such as :9090, to scrape the server")
	}
	ports, err := openPorts(cfg, people, operator, metricsHandler, webhook, pair, log)
	if err != nil {
		return err
	}
	log.Info(ports[0].msg, "addr", ports[0].ln.Addr().String(), "public_url", cfg.PublicURL.String(),
		"tls", pair != nil, "bootstrap_gate", cfg.BootstrapGate, "sso", cfg.OIDCIssuer != "", "password_login", cfg.PasswordLogin,
		"version", build.Version, "revision", build.Revision)
	claimURL := cfg.PublicURL.String()
	for _, p := range ports[1:] {
		log.Info(p.msg, "addr", p.ln.Addr().String(), "tls", pair != nil)
		if p.setting == "--operator-listen" {
			claimURL = p.url()
		}
	}
	printNextSteps(ctx, stdout, st, cfg, claimURL, tokens, identity)
	defer startHousekeeping(ctx, st, cfg, log)()
	defer startExpiry(ctx, st, cfg.ExpiryInterval, reg, log)()
	defer startRetention(ctx, st, cfg.Retention, dailyRetention, reg, log)()
	return serveAll(ctx, ports, cfg.ShutdownTimeout, log)
}

// openPorts listens on --listen for people; when operator is not nil, on --operator-listen
// for the operator; when metrics is not nil, on --metrics-listen for GET /metrics; and when
// webhook is not nil, on --webhook-listen for Alertmanager's webhook. Every port or none. The ports share one error log, which bounds the lines anonymous connections
// can cause.
func openPorts(cfg Config, people, operator, metrics, webhook http.Handler, pair *certfile.Pair, log *slog.Logger) ([]*port, error) {
	errorLog := newErrorLog(log)
	p, err := listen("--listen", cfg.Listen, "terdut-server listening", people, pair, errorLog)
	if err != nil {
		return nil, err
	}
	ports := []*port{p}
	for _, more := range []struct {
		setting, addr, msg string
		h                  http.Handler
	}{
		{"--operator-listen", cfg.OperatorListen, "terdut-server listening for the operator", operator},
		{"--metrics-listen", cfg.MetricsListen, "terdut-server listening for metrics", metrics},
		{"--webhook-listen", cfg.WebhookListen, "terdut-server listening for Alertmanager", webhook},
	} {
		if more.h == nil {
			continue
		}
		p, err := listen(more.setting, more.addr, more.msg, more.h, pair, errorLog)
		if err != nil {
			closeAll(ports)
			return nil, err
		}
		ports = append(ports, p)
	}
	return ports, nil
}

// loadTLS reads --tls-cert-file and --tls-key-file, or returns nil when they are not set.
func loadTLS(cfg Config, log *slog.Logger) (*certfile.Pair, error) {
	if cfg.TLSCertFile == "" {
		return nil, nil
	}
	pair, err := certfile.Load(cfg.TLSCertFile, cfg.TLSKeyFile, log)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file and --tls-key-file: %w", err)
	}
	if cfg.PublicURL.Scheme != "https" {
		log.Warn("the listeners serve https (--tls-cert-file) but --public-url is http: links, sign-in redirects and cookies name http; set --public-url to the https URL people reach",
			"public_url", cfg.PublicURL.String())
	}
	return pair, nil
}

func loadOperatorTokens(cfg Config, log *slog.Logger) (*optoken.Source, error) {
	if cfg.OperatorTokenFile == "" {
		return nil, nil
	}
	return optoken.Load(cfg.OperatorTokenFile, log)
}

// operatorIdentity returns the verifier of the operator's service-account tokens, or nil
// when --operator-oidc-issuer is not set.
func operatorIdentity(c OperatorOIDCConfig, log *slog.Logger) (*opjwt.Verifier, error) {
	if len(c.Issuer) == 0 {
		return nil, nil
	}
	cfg := c.opjwtConfig()
	cfg.Logger = log
	v, err := opjwt.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("--operator-oidc-issuer: %w", err)
	}
	log.Info("the operator may prove itself with a service-account token", "issuer", []string(c.Issuer),
		"audience", c.Audience, "subjects", []string(c.Subjects), "token_review", c.ReviewURL != "")
	return v, nil
}

// warmOperatorIdentity reads the operator identity issuer's keys at start, so that a wrong
// issuer, CA file or token of the server's shows in the log now, not at the operator's first
// claim. The server starts either way: tokens fetch the keys again when they need them.
func warmOperatorIdentity(ctx context.Context, identity *opjwt.Verifier, log *slog.Logger) {
	if err := identity.Warm(ctx); err != nil { // bounded by opjwt's fetch timeout
		log.Error("cannot read the operator identity issuer's keys: claims and resets with a service-account token answer 503 until they can be read; check --operator-oidc-issuer, --operator-oidc-ca-file and --operator-oidc-issuer-token-file",
			"issuer", identity.Issuer(), "err", err)
	}
}

// printNextSteps tells the person who started the server where it is and what to do next.
// The claim goes to claimURL: the public URL, or the operator's port on this host.
func printNextSteps(ctx context.Context, w io.Writer, st *store.Store, cfg Config, claimURL string, tokens *optoken.Source, identity *opjwt.Verifier) {
	base := cfg.PublicURL.String()
	fmt.Fprintf(w, "terdut-server is running at %s (health: %s/healthz)\n", base, base)
	b, err := st.Bootstrap(ctx)
	if err != nil || b.State != store.StatePending {
		fmt.Fprintf(w, "Sign in at %s/login\n", base)
		return
	}
	claim := "curl -X POST " + claimURL + "/api/bootstrap"
	switch {
	case tokens.Configured():
		// The first token of the file (blank lines and # comments are not tokens), handed to
		// curl on its standard input so that it never sits in a process's arguments.
		claim = `grep -m1 -v -E '^[[:space:]]*(#|$)' ` + cfg.OperatorTokenFile +
			` | sed 's/^/Authorization: Bearer /' | curl -H @- -X POST ` + claimURL + "/api/bootstrap"
	case identity != nil:
		// Only the operator's service account can: its client reads its projected token.
		fmt.Fprintf(w, "This install is not claimed yet; nobody can sign in until it is. The operator claims it with "+
			"a service-account token of %s (audience %s) from %s.\n%s",
			strings.Join(cfg.OperatorOIDC.Subjects, " or "), cfg.OperatorOIDC.Audience, identity.Issuer(), orRunClaim(cfg.Database))
		return
	}
	fmt.Fprintf(w, "This install is not claimed yet; nobody can sign in until it is. Claim it with:\n"+
		"  %s\n"+
		"and keep the api_key it returns (it is shown once). %s", claim, orRunClaim(cfg.Database))
}
