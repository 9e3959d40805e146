// Command terdut-server receives Alertmanager webhooks and manages incidents.
//
//	terdut-server [serve] [flags]             serve the API (the default)
//	terdut-server migrate [flags]             apply database migrations and exit
//	terdut-server bootstrap status|claim|reset [flags]
//	                                          act on the bootstrap claim directly in the database
//	terdut-server audit [flags] [actor=ID] [event=NAME] [limit=N] [before=ID]
//	                                          print the audit of administrative actions
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/terdut-server/terdut-server/internal/gogc"
)

func main() {
	gogc.Set(os.Getenv)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "terdut-server:", err)
		os.Exit(1)
	}
}

// run is the whole program, callable from tests: it returns when ctx is cancelled (serve)
// or when the command is done.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cmd := "serve"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args, getenv, stdout, stderr)
	case "migrate":
		err = migrate(ctx, args, getenv, stdout, stderr)
	case "bootstrap":
		err = bootstrap(ctx, args, getenv, stdout, stderr)
	case "audit":
		err = audit(ctx, args, getenv, stdout, stderr)
	case "help":
		fmt.Fprintln(stdout, "usage: terdut-server [serve|migrate|bootstrap status|claim|reset|audit] [flags]; -h lists the flags")
	default:
		err = fmt.Errorf("unknown command %q: use serve, migrate, bootstrap or audit", cmd)
	}
	// -h printed the flags, as asked: that is not a failure.
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}
