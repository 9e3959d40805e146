// Command terdut-server receives Alertmanager webhooks and manages incidents.
//
//	terdut-server [serve] [flags]             serve the API (the default)
//	terdut-server migrate [flags]             apply database migrations and exit
//	terdut-server bootstrap status|claim|reset [flags]
//	                                          act on the bootstrap claim directly in the database
//	terdut-server audit [flags] [actor=ID] [event=NAME] [limit=N] [before=ID]
//	                                          print the audit of administrative actions
//	terdut-server version                     print the version (also --version)
//	terdut-server help [command]              the commands and the flags (also --help)
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
	} else if len(args) > 0 && (args[0] == "--version" || args[0] == "-version") {
		cmd, args = "version", args[1:]
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
	case "version":
		err = printVersion(stdout, args)
	case "help":
		// help COMMAND is COMMAND --help; help alone is serve's, which lists the commands too.
		if len(args) > 0 && args[0] != "help" {
			return run(ctx, []string{args[0], "--help"}, getenv, stdout, stderr)
		}
		err = serve(ctx, []string{"--help"}, getenv, stdout, stderr)
	default:
		err = fmt.Errorf("unknown command %q: use serve, migrate, bootstrap, audit or version (see terdut-server --help)", cmd)
	}
	// --help printed the help, as asked: that is not a failure.
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}
