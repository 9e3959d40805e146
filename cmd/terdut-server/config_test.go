package main

import (
	"encoding/pem"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

const testDB = "postgres://terdut@db.example:5432/terdut"

// testFailoverDB lists a primary and a standby; pgx connects to whichever takes writes.
const testFailoverDB = "postgres://terdut@db-0.example:5432,db-1.example:5432/terdut?target_session_attrs=read-write"

// defaultConfig is the Config of a server given only a database URL, with its public URL
// as a string for comparison.
func defaultConfig() (Config, string) {
	return Config{Listen: ":8080", DatabaseURL: testDB, Database: DatabaseConfig{Pooler: store.PoolerNone}, BootstrapGate: true, ResetMax: 5, ResetWindow: time.Minute,
		PasswordLogin: true, LoginLimitMax: 10, LoginLimitWindow: 15 * time.Minute, PasswordCost: 12, SessionTTL: 12 * time.Hour, OIDCGroupsClaim: "groups",
		OIDCScopes: []string{"openid", "profile", "email"}, OIDCUsernameClaim: "preferred_username",
		LogLevel: slog.LevelInfo, ShutdownTimeout: 20 * time.Second,
		OperatorOIDC: OperatorOIDCConfig{Audience: "terdut-server", TokenFile: defaultServiceAccountTokenFile,
			ReviewCAFile: defaultServiceAccountCAFile},
		OIDCPendingLimit: 10000, APIKeysPerUser: 100, SSOAPIKeyMaxTTL: 2160 * time.Hour, SweepInterval: 15 * time.Minute,
		ExpiryInterval: time.Minute, WebhookMaxBytes: 32 << 20, AssignOnCall: true,
		LoginRatePerIP: 20, ForwardedHeader: "X-Forwarded-For", SSOKeySignIn: 15 * time.Minute, AuditRetention: 8760 * time.Hour, Retention: 9600 * time.Hour, AccessLog: true,
		AccessLogInterval: 100 * time.Millisecond}, "http://localhost:8080"
}

func TestParseConfig(t *testing.T) {
	urlFile := mustFile(t, "database-url", "  postgres://terdut@from-file:5432/terdut\n")
	otherURLFile := mustFile(t, "other-database-url", "postgres://terdut@other-file:5432/terdut")
	secretFile := mustFile(t, "client-secret", "client-secret-from-file\n")
	dbPasswordFile := mustFile(t, "password", "pw-from-file\n")
	caFile := mustCAFile(t)

	tests := []struct {
		name string
		args []string
		env  env
		want func(c *Config, publicURL *string)
	}{
		{name: "Defaults", env: env{"TERDUT_DATABASE_URL": testDB}},
		{name: "AuditSettings", args: []string{"--audit-retention", "0"},
			env:  env{"TERDUT_DATABASE_URL": testDB, "TERDUT_ACCESS_LOG": "false", "TERDUT_AUDIT_RETENTION": "48h"},
			want: func(c *Config, _ *string) { c.AccessLog, c.AuditRetention = false, 0 }},
		{name: "AssignOnCallOff", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_ASSIGN_ON_CALL": "false"},
			want: func(c *Config, _ *string) { c.AssignOnCall = false }},
		{name: "AccessLogInterval", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_ACCESS_LOG_INTERVAL": "0s"},
			want: func(c *Config, _ *string) { c.AccessLogInterval = 0 }},
		{name: "AuditSettingsEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_AUDIT_RETENTION": "48h"},
			want: func(c *Config, _ *string) { c.AuditRetention = 48 * time.Hour }},
		{name: "RetentionOff", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_RETENTION": "0"},
			want: func(c *Config, _ *string) { c.Retention = 0 }},
		{name: "Retention", args: []string{"--retention", "720h"}, env: env{"TERDUT_DATABASE_URL": testDB},
			want: func(c *Config, _ *string) { c.Retention = 720 * time.Hour }},
		{name: "Flags", args: []string{"--database-url", testDB, "--listen", "127.0.0.1:9000",
			"--public-url", "https://terdut.example.com/", "--bootstrap-gate=false", "--operator-token-file", "/run/token",
			"--bootstrap-reset-limit", "2", "--bootstrap-reset-window", "10m", "--password-login=false",
			"--password-hash-cost", "10", "--session-ttl", "1h", "--log-level", "debug", "--shutdown-timeout", "5s",
			"--password-login-limit", "3", "--password-login-window", "1h",
			"--oidc-pending-limit", "50", "--api-keys-per-user", "7", "--sso-api-key-max-ttl", "720h", "--sweep-interval", "1m",
			"--login-rate-per-ip", "5", "--trusted-proxies", "10.0.0.0/8, 192.0.2.7,,fd00::/8", "--trusted-proxy-header", "x-real-ip", "--sso-key-sign-in-window", "5m"},
			want: func(c *Config, publicURL *string) {
				c.LoginLimitMax, c.LoginLimitWindow, c.SSOKeySignIn = 3, time.Hour, 5*time.Minute
				c.OIDCPendingLimit, c.APIKeysPerUser, c.SSOAPIKeyMaxTTL, c.SweepInterval = 50, 7, 720*time.Hour, time.Minute
				c.LoginRatePerIP, c.ForwardedHeader = 5, "X-Real-Ip"
				c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
					netip.MustParsePrefix("fd00::/8")}
				c.Listen, *publicURL, c.BootstrapGate, c.OperatorTokenFile = "127.0.0.1:9000", "https://terdut.example.com/", false, "/run/token"
				c.ResetMax, c.ResetWindow, c.PasswordLogin, c.PasswordCost = 2, 10*time.Minute, false, 10
				c.SessionTTL, c.LogLevel, c.ShutdownTimeout = time.Hour, slog.LevelDebug, 5*time.Second
			}},
		{name: "Env", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_LISTEN": ":9090", "TERDUT_PUBLIC_URL": "https://t.example",
			"TERDUT_BOOTSTRAP_GATE": "false", "TERDUT_OPERATOR_TOKEN_FILE": "/run/token", "TERDUT_BOOTSTRAP_RESET_LIMIT": "3",
			"TERDUT_BOOTSTRAP_RESET_WINDOW": "30s", "TERDUT_PASSWORD_LOGIN": "false", "TERDUT_PASSWORD_HASH_COST": "4",
			"TERDUT_SESSION_TTL": "2h", "TERDUT_LOG_LEVEL": "warn", "TERDUT_SHUTDOWN_TIMEOUT": "1s",
			"TERDUT_PASSWORD_LOGIN_LIMIT": "20", "TERDUT_PASSWORD_LOGIN_WINDOW": "5m",
			"TERDUT_OIDC_PENDING_LIMIT": "60", "TERDUT_API_KEYS_PER_USER": "8", "TERDUT_SSO_API_KEY_MAX_TTL": "24h",
			"TERDUT_SWEEP_INTERVAL":    "30s",
			"TERDUT_LOGIN_RATE_PER_IP": "0", "TERDUT_TRUSTED_PROXIES": "10.1.2.0/24", "TERDUT_TRUSTED_PROXY_HEADER": "Forwarded", "TERDUT_SSO_KEY_SIGN_IN_WINDOW": "1h"},
			want: func(c *Config, publicURL *string) {
				c.LoginLimitMax, c.LoginLimitWindow, c.SSOKeySignIn = 20, 5*time.Minute, time.Hour
				c.OIDCPendingLimit, c.APIKeysPerUser, c.SSOAPIKeyMaxTTL, c.SweepInterval = 60, 8, 24*time.Hour, 30*time.Second
				c.LoginRatePerIP, c.TrustedProxies = 0, []netip.Prefix{netip.MustParsePrefix("10.1.2.0/24")}
				c.ForwardedHeader = "Forwarded"
				c.Listen, *publicURL, c.BootstrapGate, c.OperatorTokenFile = ":9090", "https://t.example", false, "/run/token"
				c.ResetMax, c.ResetWindow, c.PasswordLogin, c.PasswordCost = 3, 30*time.Second, false, 4
				c.SessionTTL, c.LogLevel, c.ShutdownTimeout = 2*time.Hour, slog.LevelWarn, time.Second
			}},
		{name: "FlagBeatsEnv", args: []string{"--listen", ":7000", "--bootstrap-gate=true", "--database-url", testDB},
			env:  env{"TERDUT_DATABASE_URL": "postgres://env@db/env", "TERDUT_LISTEN": ":9090", "TERDUT_BOOTSTRAP_GATE": "false"},
			want: func(c *Config, _ *string) { c.Listen = ":7000" }},
		{name: "DatabaseURLFileFlag", args: []string{"--database-url-file", urlFile},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut@from-file:5432/terdut" }},
		{name: "DatabaseURLFileEnv", env: env{"TERDUT_DATABASE_URL_FILE": urlFile},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut@from-file:5432/terdut" }},
		{name: "DatabaseURLFlagBeatsFileEnv", args: []string{"--database-url", testDB}, env: env{"TERDUT_DATABASE_URL_FILE": urlFile}},
		{name: "DatabaseURLFileFlagBeatsEnv", args: []string{"--database-url-file", urlFile}, env: env{"TERDUT_DATABASE_URL": testDB},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut@from-file:5432/terdut" }},
		{name: "DatabaseURLFileFlagBeatsFileEnv", args: []string{"--database-url-file", urlFile}, env: env{"TERDUT_DATABASE_URL_FILE": otherURLFile},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut@from-file:5432/terdut" }},
		{name: "DatabaseURLSeveralHosts", env: env{"TERDUT_DATABASE_URL": testFailoverDB},
			want: func(c *Config, _ *string) { c.DatabaseURL = testFailoverDB }},
		// A postgres-operator credentials Secret: the URL names no secret, the user and the
		// password come apart.
		{name: "DatabaseUserAndPasswordFile", args: []string{"--database-user", "zalando.user", "--database-password-file", dbPasswordFile},
			env: env{"TERDUT_DATABASE_URL": "postgres://db.example:5432/terdut?sslmode=require"},
			want: func(c *Config, _ *string) {
				c.DatabaseURL = "postgres://zalando.user:pw-from-file@db.example:5432/terdut?sslmode=require"
			}},
		{name: "DatabasePasswordFileEnvKeepsURLUser", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_DATABASE_PASSWORD_FILE": dbPasswordFile},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut:pw-from-file@db.example:5432/terdut" }},
		{name: "DatabasePasswordEnv", env: env{"TERDUT_DATABASE_URL": testFailoverDB, "TERDUT_DATABASE_PASSWORD": "p@ss/w:rd",
			"TERDUT_DATABASE_USER": "other"},
			want: func(c *Config, _ *string) {
				c.DatabaseURL = "postgres://other:p%40ss%2Fw%3Ard@db-0.example:5432,db-1.example:5432/terdut?target_session_attrs=read-write"
			}},
		{name: "DatabasePasswordFileBeatsEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_DATABASE_PASSWORD": "from-env",
			"TERDUT_DATABASE_PASSWORD_FILE": dbPasswordFile},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://terdut:pw-from-file@db.example:5432/terdut" }},
		{name: "DatabaseUserOverridesURLPassword", env: env{"TERDUT_DATABASE_URL": "postgres://a:urlpw@db.example:5432/terdut",
			"TERDUT_DATABASE_USER": "b"},
			want: func(c *Config, _ *string) { c.DatabaseURL = "postgres://b:urlpw@db.example:5432/terdut" }},
		{name: "MetricsListen", args: []string{"--metrics-listen", ":9090"}, env: env{"TERDUT_DATABASE_URL": testDB},
			want: func(c *Config, _ *string) { c.MetricsListen = ":9090" }},
		{name: "MetricsListenEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_METRICS_LISTEN": "127.0.0.1:9090"},
			want: func(c *Config, _ *string) { c.MetricsListen = "127.0.0.1:9090" }},
		{name: "OIDCSecretFile", args: []string{"--database-url", testDB, "--oidc-issuer", "https://idp.example/realms/x",
			"--oidc-client-id", "terdut", "--oidc-client-secret-file", secretFile, "--oidc-groups-claim", "roles",
			"--oidc-allowed-groups", " oncall, sre ,,", "--oidc-admin-groups", "sre",
			"--oidc-endpoint-origins", "https://idp-public.example, http://127.0.0.1:4444"},
			want: func(c *Config, _ *string) {
				c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret = "https://idp.example/realms/x", "terdut", "client-secret-from-file"
				c.OIDCOrigins = []string{"https://idp-public.example", "http://127.0.0.1:4444"}
				c.OIDCGroupsClaim, c.OIDCAllowedGroups, c.OIDCAdminGroups = "roles", []string{"oncall", "sre"}, []string{"sre"}
			}},
		{name: "OperatorOIDCFlags", args: []string{"--database-url", testDB,
			"--operator-oidc-issuer", "https://kubernetes.default.svc.cluster.local", "--operator-oidc-audience", "terdut",
			"--operator-oidc-subjects", "system:serviceaccount:a:op, system:serviceaccount:b:op", "--operator-oidc-ca-file", caFile,
			"--operator-oidc-issuer-token-file", "/run/sa/token"},
			want: func(c *Config, _ *string) {
				c.OperatorOIDC = OperatorOIDCConfig{Issuer: commaList{"https://kubernetes.default.svc.cluster.local"}, Audience: "terdut",
					Subjects: commaList{"system:serviceaccount:a:op", "system:serviceaccount:b:op"}, CAFile: caFile, TokenFile: "/run/sa/token",
					ReviewCAFile: defaultServiceAccountCAFile}
			}},
		{name: "OperatorOIDCMoveAndReview", args: []string{"--database-url", testDB,
			"--operator-oidc-issuer", "https://kubernetes.default.svc.cluster.local, https://oidc.example/cluster-1",
			"--operator-oidc-subjects", "system:serviceaccount:a:op", "--operator-oidc-ca-file", caFile,
			"--operator-oidc-token-review-url", "https://kubernetes.default.svc", "--operator-oidc-token-review-ca-file", caFile,
			"--operator-oidc-jwks-url", "https://keys.example/jwks"},
			want: func(c *Config, _ *string) {
				c.OperatorOIDC = OperatorOIDCConfig{Issuer: commaList{"https://kubernetes.default.svc.cluster.local", "https://oidc.example/cluster-1"},
					Audience: "terdut-server", Subjects: commaList{"system:serviceaccount:a:op"}, CAFile: caFile, TokenFile: defaultServiceAccountTokenFile,
					JWKSURL: "https://keys.example/jwks", ReviewURL: "https://kubernetes.default.svc", ReviewCAFile: caFile}
			}},
		{name: "OperatorOIDCEnv", env: env{"TERDUT_DATABASE_URL": testDB,
			"TERDUT_OPERATOR_OIDC_ISSUER": "https://k8s.example", "TERDUT_OPERATOR_OIDC_SUBJECTS": "system:serviceaccount:ns:op",
			"TERDUT_OPERATOR_OIDC_CA_FILE": caFile, "TERDUT_OPERATOR_OIDC_ISSUER_TOKEN_FILE": "/run/sa/token"},
			want: func(c *Config, _ *string) {
				c.OperatorOIDC = OperatorOIDCConfig{Issuer: commaList{"https://k8s.example"}, Audience: "terdut-server",
					Subjects: commaList{"system:serviceaccount:ns:op"}, CAFile: caFile, TokenFile: "/run/sa/token",
					ReviewCAFile: defaultServiceAccountCAFile}
			}},
		{name: "OIDCClaimsFlags", args: []string{"--database-url", testDB, "--oidc-scopes", "openid, email,groups",
			"--oidc-username-claim", "nickname", "--oidc-groups-claim", "realm_access.roles"},
			want: func(c *Config, _ *string) {
				c.OIDCScopes, c.OIDCUsernameClaim, c.OIDCGroupsClaim = []string{"openid", "email", "groups"}, "nickname", "realm_access.roles"
			}},
		{name: "OIDCClaimsEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_SCOPES": "profile,groups",
			"TERDUT_OIDC_USERNAME_CLAIM": "email"},
			want: func(c *Config, _ *string) { c.OIDCScopes, c.OIDCUsernameClaim = []string{"profile", "groups"}, "email" }},
		{name: "OIDCSecretEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "https://idp.example",
			"TERDUT_OIDC_CLIENT_ID": "terdut", "TERDUT_OIDC_CLIENT_SECRET": "client-secret-from-env"},
			want: func(c *Config, _ *string) {
				c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret = "https://idp.example", "terdut", "client-secret-from-env"
			}},
		{name: "OIDCIssuerLoopbackHTTP", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "http://127.0.0.1:5556/dex",
			"TERDUT_OIDC_CLIENT_ID": "terdut", "TERDUT_OIDC_CLIENT_SECRET": "s"},
			want: func(c *Config, _ *string) {
				c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret = "http://127.0.0.1:5556/dex", "terdut", "s"
			}},
		{name: "OIDCIssuerLoopbackHTTPv6", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "http://[::1]:5556",
			"TERDUT_OIDC_CLIENT_ID": "terdut", "TERDUT_OIDC_CLIENT_SECRET": "s"},
			want: func(c *Config, _ *string) {
				c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret = "http://[::1]:5556", "terdut", "s"
			}},
		{name: "PoolerEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_DATABASE_POOLER": "transaction"},
			want: func(c *Config, _ *string) { c.Database.Pooler = store.PoolerTransaction }},
		{name: "PoolerFlagURLMode", args: []string{"--database-pooler", "transaction"},
			env: env{"TERDUT_DATABASE_URL": testDB + "?default_query_exec_mode=exec"},
			want: func(c *Config, _ *string) {
				c.Database.Pooler, c.DatabaseURL = store.PoolerTransaction, testDB+"?default_query_exec_mode=exec"
			}},
		{name: "PoolerSession", args: []string{"--database-pooler", "session"}, env: env{"TERDUT_DATABASE_URL": testDB}},
		{name: "OIDCSecretFileEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "https://idp.example",
			"TERDUT_OIDC_CLIENT_ID": "terdut", "TERDUT_OIDC_CLIENT_SECRET_FILE": secretFile},
			want: func(c *Config, _ *string) {
				c.OIDCIssuer, c.OIDCClientID, c.OIDCClientSecret = "https://idp.example", "terdut", "client-secret-from-file"
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig("terdut-server", tt.args, tt.env.get, io.Discard)
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			want, wantURL := defaultConfig()
			if tt.want != nil {
				tt.want(&want, &wantURL)
			}
			if got.PublicURL == nil || got.PublicURL.String() != wantURL {
				t.Errorf("got public URL %v, want %s", got.PublicURL, wantURL)
			}
			got.PublicURL = nil
			// Where the URL came from is the banner's (TestServe_BannerClaimCommandRuns);
			// DatabaseURL is what the server connects with, and Pooler what stands between.
			got.Database = DatabaseConfig{Pooler: got.Database.Pooler}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %+v,\nwant %+v", got, want)
			}
		})
	}
}

func TestParseConfig_Invalid(t *testing.T) {
	emptyFile := mustFile(t, "empty", " \n")
	pwFile := mustFile(t, "password", secretPassword)
	db := env{"TERDUT_DATABASE_URL": testDB}
	oidc := env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "https://idp.example", "TERDUT_OIDC_CLIENT_ID": "terdut",
		"TERDUT_OIDC_CLIENT_SECRET": "s"}
	tests := []struct {
		name string
		args []string
		env  env
		want []string // every one must be in the error
	}{
		{name: "ErrNoDatabase", want: []string{"no database", "--database-url", "TERDUT_DATABASE_URL", "TERDUT_DATABASE_URL_FILE",
			"--database-password-file", `TERDUT_DATABASE_URL="$(scripts/devdb.sh url)" bin/terdut-server`}},
		{name: "ErrDatabasePasswordTwice", args: []string{"--database-password-file", pwFile},
			env:  env{"TERDUT_DATABASE_URL": "postgres://terdut:" + secretPassword + "@db.example/terdut"},
			want: []string{"--database-url carries a password and --database-password-file gives one too", "remove it from the URL"}},
		{name: "ErrDatabasePasswordEnvTwice", env: env{"TERDUT_DATABASE_URL": "postgres://terdut:" + secretPassword + "@db.example/terdut",
			"TERDUT_DATABASE_PASSWORD": "other"},
			want: []string{"--database-url carries a password and TERDUT_DATABASE_PASSWORD gives one too"}},
		{name: "ErrDatabasePasswordKeywordValue", env: env{"TERDUT_DATABASE_URL": "host=db.example user=terdut", "TERDUT_DATABASE_PASSWORD_FILE": pwFile},
			want: []string{"--database-url", "postgres://[user@]host:port/dbname"}},
		{name: "ErrDatabasePasswordFileEmpty", args: []string{"--database-password-file", emptyFile}, env: db,
			want: []string{"--database-password-file", "is empty"}},
		{name: "ErrDatabasePasswordFileMissing", args: []string{"--database-password-file", "/nonexistent/terdut-db-password"}, env: db,
			want: []string{"--database-password-file", "/nonexistent/terdut-db-password"}},
		{name: "ErrMetricsListenIsListen", args: []string{"--listen", ":8080", "--metrics-listen", ":8080"}, env: db,
			want: []string{"--metrics-listen :8080", "a port of its own"}},
		{name: "ErrDatabaseURLSeveralHostsAnyServer", env: env{"TERDUT_DATABASE_URL": "postgres://terdut@h1:5432,h2:5432/terdut"},
			want: []string{"--database-url", "lists 2 hosts", "target_session_attrs=read-write"}},
		{name: "ErrDatabaseURLMalformed", env: env{"TERDUT_DATABASE_URL": "postgres://terdut@[::1/terdut"},
			want: []string{"--database-url", "database URL", "malformed"}},
		{name: "ErrPooler", args: []string{"--database-pooler", "statement"}, env: db,
			want: []string{"-database-pooler", `"statement"`, "none", "transaction"}},
		{name: "ErrPoolerEnv", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_DATABASE_POOLER": "pgbouncer"},
			want: []string{"TERDUT_DATABASE_POOLER", "none", "transaction"}},
		{name: "ErrPoolerNamedStatements", args: []string{"--database-pooler", "transaction"},
			env:  env{"TERDUT_DATABASE_URL": testDB + "?default_query_exec_mode=cache_statement"},
			want: []string{"--database-url", "default_query_exec_mode=cache_statement", "transaction-mode pooler"}},
		{name: "ErrPoolerDescribeExec", args: []string{"--database-pooler", "transaction"},
			env:  env{"TERDUT_DATABASE_URL": testDB + "?default_query_exec_mode=describe_exec"},
			want: []string{"--database-url", "default_query_exec_mode=describe_exec", "transaction-mode pooler"}},
		{name: "ErrUnknownFlag", args: []string{"--no-such-setting"}, env: db, want: []string{"-no-such-setting"}},
		{name: "ErrArgument", args: []string{"--listen", ":1", "extra"}, env: db, want: []string{`unexpected argument "extra"`}},
		{name: "ErrFlagValue", args: []string{"--session-ttl", "forever"}, env: db, want: []string{"-session-ttl", "forever"}},
		{name: "ErrAuditRetention", args: []string{"--audit-retention", "1h"}, env: db, want: []string{"--audit-retention 1h0m0s", "at least 24h"}},
		{name: "ErrRetention", args: []string{"--retention", "23h"}, env: db, want: []string{"--retention 23h0m0s", "at least 24h"}},
		{name: "ErrRetentionNegative", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_RETENTION": "-1h"}, want: []string{"--retention -1h0m0s", "at least 24h"}},
		{name: "ErrEnvDuration", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_SESSION_TTL": "forever"}, want: []string{"TERDUT_SESSION_TTL", "forever"}},
		{name: "ErrEnvBool", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_BOOTSTRAP_GATE": "maybe"}, want: []string{"TERDUT_BOOTSTRAP_GATE", "maybe"}},
		{name: "ErrEnvInt", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_PASSWORD_HASH_COST": "high"}, want: []string{"TERDUT_PASSWORD_HASH_COST"}},
		{name: "ErrLogLevel", args: []string{"--log-level", "loud"}, env: db, want: []string{`--log-level "loud"`, "debug, info, warn or error"}},
		{name: "ErrPublicURLScheme", args: []string{"--public-url", "ftp://terdut.example"}, env: db, want: []string{"--public-url", "http:// or https://"}},
		{name: "ErrPublicURLRelative", args: []string{"--public-url", "terdut.example"}, env: db, want: []string{"--public-url"}},
		{name: "ErrPasswordCost", args: []string{"--password-hash-cost", "99"}, env: db, want: []string{"--password-hash-cost 99", "4 to 31"}},
		{name: "ErrSessionTTL", args: []string{"--session-ttl", "10s"}, env: db, want: []string{"--session-ttl", "at least 1m"}},
		{name: "ErrResetLimit", args: []string{"--bootstrap-reset-limit", "0"}, env: db, want: []string{"--bootstrap-reset-limit"}},
		{name: "ErrResetWindow", args: []string{"--bootstrap-reset-window", "0s"}, env: db, want: []string{"--bootstrap-reset-window"}},
		{name: "ErrLoginLimit", args: []string{"--password-login-limit", "0"}, env: db, want: []string{"--password-login-limit"}},
		{name: "ErrLoginWindow", args: []string{"--password-login-window", "-1m"}, env: db, want: []string{"--password-login-window"}},
		{name: "ErrOIDCPendingLimit", args: []string{"--oidc-pending-limit", "0"}, env: db, want: []string{"--oidc-pending-limit 0", "at least 1"}},
		{name: "ErrAPIKeysPerUser", args: []string{"--api-keys-per-user", "-1"}, env: db, want: []string{"--api-keys-per-user -1", "at least 1"}},
		{name: "ErrSSOAPIKeyMaxTTL", args: []string{"--sso-api-key-max-ttl", "30s"}, env: db, want: []string{"--sso-api-key-max-ttl", "at least 1m"}},
		{name: "ErrSSOKeySignInWindow", args: []string{"--sso-key-sign-in-window", "0s"}, env: db, want: []string{"--sso-key-sign-in-window", "at least 1m"}},
		{name: "ErrEnvSSOAPIKeyMaxTTL", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_SSO_API_KEY_MAX_TTL": "90d"},
			want: []string{"TERDUT_SSO_API_KEY_MAX_TTL", "90d"}},
		{name: "ErrSweepInterval", args: []string{"--sweep-interval", "0s"}, env: db, want: []string{"--sweep-interval", "at least 1s"}},
		{name: "ErrAccessLogInterval", args: []string{"--access-log-interval", "-1s"}, env: db, want: []string{"--access-log-interval", "0 (each line at once) or more"}},
		{name: "ErrLoginRatePerIP", args: []string{"--login-rate-per-ip", "-1"}, env: db, want: []string{"--login-rate-per-ip -1"}},
		{name: "ErrTrustedProxies", args: []string{"--trusted-proxies", "10.0.0.0/8,proxy.internal"}, env: db,
			want: []string{`--trusted-proxies "proxy.internal"`, "CIDR"}},
		{name: "ErrTrustedProxyHeader", args: []string{"--trusted-proxy-header", "X-Client-IP"}, env: db,
			want: []string{`--trusted-proxy-header "X-Client-IP"`, "X-Forwarded-For, Forwarded or X-Real-IP"}},
		{name: "ErrDatabaseURLFileMissing", args: []string{"--database-url-file", "/nonexistent/terdut-db-url"}, want: []string{"--database-url-file", "/nonexistent/terdut-db-url"}},
		{name: "ErrDatabaseURLFileEmpty", env: env{"TERDUT_DATABASE_URL_FILE": emptyFile}, want: []string{"--database-url-file", "is empty"}},
		{name: "ErrOIDCSecretFileEmpty", args: []string{"--oidc-client-secret-file", emptyFile}, env: oidc, want: []string{"--oidc-client-secret-file", "is empty"}},
		{name: "ErrOIDCIssuer", args: []string{"--oidc-issuer", "idp.example"}, env: oidc, want: []string{`--oidc-issuer "idp.example"`}},
		{name: "ErrOIDCIssuerHTTP", args: []string{"--oidc-issuer", "http://idp.example"}, env: oidc,
			want: []string{`--oidc-issuer "http://idp.example": use https`}},
		{name: "ErrOIDCIssuerHTTPLocalhostName", args: []string{"--oidc-issuer", "http://localhost:5556"}, env: oidc,
			want: []string{`--oidc-issuer "http://localhost:5556": use https`}},
		{name: "ErrOIDCEndpointOrigins", args: []string{"--oidc-endpoint-origins", "http://idp.example,https://idp.example/path,http://127.0.0.1:4444"}, env: oidc,
			want: []string{`--oidc-endpoint-origins: "http://idp.example" is plain http off loopback`,
				`--oidc-endpoint-origins: "https://idp.example/path" is not an origin`}},
		{name: "ErrOIDCIssuerScheme", args: []string{"--oidc-issuer", "ftp://idp.example"}, env: oidc,
			want: []string{`--oidc-issuer "ftp://idp.example"`, "absolute URL"}},
		{name: "ErrOIDCIssuerQuery", args: []string{"--oidc-issuer", "https://idp.example/?realm=x"}, env: oidc,
			want: []string{`--oidc-issuer "https://idp.example/?realm=x"`, "without credentials, query or fragment"}},
		{name: "ErrOIDCIncomplete", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OIDC_ISSUER": "https://idp.example"},
			want: []string{"--oidc-client-id is not", "no client secret: set --oidc-client-secret-file"}},
		{name: "ErrOIDCScopes", args: []string{"--oidc-scopes", `openid,"groups",a b`}, env: oidc,
			want: []string{`--oidc-scopes: "\"groups\"" is not a scope`, `--oidc-scopes: "a b" is not a scope`}},
		{name: "ErrOIDCUsernameClaim", args: []string{"--oidc-username-claim", ""}, env: oidc,
			want: []string{"--oidc-username-claim is empty"}},
		{name: "ErrOIDCGroupsClaim", args: []string{"--oidc-groups-claim", "", "--oidc-allowed-groups", "sre"}, env: oidc,
			want: []string{"--oidc-groups-claim is empty"}},
		{name: "ErrOperatorOIDCNoSubjects", env: env{"TERDUT_DATABASE_URL": testDB, "TERDUT_OPERATOR_OIDC_ISSUER": "https://k8s.example"},
			want: []string{"--operator-oidc-issuer is set but --operator-oidc-subjects is not"}},
		{name: "ErrOperatorOIDCIssuer", args: []string{"--operator-oidc-issuer", "kubernetes.default.svc", "--operator-oidc-subjects", "s"}, env: db,
			want: []string{`--operator-oidc-issuer "kubernetes.default.svc"`}},
		{name: "ErrOperatorOIDCIssuerHTTP", args: []string{"--operator-oidc-issuer", "http://kubernetes.default.svc", "--operator-oidc-subjects", "s"}, env: db,
			want: []string{`--operator-oidc-issuer "http://kubernetes.default.svc": use https`}},
		{name: "ErrOperatorOIDCAudience", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-audience", ""}, env: db, want: []string{"--operator-oidc-audience is empty"}},
		{name: "ErrOperatorOIDCCAFileMissing", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-ca-file", "/nonexistent/ca.crt"}, env: db, want: []string{"--operator-oidc-ca-file /nonexistent/ca.crt"}},
		{name: "ErrOperatorOIDCCAFileNotPEM", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-ca-file", emptyFile}, env: db, want: []string{"--operator-oidc-ca-file", "no PEM certificate"}},
		{name: "ErrOperatorOIDCSecondIssuerHTTP", args: []string{"--operator-oidc-issuer", "https://k8s.example,http://old.example", "--operator-oidc-subjects", "s"}, env: db,
			want: []string{`--operator-oidc-issuer "http://old.example": use https`}},
		{name: "ErrOperatorOIDCJWKSURLHTTP", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-jwks-url", "http://keys.example/jwks"}, env: db, want: []string{"--operator-oidc-jwks-url", "https"}},
		{name: "ErrOperatorOIDCReviewHTTP", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-token-review-url", "http://kubernetes.default.svc"}, env: db, want: []string{"--operator-oidc-token-review-url", "https URL"}},
		{name: "ErrOperatorOIDCReviewCAMissing", args: []string{"--operator-oidc-issuer", "https://k8s.example", "--operator-oidc-subjects", "s",
			"--operator-oidc-token-review-url", "https://kubernetes.default.svc", "--operator-oidc-token-review-ca-file", "/nonexistent/ca.crt"}, env: db,
			want: []string{"--operator-oidc-token-review-url", "/nonexistent/ca.crt"}},
		{name: "ErrOperatorOIDCReviewWithoutIssuer", args: []string{"--operator-oidc-token-review-url", "https://kubernetes.default.svc"}, env: db,
			want: []string{"--operator-oidc-token-review-url is set but --operator-oidc-issuer is not"}},
		{name: "ErrOperatorOIDCSubjectsWithoutIssuer", args: []string{"--operator-oidc-subjects", "s"}, env: db,
			want: []string{"--operator-oidc-subjects is set but --operator-oidc-issuer is not"}},
		{name: "ErrSeveral", args: []string{"--password-hash-cost", "1", "--session-ttl", "1s"},
			want: []string{"no database", "--password-hash-cost 1", "--session-ttl"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseConfig("terdut-server", tt.args, tt.env.get, io.Discard)
			if err == nil {
				t.Fatalf("got no error, want one mentioning %q", tt.want)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("got error %q, want it to mention %q", err, w)
				}
			}
			mustNotContain(t, "the error", err.Error(), secretPassword)
		})
	}
}

// mustCAFile writes a PEM certificate (of a throwaway TLS server) to a file and returns its path.
func mustCAFile(t *testing.T) string {
	t.Helper()
	srv := httptest.NewTLSServer(http.NotFoundHandler())
	defer srv.Close()
	return mustFile(t, "ca.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
}
