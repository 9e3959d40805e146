package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/terdut-server/terdut-server/internal/pglocal"
)

// dockerProbeTimeout bounds the check whether a Docker engine answers.
const dockerProbeTimeout = 3 * time.Second

// server is a PostgreSQL server the harness may create databases on.
type server struct {
	desc     string // which kind of server, for the one line Main prints
	adminURL string
	stop     func() error
}

// findServer returns the first server that works: the one named by
// EnvDatabaseURL, a Docker container, or a local throwaway cluster.
func findServer(ctx context.Context) (*server, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		if err := ping(ctx, u); err != nil {
			return nil, fmt.Errorf("pgtest: %s is set but unusable: %w", EnvDatabaseURL, err)
		}
		return &server{desc: EnvDatabaseURL + " (" + redact(u) + ")", adminURL: u, stop: func() error { return nil }}, nil
	}
	var why []string
	srv, err := startContainer(ctx)
	if err == nil {
		return srv, nil
	}
	why = append(why, fmt.Sprintf("  - Docker: %v", err))
	if srv, err = startLocal(ctx); err == nil {
		return srv, nil
	}
	why = append(why, fmt.Sprintf("  - local PostgreSQL binaries: %v", err))
	return nil, fmt.Errorf("pgtest: no PostgreSQL server for the tests. Do one of:\n"+
		"  1. set %s to an admin URL such as postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable (not set);\n"+
		"  2. start a Docker engine (tests then run postgres:15-alpine);\n"+
		"  3. install the PostgreSQL server binaries (e.g. apt-get install postgresql).\n"+
		"Why the automatic ways failed:\n%s", EnvDatabaseURL, strings.Join(why, "\n"))
}

// startContainer runs postgres:15-alpine with testcontainers if, and only if,
// a Docker engine answers within dockerProbeTimeout; nothing is pulled otherwise.
func startContainer(ctx context.Context) (*server, error) {
	probeCtx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	if err := probeDocker(probeCtx); err != nil {
		return nil, fmt.Errorf("no Docker engine answered: %w", err)
	}
	ctr, err := tcpostgres.Run(ctx, "postgres:15-alpine",
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300"),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp")),
	)
	stop := func() error { return testcontainers.TerminateContainer(ctr) }
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("start postgres:15-alpine container: %w", err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	return &server{desc: "a postgres:15-alpine container (testcontainers)", adminURL: u, stop: stop}, nil
}

// probeDocker returns nil if a Docker engine answers a ping.
func probeDocker(ctx context.Context) error {
	type result struct{ err error }
	done := make(chan result, 1)
	go func() { // the client may block past ctx while it looks for an engine
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err == nil {
			_, err = cli.Ping(ctx, client.PingOptions{})
			_ = cli.Close()
		}
		done <- result{err}
	}()
	select {
	case r := <-done:
		return r.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// startLocal starts a throwaway cluster from the local PostgreSQL binaries.
func startLocal(ctx context.Context) (*server, error) {
	c, err := pglocal.Start(ctx, pglocal.Options{})
	if err != nil {
		return nil, err
	}
	desc := fmt.Sprintf("a throwaway local PostgreSQL cluster on 127.0.0.1:%d (%s)", c.Port, c.Dir)
	return &server{desc: desc, adminURL: c.URL("postgres"), stop: c.Stop}, nil
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
