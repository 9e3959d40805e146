package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// Kinds of server, as Main's one line names them.
const (
	kindURL       = "URL"
	kindContainer = "container"
	kindLocal     = "local"
)

// server is a PostgreSQL server the harness may create databases on.
type server struct {
	kind     string // kindURL, kindContainer or kindLocal
	desc     string // which server, for the one line Main prints
	adminURL string
	stop     func() error

	container string // the container's ID, for kindContainer
}

// findServer returns the first server that works: the one named by EnvDatabaseURL, a
// Docker container, or a local throwaway cluster. When the container path fails, the
// local server's description says why.
func findServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		if err := ping(ctx, u); err != nil {
			return nil, fmt.Errorf("pgtest: %s is set but unusable: %w", EnvDatabaseURL, err)
		}
		return &server{kind: kindURL, desc: EnvDatabaseURL + " (" + redact(u) + ")", adminURL: u, stop: func() error { return nil }}, nil
	}
	srv, err := startContainer(ctx)
	if err == nil {
		return srv, nil
	}
	if os.Getenv(EnvRequireContainer) == "1" {
		return nil, fmt.Errorf("pgtest: %s=1 but no container: %v", EnvRequireContainer, err)
	}
	why := []string{fmt.Sprintf("  - Docker: %v", err)}
	local, lerr := startLocal(ctx)
	if lerr == nil {
		local.desc += "; no container: " + err.Error()
		return local, nil
	}
	why = append(why, fmt.Sprintf("  - local PostgreSQL binaries: %v", lerr))
	return nil, fmt.Errorf("pgtest: no PostgreSQL server for the tests. Do one of:\n"+
		"  1. set %s to an admin URL such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (not set);\n"+
		"  2. start a Docker engine that holds the image %s names (default %s; scripts/docker-engine.sh and scripts/postgres-image.sh make both);\n"+
		"  3. install the PostgreSQL server binaries (e.g. apt-get install postgresql).\n"+
		"Why the automatic ways failed:\n%s", EnvDatabaseURL, EnvPostgresImage, DefaultPostgresImage, strings.Join(why, "\n"))
}

// startLocal starts a throwaway cluster from the local PostgreSQL binaries.
func startLocal(ctx context.Context) (*server, error) {
	c, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("a throwaway local PostgreSQL cluster on 127.0.0.1:%d (%s)", c.Port, c.Dir)
	return &server{kind: kindLocal, desc: desc, adminURL: c.URL("postgres"), stop: c.Stop}, nil
}

// ping checks that url accepts connections.
func ping(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	return errors.Join(conn.Ping(ctx), conn.Close(ctx))
}

// redactHostPort returns the host and port of a URL, for messages.
func redactHostPort(s string) string {
	if u, err := url.Parse(s); err == nil {
		return u.Host
	}
	return "(unparsable URL)"
}
