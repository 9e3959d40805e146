package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// commandsUsage lists the commands, for --help and errors that name no command.
const commandsUsage = `Usage:
  terdut-server [serve] [flags]            serve the API (the default command)
  terdut-server migrate [flags]            apply the database migrations and exit
  terdut-server bootstrap status [flags]   print the claim's state as JSON
  terdut-server bootstrap claim [flags]    claim the install; prints the new API key once, as JSON
  terdut-server bootstrap reset [flags]    reopen the claim: revoke the bootstrap principal's keys and sessions
  terdut-server audit [flags] [actor=ID] [event=NAME] [limit=N] [before=ID]
                                           print the audit of administrative actions as JSON, newest first
  terdut-server version                    print the version (also: terdut-server --version)
  terdut-server help [COMMAND]             this help, or a command's (also: terdut-server COMMAND --help)
`

// settingsIntro says how flags and variables relate, once above the flags.
const settingsIntro = `Every flag is also a TERDUT_* variable of the same name (--database-url is TERDUT_DATABASE_URL);
a flag on the command line wins over its variable. Secrets come from files (*-file) or from variables,
never from flags. docs/settings.md describes every setting.
`

// flagGroup is an area of settings, in the order --help and docs/settings.md show them.
// Names without "--" are variables with no flag.
type flagGroup struct {
	title string
	names []string
}

var serveGroups = []flagGroup{
	{"Listeners", []string{"listen", "operator-listen", "metrics-listen", "webhook-listen", "public-url", "tls-cert-file", "tls-key-file",
		"trusted-proxies", "trusted-proxy-header", "shutdown-timeout"}},
	{"Database", databaseNames},
	{"The claim and the operator's identity", []string{"bootstrap-gate", "operator-token-file", "operator-oidc-issuer",
		"operator-oidc-audience", "operator-oidc-subjects", "operator-oidc-ca-file", "operator-oidc-issuer-token-file",
		"operator-oidc-jwks-url", "operator-oidc-token-review-url", "operator-oidc-token-review-ca-file",
		"bootstrap-reset-limit", "bootstrap-reset-window"}},
	{"Sign-in", []string{"password-login", "password-login-limit", "password-login-window", "password-hash-cost",
		"login-rate-per-ip", "session-ttl"}},
	{"Single sign-on", []string{"oidc-issuer", "oidc-client-id", "oidc-client-secret-file", "TERDUT_OIDC_CLIENT_SECRET",
		"oidc-scopes", "oidc-username-claim", "oidc-groups-claim", "oidc-allowed-groups", "oidc-admin-groups",
		"oidc-endpoint-origins", "oidc-pending-limit", "sso-key-sign-in-window"}},
	{"Limits", []string{"api-keys-per-user", "sso-api-key-max-ttl"}},
	{"Alertmanager", []string{"webhook-max-bytes", "alert-expiry-interval", "assign-on-call"}},
	{"Housekeeping", []string{"sweep-interval", "audit-retention", "retention"}},
	{"Logging", []string{"log-level", "access-log", "access-log-interval"}},
}

// databaseNames are the settings every command that opens the database takes.
var databaseNames = []string{"database-url", "database-url-file", "database-user", "database-password-file", "database-pooler", "TERDUT_DATABASE_PASSWORD"}

// variableHelp is the meaning of each variable with no flag.
var variableHelp = map[string]string{
	"TERDUT_OIDC_CLIENT_SECRET": "the OIDC client secret itself, when --oidc-client-secret-file is not set",
	"TERDUT_DATABASE_PASSWORD":  "the Postgres password itself, when --database-password-file is not set",
}

// required says when a setting must be given; the others have a usable default or are off.
var required = map[string]string{
	"database-url":            "required: this, --database-url-file or their variable",
	"tls-key-file":            "required with --tls-cert-file",
	"oidc-client-id":          "required with --oidc-issuer",
	"oidc-client-secret-file": "required with --oidc-issuer, or TERDUT_OIDC_CLIENT_SECRET",
	"operator-oidc-subjects":  "required with --operator-oidc-issuer",
}

// printFlags writes the flags of fs in groups: each with its variable, its default or when
// it is required, then what it does.
func printFlags(w io.Writer, fs *flag.FlagSet, groups []flagGroup) {
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s:\n", g.title)
		for _, name := range g.names {
			if strings.HasPrefix(name, "TERDUT_") {
				fmt.Fprintf(w, "  %s (a variable, no flag)\n", name)
				writeWrapped(w, flagIndent, variableHelp[name])
				continue
			}
			f := fs.Lookup(name)
			if f == nil {
				panic("help: no flag --" + name) // a test runs every group: never at run time
			}
			kind, usage := flag.UnquoteUsage(f)
			head := "  --" + name
			if kind != "" {
				head += " " + kind
			}
			note := envName(name)
			switch {
			case required[name] != "":
				note += ", " + required[name]
			case f.DefValue != "" && f.DefValue != "[]":
				note += ", default " + f.DefValue
			}
			fmt.Fprintf(w, "%-44s %s\n", head, note)
			writeWrapped(w, flagIndent, usage)
		}
	}
}

// flagIndent is where a flag's meaning starts, under its name.
const flagIndent = "        "

// writeWrapped writes text after indent, in lines of at most about 100 columns.
func writeWrapped(w io.Writer, indent, text string) {
	const width = 100
	line := indent
	for _, word := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(word) > width {
			fmt.Fprintln(w, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += word
	}
	fmt.Fprintln(w, line)
}

// serveHelp is terdut-server --help: the commands, then serve's flags by area.
func serveHelp(fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprint(w, "terdut-server receives Alertmanager webhooks and manages incidents.\n\n", commandsUsage, "\n", settingsIntro)
		printFlags(w, fs, serveGroups)
	}
}

// databaseHelp is the --help of a command that takes only the database settings.
func databaseHelp(usage, about string, fs *flag.FlagSet) func(io.Writer) {
	return func(w io.Writer) {
		fmt.Fprintf(w, "usage: %s\n\n", usage)
		writeWrapped(w, "", about)
		fmt.Fprintf(w, "\n%s", settingsIntro)
		printFlags(w, fs, []flagGroup{{"Database", databaseNames}})
	}
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help" || arg == "help"
}

// parseFlags parses args into fs. Asked for help, it writes help(stdout) and returns
// flag.ErrHelp (which run answers with success). Any other mistake is a short error naming
// the flag and pointing at --help, not the whole list of flags.
func parseFlags(fs *flag.FlagSet, args []string, help func(io.Writer), stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		help(stdout)
		return flag.ErrHelp
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		msg = "unknown flag --" + name
	}
	return fmt.Errorf("%s (see %s --help)", msg, fs.Name())
}
