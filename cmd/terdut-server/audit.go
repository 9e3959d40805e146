package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/terdut-server/terdut-server/internal/api"
)

// audit prints the audit of administrative actions from the database, newest first, as JSON:
// the page GET /api/audit answers, with the same filters, given as name=value arguments
// (actor=5, event=user.*, limit=100, before=1234).
func audit(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	help := func(fs *flag.FlagSet) func(io.Writer) {
		return databaseHelp("terdut-server audit [flags] [actor=ID] [event=NAME] [limit=N] [before=ID]",
			"Prints the audit of administrative actions as JSON, newest first: the page GET /api/audit answers, "+
				"with the same filters (actor=5, event=user.*, limit=100, before=1234).", fs)
	}
	db, rest, err := parseDatabaseFlags("terdut-server audit", help, args, getenv, stdout)
	if err != nil {
		return err
	}
	filters := map[string]string{}
	for _, a := range rest {
		name, value, ok := strings.Cut(a, "=")
		switch name {
		case "actor", "event", "limit", "before":
		default:
			ok = false
		}
		if !ok {
			return fmt.Errorf("audit: %q is not a filter: use actor=, event=, limit= or before=", a)
		}
		filters[name] = value
	}
	q, problem := api.ParseEventQuery(func(name string) string { return filters[name] })
	if problem != "" {
		return fmt.Errorf("audit: %s", problem)
	}
	st, err := openMigrated(ctx, db, newLogger(stderr, 0))
	if err != nil {
		return err
	}
	defer st.Close()
	events, err := st.Events(ctx, api.PageQuery(q))
	if err != nil {
		return err
	}
	out := json.NewEncoder(stdout)
	out.SetIndent("", "  ")
	return out.Encode(api.NewAuditPage(events, q))
}
