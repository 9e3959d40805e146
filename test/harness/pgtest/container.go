package pgtest

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	tclog "github.com/testcontainers/testcontainers-go/log"
	tcpostgres "github.com/testcontainers/testcontainers-go/modules/postgres"
	"github.com/testcontainers/testcontainers-go/wait"
)

// Settings of the container path.
const (
	// EnvPostgresImage names the PostgreSQL image; it must keep the official postgres
	// image's interface (scripts/postgres-image.sh builds one with no registry).
	EnvPostgresImage = "TERDUT_TEST_POSTGRES_IMAGE"
	// EnvPull set to 1 lets the engine pull the image when it does not have it. pgtest
	// pulls nothing otherwise, so that an engine with no registry falls back at once.
	EnvPull = "TERDUT_TEST_POSTGRES_PULL"
	// EnvRequireContainer set to 1 makes Main fail, instead of falling back to the local
	// binaries, when it cannot run the image (CI sets it to prove the container path).
	EnvRequireContainer = "TERDUT_TEST_REQUIRE_CONTAINER"
	// EnvVerbose set to 1 keeps testcontainers-go's own log lines.
	EnvVerbose = "TERDUT_TEST_DOCKER_VERBOSE"
	// envRyukDisabled is testcontainers-go's switch for its reaper, Ryuk.
	envRyukDisabled = "TESTCONTAINERS_RYUK_DISABLED"
)

// DefaultPostgresImage is the image used when EnvPostgresImage is unset.
const DefaultPostgresImage = "postgres:15-alpine"

// dockerProbeTimeout bounds the check whether a Docker engine answers.
const dockerProbeTimeout = 3 * time.Second

// startContainer runs the PostgreSQL image with testcontainers-go when a Docker engine
// answers within dockerProbeTimeout and holds the image. The container is labelled with
// this process as its owner, publishes on 127.0.0.1 for a local engine, and is removed by
// stop, or by this process's reaper when it ends without calling stop.
func startContainer(ctx context.Context) (*server, error) {
	image := os.Getenv(EnvPostgresImage)
	if image == "" {
		image = DefaultPostgresImage
	}
	cli, err := engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("no Docker engine answered: %w", err)
	}
	defer cli.Close()
	daemon := cli.DaemonHost()
	host, err := publishedHost(daemon, os.Getenv(EnvHostOverride))
	if err != nil {
		return nil, err
	}
	_ = os.Setenv(EnvHostOverride, host) // testcontainers-go reads it to build the URL
	if _, err := sweep(ctx, cli.Client); err != nil {
		return nil, fmt.Errorf("engine at %s: remove earlier runs' leftovers: %w", daemon, err)
	}
	if _, err := cli.ImageInspect(ctx, image); err != nil {
		if !errdefs.IsNotFound(err) {
			return nil, fmt.Errorf("engine at %s: inspect image %s: %w", daemon, image, err)
		}
		if os.Getenv(EnvPull) != "1" {
			return nil, fmt.Errorf("the engine at %s has no image %s (pgtest pulls only with %s=1; "+
				"scripts/postgres-image.sh builds terdut-test/postgres:15 with no registry, then set %s to it)",
				daemon, image, EnvPull, EnvPostgresImage)
		}
	}
	owner, stopReaper, err := ensureReaper(daemon)
	if err != nil {
		return nil, err
	}
	ctr, err := tcpostgres.Run(ctx, image,
		tcpostgres.WithDatabase("postgres"),
		tcpostgres.WithUsername("postgres"),
		tcpostgres.WithPassword("postgres"),
		testcontainers.WithLabels(map[string]string{labelHarness: "1", labelOwner: owner}),
		testcontainers.WithHostConfigModifier(func(hc *container.HostConfig) {
			// Docker's 64 MB /dev/shm is too small for parallel queries.
			hc.ShmSize = 256 << 20
			// Publish on loopback only: nothing else may reach the server.
			if isLoopback(host) {
				hc.PortBindings = network.PortMap{
					network.MustParsePort("5432/tcp"): {{HostIP: netip.MustParseAddr("127.0.0.1")}},
				}
			}
		}),
		testcontainers.WithCmd("postgres", "-c", "fsync=off", "-c", "synchronous_commit=off",
			"-c", "full_page_writes=off", "-c", "max_connections=300"),
		testcontainers.WithWaitStrategyAndDeadline(2*time.Minute,
			wait.ForLog("database system is ready to accept connections").WithOccurrence(2),
			wait.ForListeningPort("5432/tcp")),
	)
	stop := func() error {
		err := testcontainers.TerminateContainer(ctr)
		if rerr := stopReaper(); err == nil {
			err = rerr
		}
		return err
	}
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("start %s container: %w", image, err)
	}
	u, err := ctr.ConnectionString(ctx, "sslmode=disable")
	if err != nil {
		_ = stop()
		return nil, fmt.Errorf("container connection string: %w", err)
	}
	desc := fmt.Sprintf("a %s container %.12s at %s (testcontainers; engine %s)", image, ctr.GetContainerID(), redactHostPort(u), daemon)
	return &server{kind: kindContainer, desc: desc, adminURL: u, stop: stop, container: ctr.GetContainerID()}, nil
}

// engine returns a client of the Docker engine testcontainers-go would use, once it has
// answered a ping within dockerProbeTimeout.
//
// Before the first client is made (testcontainers-go reads its settings once), it turns
// Ryuk off unless TESTCONTAINERS_RYUK_DISABLED is set: Ryuk is an image that an engine with
// no registry cannot have, and asking for it is a pull; pgtest's own reaper does its work.
// It also quiets testcontainers-go's log unless TERDUT_TEST_DOCKER_VERBOSE=1.
func engine(ctx context.Context) (*testcontainers.DockerClient, error) {
	if _, set := os.LookupEnv(envRyukDisabled); !set {
		_ = os.Setenv(envRyukDisabled, "true")
	}
	if os.Getenv(EnvVerbose) != "1" {
		tclog.SetDefault(tclog.NewNoopLogger())
	}
	ctx, cancel := context.WithTimeout(ctx, dockerProbeTimeout)
	defer cancel()
	type result struct {
		cli *testcontainers.DockerClient
		err error
	}
	done := make(chan result, 1)
	go func() { // the client may block past ctx while it looks for an engine
		cli, err := testcontainers.NewDockerClientWithOpts(ctx)
		if err == nil {
			if _, err = cli.Ping(ctx, client.PingOptions{}); err != nil {
				_ = cli.Close()
				cli = nil
			}
		}
		done <- result{cli, err}
	}()
	select {
	case r := <-done:
		return r.cli, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// The reaper of this process, started by the first container pgtest or a test starts.
var (
	reaperMu    sync.Mutex
	reaperOwner string
	reaperProc  *reaper
)

// ensureReaper starts this process's reaper for the engine at daemon unless it runs, and
// returns the owner label it reaps and a function that stops it.
func ensureReaper(daemon string) (owner string, stop func() error, err error) {
	reaperMu.Lock()
	defer reaperMu.Unlock()
	if reaperProc == nil {
		owner := ownerID(os.Getpid())
		if owner == "" {
			owner = "pid/" + strconv.Itoa(os.Getpid()) + "/" + uniqueName("run")
		}
		r, err := startReaper(owner, daemon)
		if err != nil {
			return "", nil, err
		}
		reaperOwner, reaperProc = owner, r
	}
	r := reaperProc
	return reaperOwner, func() error {
		reaperMu.Lock()
		defer reaperMu.Unlock()
		if reaperProc != r {
			return nil
		}
		reaperProc = nil
		return r.stop()
	}, nil
}

// OwnedLabels returns the labels that make a container or a network this test process's,
// for tests that start containers of their own: whatever carries them is removed when the
// process ends, however it ends (a reaper process waits for that; see the package doc),
// and by the next run of any pgtest user if even the reaper could not run. It fails when
// no Docker engine answers. TESTCONTAINERS_HOST_OVERRIDE is checked and set as for pgtest's
// own container.
func OwnedLabels(ctx context.Context) (map[string]string, error) {
	cli, err := engine(ctx)
	if err != nil {
		return nil, fmt.Errorf("no Docker engine answered: %w", err)
	}
	defer cli.Close()
	host, err := publishedHost(cli.DaemonHost(), os.Getenv(EnvHostOverride))
	if err != nil {
		return nil, err
	}
	_ = os.Setenv(EnvHostOverride, host)
	if _, err := sweep(ctx, cli.Client); err != nil {
		return nil, err
	}
	owner, _, err := ensureReaper(cli.DaemonHost())
	if err != nil {
		return nil, err
	}
	return map[string]string{labelHarness: "1", labelOwner: owner}, nil
}
