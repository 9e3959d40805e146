//go:build image

package image

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/testcontainers/testcontainers-go"

	"github.com/terdut-server/terdut-server/test/harness/pgtest"
)

// envServerImage names the image under test.
const envServerImage = "TERDUT_TEST_SERVER_IMAGE"

// Set by TestMain.
var (
	serverImage   string
	postgresImage string
	labels        map[string]string // make a container or network this process's (pgtest.OwnedLabels)
)

func TestMain(m *testing.M) {
	if err := setup(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// setup checks that the engine answers and holds both images; it pulls nothing.
func setup() error {
	serverImage = os.Getenv(envServerImage)
	if serverImage == "" {
		return fmt.Errorf("%s is not set: name the image under test, e.g. %s=terdut-server:dev (make image builds it)", envServerImage, envServerImage)
	}
	postgresImage = os.Getenv(pgtest.EnvPostgresImage)
	if postgresImage == "" {
		postgresImage = pgtest.DefaultPostgresImage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var err error
	if labels, err = pgtest.OwnedLabels(ctx); err != nil {
		return err
	}
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, img := range []string{serverImage, postgresImage} {
		if _, err := cli.ImageInspect(ctx, img); err != nil {
			return fmt.Errorf("the engine at %s has no image %s (nothing is pulled): %w", cli.DaemonHost(), img, err)
		}
	}
	fmt.Fprintf(os.Stderr, "image: testing %s against a %s container (engine %s)\n", serverImage, postgresImage, cli.DaemonHost())
	return nil
}
