package store

import (
	"errors"
	"net/url"
)

// ErrURLHasPassword means a password was given apart from a database URL that carries one
// already: which one counts would be a guess.
var ErrURLHasPassword = errors.New("the database URL carries a password and one is given apart")

// WithCredentials returns the database URL rawURL (postgres:// or postgresql://) with its
// user replaced by user and its password set to password, each only when not empty, for Open,
// Migrate and CheckURL. It returns ErrURLHasPassword when password is set and the URL carries
// one too. Its errors never quote the URL or the password.
func WithCredentials(rawURL, user, password string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") || u.Host == "" && u.Opaque != "" {
		return "", errors.New("a user or password given apart needs the database URL in the form postgres://[user@]host:port/dbname")
	}
	name := u.User.Username()
	_, hasPassword := u.User.Password()
	// pgx reads a password from the query too (password=...), and prefers it to the user
	// part's: one there and one given apart is as ambiguous as one in the user part.
	queryPassword := u.Query().Has("password")
	if user != "" {
		name = user
	}
	switch {
	case password != "" && (hasPassword || queryPassword):
		return "", ErrURLHasPassword
	case password != "":
		u.User = url.UserPassword(name, password)
	case hasPassword:
		p, _ := u.User.Password()
		u.User = url.UserPassword(name, p)
	default:
		u.User = url.User(name)
	}
	return u.String(), nil
}
