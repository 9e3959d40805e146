package main

import (
	"net/url"
	"strings"
)

// redactMask stands in for a secret that redactDatabaseURL took out.
const redactMask = "xxxxx"

// unreadableDatabaseURL is redactDatabaseURL's answer for a string it cannot take apart as
// pgx does: all of it may be a secret.
const unreadableDatabaseURL = "(a database URL that cannot be read: not shown)"

// redactDatabaseURL returns the database URL or keyword/value string s as it may be shown: every
// secret in it replaced by xxxxx. It is the one judge of what of a database URL reaches output:
// the banner prints a URL only when this returns it unchanged, and nothing else prints one.
//
// It reads s as pgx does (pgconn's URL parser and keyword/value parser): the password of a URL's
// user information, which ends at the first '@' before any '/', and the value of every
// parameter whose name, percent-decoded and in any case, names a password or a secret
// (password, sslpassword, libpq's oauth_client_secret and any other), in a URL's query or as a
// keyword. In a URL it masks each such parameter after every '?' and '&', whether or not pgx
// reads the query from there, so that a query pgx starts later is masked too. A string it
// cannot read is unreadableDatabaseURL, whole.
func redactDatabaseURL(s string) string {
	if strings.IndexByte(s, 0) >= 0 {
		return unreadableDatabaseURL
	}
	for _, scheme := range []string{"postgresql://", "postgres://"} {
		if rest, ok := strings.CutPrefix(s, scheme); ok {
			return scheme + redactURLRest(rest)
		}
	}
	return redactKeywordValue(s)
}

// redactURLRest masks the user information's password and the secret query values of a URL
// after its scheme.
func redactURLRest(p string) string {
	var b strings.Builder
	if i := strings.IndexAny(p, "@/"); i >= 0 && p[i] == '@' {
		user, _, hasPassword := strings.Cut(p[:i], ":")
		b.WriteString(user)
		if hasPassword {
			b.WriteString(":" + redactMask)
		}
		b.WriteByte('@')
		p = p[i+1:]
	}
	// Every piece after a '?' or '&' is a parameter pgx may read: name=value up to the next '&'.
	for len(p) > 0 {
		i := strings.IndexAny(p, "?&")
		if i < 0 {
			b.WriteString(p)
			break
		}
		b.WriteString(p[:i+1])
		p = p[i+1:]
		end := strings.IndexByte(p, '&')
		if end < 0 {
			end = len(p)
		}
		name, _, hasValue := strings.Cut(p[:end], "=")
		decoded, err := url.PathUnescape(name)
		if hasValue && (err != nil || secretParameter(decoded)) {
			b.WriteString(name + "=" + redactMask)
			p = p[end:]
		}
		// Otherwise the piece is written as it is by the next turn, which also looks for a
		// '?' inside it.
	}
	return b.String()
}

// redactKeywordValue masks the secret values of a keyword/value string (host=db password=x),
// read as pgconn's parseKeywordValueSettings reads it: a value ends at white space unless
// quoted with ', and a backslash escapes the next byte.
func redactKeywordValue(s string) string {
	var b strings.Builder
	for {
		lead := len(s) - len(strings.TrimLeft(s, " \t\n\r\v\f"))
		b.WriteString(s[:lead])
		s = s[lead:]
		if s == "" {
			return b.String()
		}
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return unreadableDatabaseURL
		}
		key := strings.TrimSpace(s[:eq])
		if key == "" {
			return unreadableDatabaseURL
		}
		b.WriteString(s[:eq+1])
		s = s[eq+1:]
		space := len(s) - len(strings.TrimLeft(s, " \t\n\r\v\f"))
		b.WriteString(s[:space])
		s = s[space:]
		end, ok := keywordValueEnd(s)
		if !ok {
			return unreadableDatabaseURL
		}
		if secretParameter(key) {
			b.WriteString(redactMask)
		} else {
			b.WriteString(s[:end])
		}
		s = s[end:]
	}
}

// keywordValueEnd returns where the value at the start of s ends (after its closing quote),
// or false when it is unterminated.
func keywordValueEnd(s string) (int, bool) {
	if s == "" {
		return 0, true
	}
	if s[0] == '\'' {
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return i + 1, true
			}
		}
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			return i, true
		case '\\':
			if i++; i == len(s) {
				return 0, false
			}
		}
	}
	return len(s), true
}

// secretParameter reports whether a connection parameter's value is a secret: libpq's
// password, sslpassword and oauth_client_secret, and, to be safe, any other name with
// "password" or "secret" in it, in any case.
func secretParameter(name string) bool {
	name = strings.ToLower(name)
	return strings.Contains(name, "password") || strings.Contains(name, "secret")
}
