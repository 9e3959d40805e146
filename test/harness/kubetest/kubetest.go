// Package kubetest runs a real kube-apiserver for tests: Kubernetes' own program at the
// release kubebin/go.mod pins, over Debian's etcd, on 127.0.0.1 with free ports and TLS from a
// CA the test makes. It has no controller-manager, scheduler or kubelet: objects are stored,
// validated, admitted and authorized, nothing runs. That is all the operator's identity needs
// (service-account tokens from the TokenRequest API, the issuer's discovery document and
// keys, TokenReview) and all the example manifests need (applied server-side with strict
// field validation, their RBAC asked with access reviews).
package kubetest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// startBound bounds how long etcd and the API server may take to become ready: a hang, not
// the speed (the API server is ready in seconds on a quiet machine).
const startBound = 2 * time.Minute

// Options are the API server's service-account settings, those that differ from cluster to
// cluster. The zero value is the layout kubeadm, kind and k3s leave.
type Options struct {
	// Issuers are the --service-account-issuer values; the first signs new tokens and is the
	// one discovery names, all are accepted. Empty: LocalhostURL, a name of the API server
	// other than its advertise address, as https://kubernetes.default.svc.cluster.local is in a
	// cluster, so that discovery's jwks_uri (the advertise address) is another origin.
	Issuers []string
	// JWKSURI is --service-account-jwks-uri; empty: the API server names
	// https://127.0.0.1:<port>/openid/v1/jwks, its advertise address.
	JWKSURI string
	// SigningKey signs new tokens; nil: the key Start made (APIServer.Key).
	SigningKey *SigningKey
	// Accepted are public keys accepted beside the signing key's (a rotation in progress).
	Accepted []SigningKey
	// Address is where the API server listens and what it advertises; empty: 127.0.0.1.
	// A node's pods cannot reach the host's loopback: test/harness/nodetest gives its bridge's
	// address, and the API server then keeps the default Service kubernetes's endpoint
	// (the lease reconciler), as in a cluster.
	Address string
}

// APIServer is a running kube-apiserver and its etcd. Its methods fail the test on an error.
type APIServer struct {
	URL          string // https://127.0.0.1:<port>: the advertise address
	LocalhostURL string // https://localhost:<port>: the same server by a name
	Port         int
	CA           *CA        // the API server's certificate chains to it: what a pod's ca.crt holds
	Key          SigningKey // the signing key Start made
	Dir          string     // where its files are; a test may add its own

	tb      testing.TB
	bin     string
	etcd    *proctest.Proc
	etcdURL string
	proc    *proctest.Proc
	opts    Options
	address string // where it listens: Options.Address or 127.0.0.1
	admin   string // a static token of system:masters
	client  *http.Client
}

// Start builds (or takes from the cache) the API server, starts etcd and the API server, and
// waits until it is ready. Everything stops when the test ends. Missing etcd fails the test
// with how to install it.
func Start(tb testing.TB, opts Options) *APIServer {
	tb.Helper()
	etcdBin, err := exec.LookPath("etcd")
	if err != nil {
		tb.Fatal("kubetest: no etcd: run scripts/ensure-kube.sh (as root on Debian it installs etcd-server)")
	}
	bin, err := Build()
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		tb.Fatal(err)
	}
	a := &APIServer{Dir: dir, tb: tb, bin: bin, admin: rand.Text(), address: opts.Address}
	if a.address == "" {
		a.address = "127.0.0.1"
	}
	tb.Cleanup(a.stop)
	ports, err := proctest.FreePorts(3)
	if err != nil {
		tb.Fatal(err)
	}
	a.Port = ports[2]
	a.URL = "https://" + net.JoinHostPort(a.address, strconv.Itoa(a.Port))
	a.LocalhostURL = "https://localhost:" + strconv.Itoa(a.Port)
	if a.CA, err = NewCA(dir, "ca"); err != nil {
		tb.Fatal(err)
	}
	// The first address of the Service range (10.96.0.1) is the Service kubernetes's: pods
	// reach the API server there.
	if _, _, _, err = a.CA.Issue(dir, "apiserver", "localhost", "127.0.0.1", a.address, "10.96.0.1", "kubernetes", "kubernetes.default",
		"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"); err != nil {
		tb.Fatal(err)
	}
	if a.Key, err = NewSigningKey(dir, "sa-0"); err != nil {
		tb.Fatal(err)
	}
	tokens := fmt.Sprintf("%s,kubetest-admin,kubetest-admin,system:masters\n", a.admin)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		tb.Fatal(err)
	}
	a.client = &http.Client{Timeout: 30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: a.CA.Pool, MinVersion: tls.VersionTLS12}}}

	a.etcdURL = "http://127.0.0.1:" + strconv.Itoa(ports[0])
	peer := "http://127.0.0.1:" + strconv.Itoa(ports[1])
	a.etcd, err = proctest.Start("etcd", etcdBin, []string{"--name", "e1", "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", a.etcdURL, "--advertise-client-urls", a.etcdURL,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "e1=" + peer, "--initial-cluster-state", "new"},
		os.Environ(), filepath.Join(dir, "etcd.log"), proctest.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	a.start(opts)
	return a
}

// Restart stops the API server and starts it again on the same port, etcd, CA and admin
// with other service-account settings: a cluster whose issuer or keys change. Objects and
// tokens made before survive, as in a cluster.
func (a *APIServer) Restart(opts Options) {
	a.tb.Helper()
	a.Stop()
	a.start(opts)
}

// Stop stops the API server (etcd keeps running): a cluster whose API server is away. Restart
// starts it again.
func (a *APIServer) Stop() {
	a.tb.Helper()
	a.proc.Stop(syscall.SIGTERM, 30*time.Second)
}

// Issuer is the issuer of the tokens the API server signs now.
func (a *APIServer) Issuer() string { return a.opts.Issuers[0] }

// Options returns the settings the API server runs with, the defaults filled in.
func (a *APIServer) Options() Options { return a.opts }

func (a *APIServer) start(opts Options) {
	a.tb.Helper()
	if len(opts.Issuers) == 0 {
		opts.Issuers = []string{a.LocalhostURL}
	}
	if opts.SigningKey == nil {
		opts.SigningKey = &a.Key
	}
	a.opts = opts
	args := []string{
		"--etcd-servers=" + a.etcdURL,
		"--bind-address=" + a.address, "--secure-port=" + strconv.Itoa(a.Port),
		"--advertise-address=" + a.address,
		"--tls-cert-file=" + filepath.Join(a.Dir, "apiserver.crt"),
		"--tls-private-key-file=" + filepath.Join(a.Dir, "apiserver.key"),
		"--cert-dir=" + filepath.Join(a.Dir, "certs"),
		"--token-auth-file=" + filepath.Join(a.Dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--service-account-signing-key-file=" + opts.SigningKey.PrivateFile,
		"--service-account-key-file=" + opts.SigningKey.PublicFile,
		"--enable-priority-and-fairness=false",
		"--profiling=false",
	}
	if ip := net.ParseIP(a.address); ip != nil && ip.IsLoopback() {
		// A loopback advertise address is refused unless no endpoint reconciler runs.
		args = append(args, "--endpoint-reconciler-type=none")
	}
	for _, iss := range opts.Issuers {
		args = append(args, "--service-account-issuer="+iss)
	}
	for _, k := range opts.Accepted {
		args = append(args, "--service-account-key-file="+k.PublicFile)
	}
	if opts.JWKSURI != "" {
		args = append(args, "--service-account-jwks-uri="+opts.JWKSURI)
	}
	var err error
	a.proc, err = proctest.Start("kube-apiserver", a.bin, args, os.Environ(), filepath.Join(a.Dir, "kube-apiserver.log"), proctest.Options{})
	if err != nil {
		a.tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	for {
		status, _, err := a.do(ctx, a.admin, http.MethodGet, "/readyz", nil)
		if err == nil && status == http.StatusOK {
			return
		}
		select {
		case <-a.proc.Exited():
			a.tb.Fatalf("kubetest: kube-apiserver exited before it was ready; its log:\n%s", tail(a.proc.Log(), 60))
		case <-ctx.Done():
			a.tb.Fatalf("kubetest: kube-apiserver not ready within %s (last: %d, %v); its log:\n%s", startBound, status, err, tail(a.proc.Log(), 60))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *APIServer) stop() {
	a.proc.Stop(syscall.SIGTERM, 15*time.Second)
	a.etcd.Stop(syscall.SIGTERM, 5*time.Second)
	if a.tb.Failed() && a.proc != nil {
		a.tb.Logf("kubetest: kube-apiserver's log:\n%s", tail(a.proc.Log(), 40))
	}
	_ = os.RemoveAll(a.Dir)
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
