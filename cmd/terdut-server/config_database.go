package main

import (
	"errors"
	"flag"
	"fmt"

	"github.com/terdut-server/terdut-server/internal/store"
)

// DatabaseConfig is where the database URL and its credentials come from. The URL may carry
// them, or, as a credentials Secret of an operator such as Zalando's postgres-operator holds
// them (username and password), come without a password that --database-user and
// --database-password-file (or TERDUT_DATABASE_PASSWORD) then supply.
type DatabaseConfig struct {
	URL          string // the URL as given, from --database-url or its file
	URLFile      string // --database-url-file, when the URL came from a file
	User         string // --database-user; empty: the URL's
	PasswordFile string // --database-password-file
	// PasswordVar is whether the password came from TERDUT_DATABASE_PASSWORD, which, being a
	// secret, is a variable alone and never a flag.
	PasswordVar bool
	Pooler      store.Pooler // --database-pooler: what stands between terdut-server and Postgres
}

// define adds the --database-* flags, which serve and the offline commands share.
func (c *DatabaseConfig) define(fs *flag.FlagSet) {
	fs.StringVar(&c.URL, "database-url", "", "Postgres URL, such as postgres://terdut@localhost:5432/terdut; its password, if it carries one, is better kept in --database-url-file or --database-password-file")
	fs.StringVar(&c.URLFile, "database-url-file", "", "file holding the Postgres URL, instead of --database-url")
	fs.StringVar(&c.User, "database-user", "", "user to connect to Postgres as, instead of the URL's (such as the username of a postgres-operator credentials Secret)")
	fs.StringVar(&c.PasswordFile, "database-password-file", "", "file holding the Postgres password, for a URL without one (such as the password of a postgres-operator credentials Secret); TERDUT_DATABASE_PASSWORD gives it as a variable")
	fs.TextVar(&c.Pooler, "database-pooler", store.PoolerNone, poolerUsage)
}

// resolve returns the URL to connect with: the URL (or its file's), with the user and the
// password set when they are given apart. Its errors never quote the URL or the password.
func (c *DatabaseConfig) resolve(given map[string]bool, getenv func(string) string) (string, error) {
	u, err := valueOrFile(given, c.URL, c.URLFile, "database-url")
	if err != nil {
		return "", err
	}
	if given["database-url"] && !given["database-url-file"] {
		c.URLFile = "" // the command line's URL won over the variable's file
	}
	c.URL = u
	if u == "" {
		return "", errNoDatabase
	}
	envPassword := getenv("TERDUT_DATABASE_PASSWORD")
	password, err := fromFile(envPassword, c.PasswordFile, "database-password")
	if err != nil {
		return "", err
	}
	c.PasswordVar = c.PasswordFile == "" && envPassword != ""
	if c.User == "" && password == "" {
		return u, nil
	}
	withCreds, err := store.WithCredentials(u, c.User, password)
	switch {
	case errors.Is(err, store.ErrURLHasPassword):
		return "", fmt.Errorf("--database-url carries a password and %s gives one too: keep the password in one place (remove it from the URL)", c.passwordSetting())
	case err != nil:
		return "", fmt.Errorf("--database-url: %w", err)
	}
	return withCreds, nil
}

// passwordSetting names where the separate password came from.
func (c *DatabaseConfig) passwordSetting() string {
	if c.PasswordFile != "" {
		return "--database-password-file"
	}
	return "TERDUT_DATABASE_PASSWORD"
}

// errNoDatabase says where the database URL comes from, including under `make run`.
var errNoDatabase = errors.New("no database: set --database-url, TERDUT_DATABASE_URL or TERDUT_DATABASE_URL_FILE " +
	"(with the password in the URL, or in --database-password-file or TERDUT_DATABASE_PASSWORD), " +
	"e.g. postgres://terdut@localhost:5432/terdut; for the development database of `make run`, from the repository: " +
	`TERDUT_DATABASE_URL="$(scripts/devdb.sh url)" bin/terdut-server COMMAND`)
