//go:build image

package image

import (
	"context"
	"crypto/rand"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/network"
	"github.com/testcontainers/testcontainers-go"
	tcnetwork "github.com/testcontainers/testcontainers-go/network"
	"github.com/testcontainers/testcontainers-go/wait"
)

// install is a database on the test's network and the secrets its replicas mount.
type install struct {
	network       string
	secrets       string // folder with operator-token/token and database/url
	operatorToken string
}

// newInstall makes a Docker network, starts PostgreSQL on it (reachable only there, as
// "db") and writes the secrets.
func newInstall(t *testing.T) *install {
	t.Helper()
	ctx := context.Background()
	nw, err := tcnetwork.New(ctx, tcnetwork.WithLabels(labels))
	if err != nil {
		t.Fatalf("create network: %v", err)
	}
	t.Cleanup(func() {
		if err := nw.Remove(context.Background()); err != nil {
			t.Errorf("remove network %s: %v", nw.Name, err)
		}
	})
	password := rand.Text()
	pg, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:          postgresImage,
			Env:            map[string]string{"POSTGRES_PASSWORD": password},
			Cmd:            []string{"postgres", "-c", "fsync=off"},
			Labels:         labels,
			Networks:       []string{nw.Name},
			NetworkAliases: map[string][]string{nw.Name: {"db"}},
			ExposedPorts:   []string{"5432/tcp"},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = loopbackPorts("5432/tcp")
			},
			WaitingFor: wait.ForLog("database system is ready to accept connections").WithOccurrence(2).
				WithStartupTimeout(2 * time.Minute),
		},
		Started: true,
	})
	terminate(t, pg)
	if err != nil {
		t.Fatalf("start %s: %v", postgresImage, err)
	}
	in := &install{network: nw.Name, secrets: t.TempDir(), operatorToken: "image-operator-token-" + rand.Text()}
	in.writeSecret(t, "operator-token", "token", "# the operator's token\n"+in.operatorToken+"\n")
	in.writeSecret(t, "database", "url", "postgres://postgres:"+password+"@db:5432/postgres?sslmode=disable\n")
	return in
}

// writeSecret writes dir/name as Kubernetes mounts a Secret with defaultMode 0440 and
// fsGroup 65532: readable by the server's group, not by everyone.
func (in *install) writeSecret(t *testing.T, dir, name, content string) {
	t.Helper()
	d := filepath.Join(in.secrets, dir)
	if err := os.Mkdir(d, 0o750); err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(d, name)
	if err := os.WriteFile(f, []byte(content), 0o440); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		for _, p := range []string{d, f} {
			if err := os.Chown(p, 0, 65532); err != nil {
				t.Fatal(err)
			}
		}
	} else { // the test's user cannot give files to group 65532: let everyone read them
		_ = os.Chmod(d, 0o755)
		_ = os.Chmod(f, 0o444)
	}
}

// replica is one container of the server image.
type replica struct {
	name string
	ctr  testcontainers.Container
	url  string // http://127.0.0.1:<published port of 8080>, the people's port
	op   string // http://127.0.0.1:<published port of 8081>, the operator's
}

// startReplica runs the image as the Deployment's pod spec does and waits until /readyz
// answers 200.
func (in *install) startReplica(t *testing.T, name string) *replica {
	t.Helper()
	ctx := context.Background()
	ctr, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image: serverImage,
			Cmd: []string{"--listen=:8080", "--operator-listen=:8081", "--public-url=" + publicURL,
				"--operator-token-file=/etc/terdut/operator-token/token"},
			Env: map[string]string{
				"TERDUT_DATABASE_URL_FILE":  "/etc/terdut/database/url",
				"TERDUT_PASSWORD_HASH_COST": "4",
				"TERDUT_LOG_LEVEL":          "debug",
			},
			Labels:       labels,
			Networks:     []string{in.network},
			ExposedPorts: []string{"8080/tcp", "8081/tcp"},
			ConfigModifier: func(c *container.Config) {
				c.User = "65532:65532" // runAsUser, runAsGroup
			},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.PortBindings = loopbackPorts("8080/tcp", "8081/tcp")
				hc.ReadonlyRootfs = true
				hc.CapDrop = []string{"ALL"}
				hc.SecurityOpt = []string{"no-new-privileges"} // allowPrivilegeEscalation: false
				hc.GroupAdd = []string{"65532"}                // fsGroup
				for _, dir := range []string{"operator-token", "database"} {
					hc.Mounts = append(hc.Mounts, mount.Mount{Type: mount.TypeBind, ReadOnly: true,
						Source: filepath.Join(in.secrets, dir), Target: "/etc/terdut/" + dir})
				}
			},
			WaitingFor: wait.ForHTTP("/readyz").WithPort("8080/tcp").WithStartupTimeout(time.Minute),
		},
		Started: true,
	})
	terminate(t, ctr)
	if err != nil {
		t.Fatalf("start replica %s of %s: %v%s", name, serverImage, err, logsOf(ctr))
	}
	host, err := ctr.Host(ctx)
	if err != nil {
		t.Fatal(err)
	}
	port, err := ctr.MappedPort(ctx, "8080/tcp")
	if err != nil {
		t.Fatal(err)
	}
	opPort, err := ctr.MappedPort(ctx, "8081/tcp")
	if err != nil {
		t.Fatal(err)
	}
	return &replica{name: name, ctr: ctr, url: "http://" + host + ":" + port.Port(), op: "http://" + host + ":" + opPort.Port()}
}

// publicURL is where people would reach the install; nothing listens there, the test sends
// each request to the replica it names.
const publicURL = "http://terdut.image.test"

// loopbackPorts publishes each port on a free port of 127.0.0.1 only.
func loopbackPorts(ports ...string) network.PortMap {
	m := network.PortMap{}
	for _, p := range ports {
		m[network.MustParsePort(p)] = []network.PortBinding{{HostIP: netip.MustParseAddr("127.0.0.1")}}
	}
	return m
}

// terminate removes ctr when the test ends.
func terminate(t *testing.T, ctr testcontainers.Container) {
	t.Cleanup(func() {
		if err := testcontainers.TerminateContainer(ctr); err != nil {
			t.Errorf("remove container: %v", err)
		}
	})
}

// logsOf returns the container's output, for a failure message.
func logsOf(ctr testcontainers.Container) string {
	if ctr == nil {
		return ""
	}
	rc, err := ctr.Logs(context.Background())
	if err != nil {
		return "\n(no logs: " + err.Error() + ")"
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return "\ncontainer output:\n" + strings.TrimSpace(string(b))
}
