package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// parseDatabaseFlags reads the only settings the offline commands need, and returns the URL
// to connect with (and what stands between) and the arguments after the flags. Asked for help, it writes help to stdout
// and returns flag.ErrHelp.
func parseDatabaseFlags(name string, help func(*flag.FlagSet) func(io.Writer), args []string, getenv func(string) string, stdout io.Writer) (database, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	var db DatabaseConfig
	db.define(fs)
	if err := parseFlags(fs, args, help(fs), stdout); err != nil {
		return database{}, nil, err
	}
	given, err := applyEnv(fs, getenv)
	if err != nil {
		return database{}, nil, err
	}
	u, err := db.resolve(given, getenv)
	if err == nil {
		if err = store.CheckURL(u, store.WithPooler(db.Pooler)); err != nil {
			err = fmt.Errorf("--database-url: %w", err)
		}
	}
	return database{url: u, pooler: db.Pooler}, fs.Args(), err
}

// migrate applies pending migrations and exits.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	help := func(fs *flag.FlagSet) func(io.Writer) {
		return databaseHelp("terdut-server migrate [flags]", "Applies the database migrations this terdut-server ships and exits. "+
			"serve does it when it starts; migrate does it ahead of a rollout.", fs)
	}
	db, rest, err := parseDatabaseFlags("terdut-server migrate", help, args, getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("migrate takes no arguments, got %q", rest[0])
	}
	n, err := store.Migrate(ctx, db.url, db.opts()...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "applied %d migrations; the schema is current\n", n)
	return nil
}

// bootstrap acts on the claim directly in the database, for an administrator with shell
// access: the same store code and audit as the HTTP endpoints, with the actor "cli".
func bootstrap(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: terdut-server bootstrap status|claim|reset [flags] (see terdut-server bootstrap --help)")
	}
	sub := args[0]
	if isHelp(sub) {
		fmt.Fprint(stdout, bootstrapUsage)
		return nil
	}
	about, ok := bootstrapCommands[sub]
	if !ok {
		// Refuse before touching the database: opening it would migrate it.
		return fmt.Errorf("unknown bootstrap command %q: use status, claim or reset (see terdut-server bootstrap --help)", sub)
	}
	help := func(fs *flag.FlagSet) func(io.Writer) {
		return databaseHelp("terdut-server bootstrap "+sub+" [flags]", about, fs)
	}
	db, rest, err := parseDatabaseFlags("terdut-server bootstrap "+sub, help, args[1:], getenv, stdout)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return fmt.Errorf("bootstrap %s takes no arguments, got %q", sub, rest[0])
	}
	st, err := openMigrated(ctx, db, newLogger(stderr, 0))
	if err != nil {
		return err
	}
	defer st.Close()
	who := store.AuditInfo{Actor: store.ActorCLI, RemoteAddr: "local"}
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	switch sub {
	case "status":
		b, err := st.Bootstrap(ctx)
		if err != nil {
			return err
		}
		audit, err := st.BootstrapAudit(ctx)
		if err != nil {
			return err
		}
		return out.Encode(map[string]any{"state": b.State, "generation": b.Generation,
			"last_claim_at": b.LastClaimAt, "last_reset_at": b.LastResetAt,
			"recent_audit": auditJSON(audit[max(0, len(audit)-statusAuditRows):])})
	case "claim":
		res, err := st.Claim(ctx, who)
		if errors.Is(err, store.ErrAlreadyClaimed) {
			return errors.New("this install is already claimed; run `terdut-server bootstrap reset` first to reopen it")
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr, "Claimed. The API key below is shown once: store it now.")
		return out.Encode(map[string]any{"generation": res.Generation, "user_id": res.Principal.ID,
			"username": res.Principal.Username, "api_key_id": res.Key.ID, "api_key": res.Secret})
	default: // "reset", checked above
		res, err := st.Reset(ctx, who, store.RateLimit{})
		if err != nil {
			return err
		}
		fmt.Fprintln(stderr, "Reset: the install is pending again; nobody can sign in until it is claimed.")
		return out.Encode(map[string]any{"state": store.StatePending, "generation": res.Generation,
			"revoked_api_keys": res.RevokedAPIKeys, "revoked_sessions": res.RevokedSessions})
	}
}

// bootstrapCommands are what each bootstrap command does, for its --help.
var bootstrapCommands = map[string]string{
	"status": "Prints the claim's state, its generation and the newest rows of its audit as JSON.",
	"claim": "Claims the install directly in the database, as POST /api/bootstrap does, and prints the new " +
		"bootstrap principal's API key once, as JSON. Fails while the install is claimed: run bootstrap reset first.",
	"reset": "Reopens the claim directly in the database, as POST /api/bootstrap/reset does: revokes the bootstrap " +
		"principal's API keys and sessions, and nobody can sign in until the install is claimed again.",
}

// bootstrapUsage is terdut-server bootstrap --help.
const bootstrapUsage = `usage: terdut-server bootstrap status|claim|reset [flags]

Acts on the bootstrap claim directly in the database, for an administrator with shell access
(kubectl exec): the same code as the HTTP endpoints, recorded in the audit with the actor "cli".

  status   print the claim's state as JSON
  claim    claim the install; prints the new API key once, as JSON
  reset    reopen the claim: revoke the bootstrap principal's keys and sessions

Each takes the database settings: terdut-server bootstrap COMMAND --help lists them.
`

// statusAuditRows is how many of the newest audit rows `bootstrap status` shows.
const statusAuditRows = 10

type auditRow struct {
	At         time.Time `json:"at"`
	Action     string    `json:"action"`
	Actor      string    `json:"actor"`
	RemoteAddr string    `json:"remote_addr"`
	Generation int64     `json:"generation"`
	State      string    `json:"state"`
	Detail     string    `json:"detail"`
	AuthMethod string    `json:"auth_method,omitempty"` // how the operator proved itself
	Subject    string    `json:"subject,omitempty"`     // its service account, for a service_account claim
	Pod        string    `json:"pod,omitempty"`         // and the pod its token was bound to
}

func auditJSON(entries []store.AuditEntry) []auditRow {
	rows := make([]auditRow, 0, len(entries))
	for _, e := range entries {
		rows = append(rows, auditRow{At: e.At, Action: e.Action, Actor: string(e.Actor), RemoteAddr: e.RemoteAddr,
			Generation: e.Generation, State: string(e.State), Detail: e.Detail, AuthMethod: string(e.Method),
			Subject: e.Subject, Pod: e.Pod})
	}
	return rows
}
