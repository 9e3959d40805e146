package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/terdut-server/terdut-server/internal/store"
)

// orRunClaim is the start-up banner's other way to claim: `bootstrap claim` as a command line
// that runs as written in a shell on this host, with this server's database settings, or,
// where they hold a secret that must not be printed, the settings it needs.
func orRunClaim(db DatabaseConfig) string {
	if line, ok := cliCommand(db, "bootstrap claim"); ok {
		return "Or run:\n  " + line + "\n"
	}
	return "Or run `" + selfName() + " bootstrap claim` with this server's database settings: it reads the same " +
		"--database-url or TERDUT_DATABASE_URL (not printed here: it carries a password or another secret; " +
		"--database-password-file or a URL file keeps it out of the banner).\n"
}

// cliCommand returns a command line that runs `terdut-server args` against the database of db
// as written: the program as it was started, and the database settings as variables, the
// files by their absolute paths. ok is false when a setting is itself a secret (a URL or
// keyword/value string that carries a password or another secret anywhere, or
// TERDUT_DATABASE_PASSWORD), which is never printed.
func cliCommand(db DatabaseConfig, args string) (line string, ok bool) {
	var env []string
	if db.URLFile != "" {
		env = append(env, "TERDUT_DATABASE_URL_FILE="+shellQuote(absPath(db.URLFile)))
	} else {
		if redactDatabaseURL(db.URL) != db.URL {
			return "", false // a secret anywhere in it (redactDatabaseURL judges)
		}
		env = append(env, "TERDUT_DATABASE_URL="+shellQuote(db.URL))
	}
	if db.User != "" {
		env = append(env, "TERDUT_DATABASE_USER="+shellQuote(db.User))
	}
	if db.Pooler != "" && db.Pooler != store.PoolerNone {
		env = append(env, "TERDUT_DATABASE_POOLER="+shellQuote(string(db.Pooler)))
	}
	switch {
	case db.PasswordFile != "":
		env = append(env, "TERDUT_DATABASE_PASSWORD_FILE="+shellQuote(absPath(db.PasswordFile)))
	case db.PasswordVar:
		return "", false
	}
	return strings.Join(env, " ") + " " + selfName() + " " + args, true
}

// selfName is how to run this program: the path it was started by (bin/terdut-server under
// make run, /terdut-server in the image), made absolute; or terdut-server, from PATH, when
// it runs under another name (a test binary).
func selfName() string {
	name := os.Args[0]
	if filepath.Base(name) != "terdut-server" {
		return "terdut-server"
	}
	if strings.ContainsRune(name, filepath.Separator) {
		return shellQuote(absPath(name))
	}
	return name
}

func absPath(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		return abs
	}
	return p
}

// shellPlain is what a POSIX shell reads as itself, unquoted.
var shellPlain = regexp.MustCompile(`^[A-Za-z0-9@%+=:,./_-]+$`)

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if shellPlain.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
