package main

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// TestRedactDatabaseURL checks every form of a database URL a secret can hide in, each as pgx
// reads it, and that what is no secret is left as it is.
func TestRedactDatabaseURL(t *testing.T) {
	const s = secretPassword
	tests := []struct{ name, in, want string }{
		{"NoSecret", "postgres://terdut@db:5432/terdut?sslmode=verify-full", "postgres://terdut@db:5432/terdut?sslmode=verify-full"},
		{"NoUser", "postgresql://db/terdut", "postgresql://db/terdut"},
		{"MultiHost", "postgres://app@db1:5432,db2:5432/terdut?target_session_attrs=read-write", "postgres://app@db1:5432,db2:5432/terdut?target_session_attrs=read-write"},
		{"UserInfoPassword", "postgres://terdut:" + s + "@db/terdut", "postgres://terdut:xxxxx@db/terdut"},
		{"UserInfoPasswordWithAt", "postgres://terdut:" + s + "@x@db/terdut", "postgres://terdut:xxxxx@x@db/terdut"},
		{"EmptyUserInfoPassword", "postgres://terdut:@db/terdut", "postgres://terdut:xxxxx@db/terdut"},
		{"QueryPassword", "postgres://terdut@db/terdut?sslmode=require&password=" + s, "postgres://terdut@db/terdut?sslmode=require&password=xxxxx"},
		{"QueryPasswordFirst", "postgres://db/terdut?password=" + s + "&sslmode=require", "postgres://db/terdut?password=xxxxx&sslmode=require"},
		{"QueryPasswordNoPath", "postgres://db?password=" + s, "postgres://db?password=xxxxx"},
		{"QueryPasswordEncodedKey", "postgres://db/terdut?pass%77ord=" + s, "postgres://db/terdut?pass%77ord=xxxxx"},
		{"QueryPasswordUpperCase", "postgres://db/terdut?PASSWORD=" + s, "postgres://db/terdut?PASSWORD=xxxxx"},
		{"QueryPasswordSpacedKey", "postgres://db/terdut?%20password%20=" + s, "postgres://db/terdut?%20password%20=xxxxx"},
		{"QuerySSLPassword", "postgres://db/terdut?sslkey=/k.pem&sslpassword=" + s, "postgres://db/terdut?sslkey=/k.pem&sslpassword=xxxxx"},
		{"QueryOAuthClientSecret", "postgres://db/terdut?oauth_client_secret=" + s + "&oauth_client_id=t", "postgres://db/terdut?oauth_client_secret=xxxxx&oauth_client_id=t"},
		{"QueryBothPasswords", "postgres://u:" + s + "@db/terdut?password=" + s, "postgres://u:xxxxx@db/terdut?password=xxxxx"},
		{"QueryInIPv6Host", "postgres://[::1?x]/terdut?password=" + s, "postgres://[::1?x]/terdut?password=xxxxx"},
		{"QueryValueWithQuestionMark", "postgres://db/terdut?password=" + s + "?" + s + "&a=b", "postgres://db/terdut?password=xxxxx&a=b"},
		{"AtInQueryIsUserInfo", "postgres://db?x=u:" + s + "@", "postgres://db?x=u:xxxxx@"},
		{"KeywordValue", "host=db user=terdut password=" + s + " dbname=terdut", "host=db user=terdut password=xxxxx dbname=terdut"},
		{"KeywordValueQuoted", "host=db password='" + s + " with \\' spaces' dbname=terdut", "host=db password=xxxxx dbname=terdut"},
		{"KeywordValueEscaped", `host=db password=` + s + `\ x dbname=terdut`, "host=db password=xxxxx dbname=terdut"},
		{"KeywordValueSpacedEquals", "host = db  password = " + s + "\tsslpassword=" + s, "host = db  password = xxxxx\tsslpassword=xxxxx"},
		{"KeywordValueNoSecret", "host=db dbname='my db'", "host=db dbname='my db'"},
		{"KeywordValueUnterminatedQuote", "host=db password='" + s, unreadableDatabaseURL},
		{"KeywordValueNoEquals", "host=db " + s, unreadableDatabaseURL},
		{"Garbage", s, unreadableDatabaseURL},
		{"NUL", "postgres://db/terdut?x=\x00" + s, unreadableDatabaseURL},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redactDatabaseURL(tt.in)
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			mustNotContain(t, "the redacted URL", got, s)
		})
	}
}

// TestDatabaseURLSecretsNeverPrinted gives the server and its commands a database whose URL
// carries a secret in each place pgx reads one from, and checks that the secret is in no line
// they print or log: the banner, the log, the commands' output and their errors, on a database
// that answers and on one that does not.
func TestDatabaseURLSecretsNeverPrinted(t *testing.T) {
	const s = secretPassword
	base, err := url.Parse(pgtest.MustDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(base.Host)
	dbname := strings.TrimPrefix(base.Path, "/")
	// A role whose password is the secret, owning the database: the forms then reach it whether
	// the tests' Postgres trusts loopback or checks passwords (a container's).
	role := secretRole(t, base.String(), dbname)
	withQuery := func(extra string) string {
		u := *base
		u.User = url.User(role.name)
		u.RawQuery += "&" + extra
		return u.String()
	}
	userInfo := *base
	userInfo.User = url.UserPassword(role.name, s)
	sslPassword := userInfo
	sslPassword.RawQuery += "&sslpassword=" + s
	forms := []struct {
		name, url string
		password  string // the role's, for this form
		serves    bool   // the database takes it
	}{
		{"UserInfo", userInfo.String(), s, true},
		{"QueryPassword", withQuery("password=" + s), s, true},
		{"QueryPasswordEncodedKey", withQuery("pass%77ord=" + s), s, true},
		{"QuerySSLPassword", sslPassword.String(), s, true},
		{"QueryUnknownSecret", withQuery("oauth_client_secret=" + s), s, false},
		{"KeywordValue", "host=" + host + " port=" + port + " dbname=" + dbname + " user=" + role.name +
			" sslmode=disable password='" + s + " x'", s + " x", true},
	}
	closed := mustClosedPort(t)
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			role.setPassword(t, f.password)
			if got := redactDatabaseURL(f.url); strings.Contains(got, s) || got == f.url {
				t.Fatalf("redactDatabaseURL(%q) = %q, want the secret masked", f.url, got)
			}
			e := env{"TERDUT_DATABASE_URL": f.url}
			for _, args := range [][]string{{"migrate"}, {"bootstrap", "status"}} {
				r := runCmd(t, e, args...)
				if f.serves && r.Err != nil {
					t.Fatalf("terdut-server %v: %v", args, r.Err)
				}
				mustNotContainSecret(t, strings.Join(args, " "), r, s)
			}
			if f.serves {
				srv := startServe(t, e)
				if err := srv.stop(); err != nil {
					t.Fatalf("stop: %v", err)
				}
				mustNotContain(t, "the banner", srv.Stdout.String(), s)
				mustNotContain(t, "the log", srv.Stderr.String(), s)
			}
			// A database that does not answer: the errors, and the log of serve's attempt.
			down := strings.Replace(f.url, ":"+port+"/", ":"+closed+"/", 1)
			down = strings.Replace(down, "port="+port, "port="+closed, 1)
			for _, args := range [][]string{{"migrate"}, {"serve", "--listen", "127.0.0.1:0"}} {
				r := runCmd(t, env{"TERDUT_DATABASE_URL": down}, args...)
				if r.Err == nil {
					t.Fatalf("terdut-server %v on a closed port: got no error, want one", args)
				}
				mustNotContainSecret(t, strings.Join(args, " ")+" on a closed port", r, s)
			}
		})
	}
}

// mustNotContainSecret checks a command's error and output for secret.
func mustNotContainSecret(t *testing.T, what string, r result, secret string) {
	t.Helper()
	if r.Err != nil {
		mustNotContain(t, what+": the error", r.Err.Error(), secret)
	}
	mustNotContain(t, what+": stdout", r.Stdout, secret)
	mustNotContain(t, what+": stderr", r.Stderr, secret)
}

// mustClosedPort returns a loopback port nothing listens on.
func mustClosedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return port
}

// loginRole is a role made for one test.
type loginRole struct {
	name, adminURL string
}

// secretRole makes a login role that owns the database dbname, through the superuser's URL
// adminURL; the test's end reassigns what it made and drops it.
func secretRole(t *testing.T, adminURL, dbname string) loginRole {
	t.Helper()
	r := loginRole{name: "terdut_secret_" + strings.TrimPrefix(dbname, "pgtest_"), adminURL: adminURL}
	r.exec(t, `CREATE ROLE `+pgx.Identifier{r.name}.Sanitize()+` LOGIN`,
		`ALTER DATABASE `+pgx.Identifier{dbname}.Sanitize()+` OWNER TO `+pgx.Identifier{r.name}.Sanitize())
	t.Cleanup(func() {
		r.exec(t, `ALTER DATABASE `+pgx.Identifier{dbname}.Sanitize()+` OWNER TO CURRENT_USER`,
			`REASSIGN OWNED BY `+pgx.Identifier{r.name}.Sanitize()+` TO CURRENT_USER`,
			`DROP OWNED BY `+pgx.Identifier{r.name}.Sanitize(),
			`DROP ROLE `+pgx.Identifier{r.name}.Sanitize())
	})
	return r
}

func (r loginRole) setPassword(t *testing.T, password string) {
	t.Helper()
	r.exec(t, `ALTER ROLE `+pgx.Identifier{r.name}.Sanitize()+` PASSWORD '`+strings.ReplaceAll(password, "'", "''")+`'`)
}

func (r loginRole) exec(t *testing.T, statements ...string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, r.adminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx) //nolint:errcheck // closing a test connection
	for _, sql := range statements {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", strings.SplitN(sql, " PASSWORD", 2)[0], err)
		}
	}
}
