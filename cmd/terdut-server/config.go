package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/terdut-server/terdut-server/internal/api"
	"github.com/terdut-server/terdut-server/internal/opjwt"
	"github.com/terdut-server/terdut-server/internal/store"
)

// Config is every setting of terdut-server. Each is a flag and a TERDUT_* variable of the same
// name (--database-url is TERDUT_DATABASE_URL); a flag wins over the variable.
type Config struct {
	Listen            string
	OperatorListen    string // empty: Listen serves the operator's endpoints too
	TLSCertFile       string // empty: plain http
	TLSKeyFile        string
	MetricsListen     string // empty: /metrics is served nowhere (Listen never serves it)
	WebhookListen     string // empty: Alertmanager's webhook on Listen alone
	Database          DatabaseConfig
	DatabaseURL       string // the URL to connect with, credentials and all: never print it
	PublicURL         *url.URL
	BootstrapGate     bool
	OperatorTokenFile string
	OperatorOIDC      OperatorOIDCConfig
	ResetMax          int
	ResetWindow       time.Duration
	PasswordLogin     bool
	LoginLimitMax     int
	LoginLimitWindow  time.Duration
	PasswordCost      int
	LoginRatePerIP    int
	TrustedProxies    []netip.Prefix
	ForwardedHeader   string // canonical: X-Forwarded-For, Forwarded or X-Real-Ip
	SessionTTL        time.Duration
	OIDCIssuer        string
	OIDCClientID      string
	OIDCClientSecret  string
	OIDCScopes        []string
	OIDCUsernameClaim string
	OIDCGroupsClaim   string
	OIDCAllowedGroups []string
	OIDCAdminGroups   []string
	OIDCOrigins       []string
	OIDCPendingLimit  int
	APIKeysPerUser    int
	SSOAPIKeyMaxTTL   time.Duration
	SSOKeySignIn      time.Duration
	SweepInterval     time.Duration
	// ExpiryInterval is how often firing alerts their integration stopped reporting are
	// resolved (store.ExpireAlerts); WebhookMaxBytes bounds a notification's body;
	// AssignOnCall gives each new incident to the day's on-call person (store.SetAssignOnCall).
	ExpiryInterval  time.Duration
	WebhookMaxBytes int64
	AssignOnCall    bool
	AuditRetention  time.Duration
	// Retention is how long resolved incidents, their events and occurrences, and alerts
	// left with no occurrence are kept (store.Retain); 0: for ever.
	Retention         time.Duration
	AccessLog         bool
	AccessLogInterval time.Duration
	LogLevel          slog.Level
	ShutdownTimeout   time.Duration
}

// parseConfig fills a Config from args and the environment and validates it once, with
// messages that say which setting is wrong and how to fix it. Asked for help, it writes it to
// stdout and returns flag.ErrHelp.
func parseConfig(name string, args []string, getenv func(string) string, stdout io.Writer) (Config, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var c Config
	var publicURL, secretFile, scopes, allowed, admins, origins, logLevel, proxies, forwarded string
	fs.StringVar(&c.Listen, "listen", ":8080", "address to listen on")
	fs.StringVar(&c.OperatorListen, "operator-listen", "", "address of a second listener for the operator's endpoints alone (the claim, its status and the reset), which --listen then answers 404, such as :8081; empty: --listen serves them")
	fs.StringVar(&c.TLSCertFile, "tls-cert-file", "", "PEM certificate chain that every listener serves https with, re-read when it changes (such as a cert-manager Secret's tls.crt); empty: plain http")
	fs.StringVar(&c.TLSKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file (such as a cert-manager Secret's tls.key)")
	fs.StringVar(&c.WebhookListen, "webhook-listen", "", "address of a listener of its own for Alertmanager's webhook (POST /api/webhooks/alertmanager) alone, such as :8082, that believes no proxy's headers; --listen serves the webhook too; empty: --listen alone")
	fs.StringVar(&c.MetricsListen, "metrics-listen", "", "address of a listener of its own for GET /metrics, such as :9090; --listen never serves /metrics (it answers 404); empty: /metrics is served nowhere")
	c.Database.define(fs)
	fs.StringVar(&publicURL, "public-url", "http://localhost:8080", "URL where people reach this server")
	fs.BoolVar(&c.BootstrapGate, "bootstrap-gate", true, "refuse every sign-in until the install is claimed")
	fs.StringVar(&c.OperatorTokenFile, "operator-token-file", "", "file of operator tokens, one a line (32+ characters each)")
	c.OperatorOIDC.define(fs)
	fs.IntVar(&c.ResetMax, "bootstrap-reset-limit", 5, "resets allowed over the API per --bootstrap-reset-window, across replicas")
	fs.DurationVar(&c.ResetWindow, "bootstrap-reset-window", time.Minute, "window of --bootstrap-reset-limit")
	fs.BoolVar(&c.PasswordLogin, "password-login", true, "allow sign-in with a username and password")
	fs.IntVar(&c.LoginLimitMax, "password-login-limit", 10, "failed password sign-ins allowed per username per --password-login-window, across replicas")
	fs.DurationVar(&c.LoginLimitWindow, "password-login-window", 15*time.Minute, "window of --password-login-limit")
	fs.IntVar(&c.PasswordCost, "password-hash-cost", 12, "bcrypt cost of stored passwords (4-31)")
	fs.IntVar(&c.LoginRatePerIP, "login-rate-per-ip", 20, "sign-ins (password, or the start of single sign-on) allowed per minute from one client address, on each replica; 0: no limit")
	fs.StringVar(&proxies, "trusted-proxies", "", "comma-separated addresses or CIDR ranges of proxies whose --trusted-proxy-header names the client; empty: the header is ignored")
	fs.StringVar(&forwarded, "trusted-proxy-header", "X-Forwarded-For", "the one header in which --trusted-proxies name their client: X-Forwarded-For, Forwarded or X-Real-IP; the others are never read for the client's address")
	fs.DurationVar(&c.SessionTTL, "session-ttl", 12*time.Hour, "how long a sign-in lasts")
	fs.StringVar(&c.OIDCIssuer, "oidc-issuer", "", "OIDC issuer URL; empty turns single sign-on off")
	fs.StringVar(&c.OIDCClientID, "oidc-client-id", "", "OIDC client id")
	fs.StringVar(&secretFile, "oidc-client-secret-file", "", "file holding the OIDC client secret")
	fs.StringVar(&scopes, "oidc-scopes", "openid,profile,email", "comma-separated scopes asked for at sign-in; openid is always added")
	fs.StringVar(&c.OIDCUsernameClaim, "oidc-username-claim", "preferred_username", "claim a new person's username comes from (then a verified e-mail)")
	fs.StringVar(&c.OIDCGroupsClaim, "oidc-groups-claim", "groups", "claim that lists a person's groups, or a dotted path such as realm_access.roles")
	fs.StringVar(&allowed, "oidc-allowed-groups", "", "comma-separated groups allowed to sign in; empty: anyone the provider authenticates")
	fs.StringVar(&admins, "oidc-admin-groups", "", "comma-separated groups whose members are admins")
	fs.StringVar(&origins, "oidc-endpoint-origins", "", "comma-separated origins (https://host[:port]) besides --oidc-issuer's where the provider's discovery may name its token endpoint, JWKS and UserInfo; empty: the issuer's origin alone")
	fs.IntVar(&c.OIDCPendingLimit, "oidc-pending-limit", 10000, "single sign-ons in progress kept at once, across replicas; past it the oldest are ended")
	fs.IntVar(&c.APIKeysPerUser, "api-keys-per-user", 100, "live API keys one user may hold")
	fs.DurationVar(&c.SSOAPIKeyMaxTTL, "sso-api-key-max-ttl", 2160*time.Hour, "longest life of an API key of a single sign-on person, from their last single sign-on")
	fs.DurationVar(&c.SSOKeySignIn, "sso-key-sign-in-window", 15*time.Minute, "how recent the authentication at the single sign-on provider (its auth_time) must be for a session to create an API key")
	fs.DurationVar(&c.ExpiryInterval, "alert-expiry-interval", time.Minute, "how often to resolve firing alerts their integration stopped reporting for its expire_after")
	fs.Int64Var(&c.WebhookMaxBytes, "webhook-max-bytes", 32<<20, "largest body of an Alertmanager notification (POST /api/webhooks/alertmanager)")
	fs.BoolVar(&c.AssignOnCall, "assign-on-call", true, "give each new incident to the person on call today (UTC) in the schedule (GET /api/schedule/current); false: new incidents open unassigned")
	fs.DurationVar(&c.SweepInterval, "sweep-interval", 15*time.Minute, "how often to delete dead sessions, keys and sign-ins, and audit events past --audit-retention")
	fs.DurationVar(&c.AuditRetention, "audit-retention", 8760*time.Hour, "how long the audit of administrative actions keeps a row (at least 24h); 0: for ever")
	fs.DurationVar(&c.Retention, "retention", 9600*time.Hour, "how long a resolved incident (with its timeline and occurrences) and an alert with no occurrence left are kept, from its resolution or last report (at least 24h); 0: for ever")
	fs.BoolVar(&c.AccessLog, "access-log", true, "log a line for every request")
	fs.DurationVar(&c.AccessLogInterval, "access-log-interval", 100*time.Millisecond, "how long an access line may wait to be written with others (what a crash can lose); 0: each at once")
	fs.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "how long to drain requests on SIGTERM")
	if err := parseFlags(fs, args, serveHelp(fs), stdout); err != nil {
		return Config{}, err
	}
	if fs.NArg() > 0 {
		return Config{}, fmt.Errorf("unexpected argument %q (settings are flags: see terdut-server --help)", fs.Arg(0))
	}
	given, err := applyEnv(fs, getenv)
	if err != nil {
		return Config{}, err
	}
	var dbErr error
	c.DatabaseURL, dbErr = c.Database.resolve(given, getenv)
	if dbErr != nil && !errors.Is(dbErr, errNoDatabase) {
		return Config{}, dbErr
	}
	if c.OIDCClientSecret, err = fromFile(getenv("TERDUT_OIDC_CLIENT_SECRET"), secretFile, "oidc-client-secret"); err != nil {
		return Config{}, err
	}
	c.OIDCScopes, c.OIDCAllowedGroups, c.OIDCAdminGroups = splitList(scopes), splitList(allowed), splitList(admins)
	c.OIDCOrigins = splitList(origins)
	if c.TrustedProxies, err = parsePrefixes(proxies); err != nil {
		return Config{}, err
	}
	var ok bool
	if c.ForwardedHeader, ok = api.ForwardedHeader(forwarded); !ok {
		return Config{}, fmt.Errorf("--trusted-proxy-header %q: give the header your proxy writes the client's address in: X-Forwarded-For, Forwarded or X-Real-IP", forwarded)
	}
	if err := c.LogLevel.UnmarshalText([]byte(logLevel)); err != nil {
		return Config{}, fmt.Errorf("--log-level %q: use debug, info, warn or error", logLevel)
	}
	if c.PublicURL, err = url.Parse(publicURL); err != nil || (c.PublicURL.Scheme != "http" && c.PublicURL.Scheme != "https") || c.PublicURL.Host == "" {
		return Config{}, fmt.Errorf("--public-url %q: give an absolute http:// or https:// URL, such as https://terdut.example.com", publicURL)
	}
	return c, c.validate()
}

func (c Config) validate() error {
	var problems []string
	if c.DatabaseURL == "" {
		problems = append(problems, errNoDatabase.Error())
	} else if err := store.CheckURL(c.DatabaseURL, store.WithPooler(c.Database.Pooler)); err != nil {
		problems = append(problems, "--database-url: "+err.Error())
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		problems = append(problems, "--tls-cert-file and --tls-key-file go together: give both (such as the tls.crt and tls.key of a cert-manager Secret) or neither")
	}
	if _, port, _ := net.SplitHostPort(c.OperatorListen); c.OperatorListen != "" && c.OperatorListen == c.Listen && port != "0" {
		problems = append(problems, fmt.Sprintf("--operator-listen %s is --listen's address: give the operator's endpoints a port of their own, such as :8081", c.OperatorListen))
	}
	if _, port, _ := net.SplitHostPort(c.WebhookListen); c.WebhookListen != "" && port != "0" &&
		(c.WebhookListen == c.Listen || c.WebhookListen == c.OperatorListen || c.WebhookListen == c.MetricsListen) {
		problems = append(problems, fmt.Sprintf("--webhook-listen %s is the address of another listener: give the webhook a port of its own, such as :8082", c.WebhookListen))
	}
	if _, port, _ := net.SplitHostPort(c.MetricsListen); c.MetricsListen != "" && (c.MetricsListen == c.Listen || c.MetricsListen == c.OperatorListen) && port != "0" {
		problems = append(problems, fmt.Sprintf("--metrics-listen %s is the address of another listener: give /metrics a port of its own, such as :9090", c.MetricsListen))
	}
	if c.PasswordCost < bcrypt.MinCost || c.PasswordCost > bcrypt.MaxCost {
		problems = append(problems, fmt.Sprintf("--password-hash-cost %d: use %d to %d", c.PasswordCost, bcrypt.MinCost, bcrypt.MaxCost))
	}
	if c.SessionTTL < time.Minute {
		problems = append(problems, "--session-ttl: use at least 1m")
	}
	if c.ResetMax < 1 || c.ResetWindow <= 0 {
		problems = append(problems, "--bootstrap-reset-limit and --bootstrap-reset-window must be positive")
	}
	if c.LoginLimitMax < 1 || c.LoginLimitWindow <= 0 {
		problems = append(problems, "--password-login-limit and --password-login-window must be positive")
	}
	if c.OIDCPendingLimit < 1 {
		problems = append(problems, fmt.Sprintf("--oidc-pending-limit %d: use at least 1", c.OIDCPendingLimit))
	}
	if c.APIKeysPerUser < 1 {
		problems = append(problems, fmt.Sprintf("--api-keys-per-user %d: use at least 1", c.APIKeysPerUser))
	}
	if c.SSOAPIKeyMaxTTL < time.Minute {
		problems = append(problems, "--sso-api-key-max-ttl: use at least 1m")
	}
	if c.SSOKeySignIn < time.Minute {
		problems = append(problems, "--sso-key-sign-in-window: use at least 1m")
	}
	if c.AccessLogInterval < 0 {
		problems = append(problems, "--access-log-interval: use 0 (each line at once) or more")
	}
	if c.ExpiryInterval < time.Second {
		problems = append(problems, fmt.Sprintf("--alert-expiry-interval %s: use at least 1s", c.ExpiryInterval))
	}
	if c.WebhookMaxBytes < 1<<20 {
		problems = append(problems, fmt.Sprintf("--webhook-max-bytes %d: use at least 1048576 (1 MiB): Alertmanager sends a whole group in one body", c.WebhookMaxBytes))
	}
	if c.SweepInterval < time.Second {
		problems = append(problems, "--sweep-interval: use at least 1s")
	}
	if c.AuditRetention != 0 && c.AuditRetention < 24*time.Hour {
		problems = append(problems, fmt.Sprintf("--audit-retention %s: use 0 (keep every row) or at least 24h", c.AuditRetention))
	}
	if c.Retention != 0 && c.Retention < 24*time.Hour {
		problems = append(problems, fmt.Sprintf("--retention %s: use 0 (keep every incident and alert) or at least 24h", c.Retention))
	}
	if c.LoginRatePerIP < 0 {
		problems = append(problems, fmt.Sprintf("--login-rate-per-ip %d: use 0 (no limit) or more", c.LoginRatePerIP))
	}
	if c.OIDCIssuer != "" {
		if u, err := url.Parse(c.OIDCIssuer); err != nil || u.Scheme == "" || u.Host == "" {
			problems = append(problems, fmt.Sprintf("--oidc-issuer %q: give the issuer's absolute URL", c.OIDCIssuer))
		} else if err := opjwt.CheckIssuer(c.OIDCIssuer); err != nil {
			// The provider's keys decide who signs in, admins included, and the client secret
			// goes to its token endpoint: the operator issuer's rule, https or loopback.
			problems = append(problems, fmt.Sprintf("--oidc-issuer %q: %v", c.OIDCIssuer, err))
		}
		if c.OIDCClientID == "" {
			problems = append(problems, "--oidc-issuer is set but --oidc-client-id is not")
		}
		if c.OIDCClientSecret == "" {
			problems = append(problems, "--oidc-issuer is set but no client secret: set --oidc-client-secret-file")
		}
		for _, s := range c.OIDCScopes {
			if !scopePattern.MatchString(s) {
				problems = append(problems, fmt.Sprintf("--oidc-scopes: %q is not a scope: use letters, digits and punctuation, no spaces or quotes", s))
			}
		}
		for _, o := range c.OIDCOrigins {
			if err := checkOrigin(o); err != nil {
				problems = append(problems, fmt.Sprintf("--oidc-endpoint-origins: %q %v", o, err))
			}
		}
		if c.OIDCUsernameClaim == "" {
			problems = append(problems, "--oidc-username-claim is empty: name the claim usernames come from, such as preferred_username")
		}
		if c.OIDCGroupsClaim == "" && (len(c.OIDCAllowedGroups) > 0 || len(c.OIDCAdminGroups) > 0) {
			problems = append(problems, "--oidc-groups-claim is empty but group rules are set")
		}
	}
	problems = append(problems, c.OperatorOIDC.problems()...)
	if len(problems) > 0 {
		return errors.New("invalid settings:\n  - " + strings.Join(problems, "\n  - "))
	}
	return nil
}

// applyEnv sets every flag not given on the command line from its TERDUT_* variable, and
// returns the names of the flags that were given on the command line.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) (map[string]bool, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := envName(f.Name)
		if v := getenv(env); v != "" && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				// Only typed settings (numbers, durations, switches) fail to parse, never a secret.
				err = fmt.Errorf("%s=%q: invalid value for --%s: %v", env, v, f.Name, e)
			}
		}
	})
	return given, err
}

func envName(flagName string) string {
	return "TERDUT_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// valueOrFile resolves a setting that can also be read from a file (--x and --x-file): the
// command line beats the environment, and where both come from the same place the file wins.
func valueOrFile(given map[string]bool, value, file, setting string) (string, error) {
	if given[setting] && !given[setting+"-file"] {
		return value, nil
	}
	return fromFile(value, file, setting)
}

// fromFile returns the content of file (trimmed) when file is set, else value.
func fromFile(value, file, setting string) (string, error) {
	if file == "" {
		return value, nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("--%s-file: %w", setting, err)
	}
	v := strings.TrimSpace(string(b))
	if v == "" {
		return "", fmt.Errorf("--%s-file %s is empty", setting, file)
	}
	return v, nil
}

// parsePrefixes reads --trusted-proxies: addresses (a range of one) or CIDR ranges.
func parsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range splitList(s) {
		prefix, err := netip.ParsePrefix(p)
		if err != nil {
			addr, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, fmt.Errorf("--trusted-proxies %q: give IP addresses or CIDR ranges, such as 10.0.0.0/8,fd00::/8", p)
			}
			prefix = netip.PrefixFrom(addr.Unmap(), addr.Unmap().BitLen())
		}
		out = append(out, prefix.Masked())
	}
	return out, nil
}

// checkOrigin says what is wrong with an origin of --oidc-endpoint-origins, or nil: it is
// scheme://host[:port] alone, https or http to a loopback address, since the server sends
// the client secret there and takes keys from there.
func checkOrigin(origin string) error {
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return errors.New("is not an origin: give scheme://host[:port] alone, such as https://idp.example.com")
	}
	if !opjwt.SecureOrLoopback(u) {
		return errors.New("is plain http off loopback: use https (plain http only to a loopback address such as 127.0.0.1)")
	}
	return nil
}

// scopePattern is an OAuth 2.0 scope token (RFC 6749, section 3.3).
var scopePattern = regexp.MustCompile(`^[\x21\x23-\x5b\x5d-\x7e]+$`)

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// secureOrLoopbackPublicURL reports whether people reach u over https, or over plain http on a
// loopback address (localhost, 127.0.0.0/8, ::1), which browsers never send anywhere else.
func secureOrLoopbackPublicURL(u *url.URL) bool {
	if u == nil || u.Scheme == "https" {
		return true
	}
	host := u.Hostname()
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
