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

// parseDatabaseFlags reads the only settings the offline commands need.
func parseDatabaseFlags(name string, args []string, getenv func(string) string, stderr io.Writer) (database, []string, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database-url", "", "Postgres URL")
	file := fs.String("database-url-file", "", "file holding the Postgres URL")
	var pooler store.Pooler
	fs.TextVar(&pooler, "database-pooler", store.PoolerNone, poolerUsage)
	if err := fs.Parse(args); err != nil {
		return database{}, nil, err
	}
	given, err := applyEnv(fs, getenv)
	if err != nil {
		return database{}, nil, err
	}
	u, err := valueOrFile(given, *url, *file, "database-url")
	if err == nil && u == "" {
		err = errors.New("no database: set --database-url or TERDUT_DATABASE_URL (or TERDUT_DATABASE_URL_FILE)")
	} else if err == nil {
		if err = store.CheckURL(u, store.WithPooler(pooler)); err != nil {
			err = fmt.Errorf("--database-url: %w", err)
		}
	}
	return database{url: u, pooler: pooler}, fs.Args(), err
}

// migrate applies pending migrations and exits.
func migrate(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	db, rest, err := parseDatabaseFlags("terdut-server migrate", args, getenv, stderr)
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
		return errors.New("usage: terdut-server bootstrap status|claim|reset [--database-url URL]")
	}
	sub := args[0]
	if sub != "status" && sub != "claim" && sub != "reset" {
		// Refuse before touching the database: opening it would migrate it.
		return fmt.Errorf("unknown bootstrap command %q: use status, claim or reset", sub)
	}
	db, rest, err := parseDatabaseFlags("terdut-server bootstrap "+sub, args[1:], getenv, stderr)
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
