// Package nodetest runs a whole single-node Kubernetes cluster for tests, on this machine and
// offline: the real kube-apiserver over Debian's etcd (test/harness/kubetest), the controller
// manager and the scheduler, and a node: the kubelet and kube-proxy (each Kubernetes' own
// program at the release test/harness/kubetest/kubebin pins), Debian's containerd and runc, the
// CNI bridge plugin on a bridge of the node's own, and kube-router's network-policy firewall.
// Pods really run, from image archives imported into containerd (no registry is reached).
//
// Everything stays on the machine: the pods live in network namespaces the node makes, on
// its bridge (PodCIDR), nothing is masqueraded out, and the pods' DNS is the node's own
// (test/harness/nodetest/clusterdns), which answers the cluster's Service names and refuses every
// other. The API server, the DNS and whatever the test serves to the pods listen on the
// bridge's address (Gateway). Every program is stopped by its PID when the test ends, and
// what the node changed on the host is put back: sysctls, the FORWARD rule, kube-proxy's and
// kube-router's chains and ipsets, connection tracking, mounts, network namespaces, cgroups
// and the bridge. It needs root, and the programs scripts/ensure-node.sh installs.
package nodetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/nodetest/clusterdns"
	"github.com/terdut-server/terdut-server/test/harness/nodetest/kuberouter"
	"github.com/terdut-server/terdut-server/test/harness/nodetest/ociimage"
	"github.com/terdut-server/terdut-server/test/harness/proctest"
)

// The node's addresses. The pods' range is one /24 the controller manager allocates to the
// node (its spec.podCIDR, which kube-router reads); the bridge holds its first address.
const (
	// Bridge is the node's bridge.
	Bridge = "terdutnode0"
	// Name is the node's name.
	Name = "terdut-node"
	// Gateway is the bridge's address: the pods' gateway, where the API server, the
	// cluster's DNS and the test's own servers for the pods listen.
	Gateway     = "10.244.0.1"
	podCIDR     = "10.244.0.0/24"
	clusterCIDR = "10.244.0.0/16"
	serviceCIDR = "10.96.0.0/16" // kubetest's --service-cluster-ip-range
	// ClusterDomain is the cluster's DNS domain.
	ClusterDomain = "cluster.local"
	// Issuer is the service-account issuer, as kubeadm, kind and k3s leave it: pods resolve
	// it through the node's DNS to the Service kubernetes.
	Issuer = "https://kubernetes.default.svc.cluster.local"
)

// startBound bounds how long the node may take to become ready: a hang, not the speed (it is
// ready in 10-20 s on a quiet machine).
const startBound = 3 * time.Minute

// Options are what a test asks of its node.
type Options struct {
	// Images are image archives (OCI layouts or `docker save` output) imported into the
	// node's containerd before any pod starts. The pause image is always imported.
	Images []string
}

// Node is a running single-node cluster. Its methods fail the test on an error.
type Node struct {
	API *kubetest.APIServer
	Dir string

	tb         testing.TB
	host       *host
	containerd string // containerd's socket
	kubeconfig string
	procs      []*proctest.Proc // in the order they started
	dns        *clusterdns.Server
	pauseRef   string
}

// Start starts the cluster and waits until the node is Ready with its pod range set. It is
// stopped, and the host put back, when the test ends.
func Start(tb testing.TB, opts Options) *Node {
	tb.Helper()
	for _, prog := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ipset", "conntrack", "ip"} {
		if _, err := exec.LookPath(prog); err != nil {
			tb.Fatalf("nodetest: %s is missing: run scripts/ensure-node.sh (as root on Debian it installs containerd, runc, the CNI plugins, iptables, ipset and conntrack)", prog)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		tb.Fatal("nodetest: the CNI plugins are missing (/usr/lib/cni/bridge): run scripts/ensure-node.sh")
	}
	bins := map[string]string{}
	for _, prog := range []string{"kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy"} {
		bin, err := kubetest.Program(prog)
		if err != nil {
			tb.Fatal(err)
		}
		bins[prog] = bin
	}
	router, err := kuberouter.Build()
	if err != nil {
		tb.Fatal(err)
	}
	h, err := newHost(Bridge)
	if err != nil {
		tb.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "nodetest-")
	if err != nil {
		tb.Fatal(err)
	}
	n := &Node{Dir: dir, tb: tb, host: h}
	// Registered before the API server's own cleanup, so it runs after it: the bridge the API
	// server listens on goes last.
	tb.Cleanup(n.putBack)
	if err := h.addBridge(Gateway + "/24"); err != nil {
		tb.Fatal(err)
	}
	if err := h.fenceBridge(Gateway); err != nil {
		tb.Fatal(err)
	}
	// Pods reach Services through kube-proxy's rules, which bridged traffic meets only when
	// the bridge calls iptables; kube-proxy needs forwarding.
	for k, v := range map[string]string{"net/bridge/bridge-nf-call-iptables": "1", "net/ipv4/ip_forward": "1"} {
		if err := h.setSysctl(k, v); err != nil {
			tb.Fatal(err)
		}
	}

	n.API = kubetest.Start(tb, kubetest.Options{Address: Gateway, Issuers: []string{Issuer}})
	n.kubeconfig = n.API.Kubeconfig()
	// Registered after the API server's cleanup, so it runs before it: pods are deleted
	// through the API server, and the programs that talk to it stop first.
	tb.Cleanup(n.stop)

	n.dns, err = clusterdns.Serve(context.Background(), net.JoinHostPort(Gateway, "53"), ClusterDomain, clusterdns.ServiceLookup(n.clusterIP))
	if err != nil {
		tb.Fatalf("nodetest: the cluster's DNS: %v", err)
	}

	n.startContainerd(tb)
	n.importImages(tb, opts.Images)

	ports, err := proctest.FreePorts(6)
	if err != nil {
		tb.Fatal(err)
	}
	n.start("kube-controller-manager", bins["kube-controller-manager"],
		"--kubeconfig="+n.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[0]),
		"--authentication-skip-lookup=true",
		"--leader-elect=false",
		"--use-service-account-credentials=false",
		// Each namespace's kube-root-ca.crt, which every projected service-account volume reads.
		"--root-ca-file="+n.API.CA.File,
		"--service-account-private-key-file="+n.API.Key.PrivateFile,
		"--allocate-node-cidrs=true", "--cluster-cidr="+clusterCIDR, "--node-cidr-mask-size=24",
		"--service-cluster-ip-range="+serviceCIDR)
	n.start("kube-scheduler", bins["kube-scheduler"],
		"--kubeconfig="+n.kubeconfig, "--authentication-kubeconfig="+n.kubeconfig, "--authorization-kubeconfig="+n.kubeconfig,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(ports[1]), "--leader-elect=false")
	n.startKubelet(tb, bins["kubelet"], ports[2], ports[3])
	n.start("kube-proxy", bins["kube-proxy"],
		"--kubeconfig="+n.kubeconfig, "--hostname-override="+Name,
		"--proxy-mode=iptables", "--cluster-cidr="+clusterCIDR,
		// Leave the host's connection-tracking limits and timeouts as they are, and
		// route_localnet off (no NodePort on 127.0.0.1).
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-localhost-nodeports=false",
		// A NodePort Service opens on the bridge's address alone, never on the host's others.
		"--nodeport-addresses="+Gateway+"/32",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[4]),
		"--healthz-bind-address=127.0.0.1:"+strconv.Itoa(ports[5]))
	n.waitReady(tb)
	// kube-router reads the node's pod range when it starts: after the controller manager set it.
	rports, err := proctest.FreePorts(1)
	if err != nil {
		tb.Fatal(err)
	}
	// kube-router takes its node's name from NODE_NAME before --hostname-override.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "NODE_NAME=") })
	n.startEnv("kube-router", router, env, kuberouter.Args(n.kubeconfig, Name, rports[0])...)
	return n
}

// start runs one of the node's programs, its log in the node's directory.
func (n *Node) start(name, bin string, args ...string) *proctest.Proc {
	n.tb.Helper()
	return n.startEnv(name, bin, os.Environ(), args...)
}

// startEnv is start with the environment env.
func (n *Node) startEnv(name, bin string, env []string, args ...string) *proctest.Proc {
	n.tb.Helper()
	p, err := proctest.Start(name, bin, args, env, filepath.Join(n.Dir, name+".log"), proctest.Options{})
	if err != nil {
		n.tb.Fatal(err)
	}
	n.procs = append(n.procs, p)
	return p
}

// startContainerd starts containerd with its state, its socket and its CNI configuration in
// the node's directory. restrict_oom_score_adj: the machine's root has no CAP_SYS_RESOURCE,
// and runc cannot start a sandbox that would lower its OOM score.
func (n *Node) startContainerd(tb testing.TB) {
	tb.Helper()
	cd := filepath.Join(n.Dir, "containerd")
	cni := filepath.Join(n.Dir, "cni")
	for _, d := range []string{cd, cni} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	pause, ref, err := ociimage.Pause(n.Dir)
	if err != nil {
		tb.Fatal(err)
	}
	n.pauseRef = ref
	n.containerd = filepath.Join(cd, "containerd.sock")
	config := fmt.Sprintf(`version = 2
root = %[1]q
state = %[2]q
[grpc]
  address = %[3]q
[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %[5]q
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = %[6]q
`, filepath.Join(cd, "root"), filepath.Join(cd, "state"), n.containerd, filepath.Join(cd, "opt"), ref, cni)
	if err := os.WriteFile(filepath.Join(cd, "config.toml"), []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	// The bridge plugin on the node's bridge, addresses from the node's range, nothing
	// masqueraded, and no default route: a pod has a route to its own range and the Services'
	// (through the bridge's address, where kube-proxy's rules turn them into pods), and none to
	// anywhere else; the host's FORWARD rules drop what would leave the bridge regardless.
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": "terdut-node",
  "plugins": [
    {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": %q, "gateway": %q}]], "routes": [{"dst": %q}],
              "dataDir": %q}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, Bridge, podCIDR, Gateway, serviceCIDR, filepath.Join(n.Dir, "cni-ipam"))
	if err := os.WriteFile(filepath.Join(cni, "10-terdut-node.conflist"), []byte(conflist), 0o644); err != nil {
		tb.Fatal(err)
	}
	p := n.start("containerd", "containerd", "--config", filepath.Join(cd, "config.toml"))
	deadline := time.Now().Add(startBound)
	for n.ctr("version") != nil {
		if p.Done() || time.Now().After(deadline) {
			tb.Fatalf("nodetest: containerd did not answer; its log:\n%s", tail(p.Log(), 40))
		}
		time.Sleep(200 * time.Millisecond)
	}
	n.importImages(tb, []string{pause})
}

// importImages imports image archives into containerd's namespace for Kubernetes.
func (n *Node) importImages(tb testing.TB, archives []string) {
	tb.Helper()
	for _, a := range archives {
		if err := n.ctr("images", "import", "--no-unpack=false", a); err != nil {
			tb.Fatalf("nodetest: import %s: %v", a, err)
		}
	}
}

// PauseImage is the reference of the pause image the node's sandboxes run (built here from
// Kubernetes' pause.c): a container that does nothing, for a test that needs a pod.
func (n *Node) PauseImage() string { return n.pauseRef }

// ImportImage imports one more image archive.
func (n *Node) ImportImage(archive string) {
	n.tb.Helper()
	n.importImages(n.tb, []string{archive})
}

// TagImage names an imported image ref a second time, as target: a new release of the same
// program for a rolling upgrade, without a second archive.
func (n *Node) TagImage(ref, target string) {
	n.tb.Helper()
	if err := n.ctr("images", "tag", "--force", ref, target); err != nil {
		n.tb.Fatal(err)
	}
}

// ctr runs containerd's client on the node's containerd, in Kubernetes' namespace.
func (n *Node) ctr(args ...string) error {
	return run("ctr", append([]string{"--address", n.containerd, "--namespace", "k8s.io"}, args...)...)
}

// startKubelet starts the kubelet on the node's containerd, serving on the bridge's address.
func (n *Node) startKubelet(tb testing.TB, bin string, port, healthz int) {
	tb.Helper()
	root := filepath.Join(n.Dir, "kubelet")
	if err := os.MkdirAll(root, 0o755); err != nil {
		tb.Fatal(err)
	}
	resolv := filepath.Join(n.Dir, "resolv.conf")
	// The kubelet gives pods the cluster's DNS; the file is what a pod of dnsPolicy Default
	// would get: nothing, so no pod asks the host's resolver.
	if err := os.WriteFile(resolv, nil, 0o644); err != nil {
		tb.Fatal(err)
	}
	// cgroupfs, and cgroup v1 allowed: the machine's hierarchy. No swap check, no eviction
	// or image collection on a shared disk, no static pods; the kubelet's API on the bridge
	// (authenticated: webhook, anonymous off).
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
clusterDNS: [%s]
clusterDomain: %s
resolvConf: %s
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 30
`, n.containerd, Gateway, port, healthz, n.API.CA.File, Gateway, ClusterDomain, resolv)
	cfg := filepath.Join(n.Dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o644); err != nil {
		tb.Fatal(err)
	}
	n.start("kubelet", bin, "--config="+cfg, "--kubeconfig="+n.kubeconfig,
		"--root-dir="+root, "--cert-dir="+filepath.Join(n.Dir, "kubelet-pki"),
		"--hostname-override="+Name, "--node-ip="+Gateway)
}

// waitReady waits until the node is Ready and has its pod range.
func (n *Node) waitReady(tb testing.TB) {
	tb.Helper()
	deadline := time.Now().Add(startBound)
	var last string
	for {
		status, body := n.API.Do(http.MethodGet, "/api/v1/nodes/"+Name, nil)
		if status == http.StatusOK {
			var node struct {
				Spec struct {
					PodCIDR string `json:"podCIDR"`
				} `json:"spec"`
				Status struct {
					Conditions []struct{ Type, Status, Message string } `json:"conditions"`
				} `json:"status"`
			}
			if err := json.Unmarshal(body, &node); err != nil {
				tb.Fatal(err)
			}
			for _, c := range node.Status.Conditions {
				if c.Type == "Ready" {
					last = fmt.Sprintf("Ready=%s (%s), podCIDR %q", c.Status, c.Message, node.Spec.PodCIDR)
					if c.Status == "True" && node.Spec.PodCIDR == podCIDR {
						return
					}
				}
			}
		} else {
			last = fmt.Sprintf("GET node: %d", status)
		}
		for _, p := range n.procs {
			if p.Done() {
				tb.Fatalf("nodetest: %s exited; its log:\n%s", p.Name, tail(p.Log(), 60))
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("nodetest: the node was not ready within %s (%s); the kubelet's log:\n%s", startBound, last, tail(n.procLog("kubelet"), 60))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// procLog is the log of the program name.
func (n *Node) procLog(name string) string {
	for _, p := range n.procs {
		if p.Name == name {
			return p.Log()
		}
	}
	return ""
}

// Logs returns the last lines of each program's log, for a failure message.
func (n *Node) Logs(lines int) string {
	var b strings.Builder
	for _, p := range n.procs {
		fmt.Fprintf(&b, "--- %s ---\n%s\n", p.Name, tail(p.Log(), lines))
	}
	return b.String()
}

// clusterIP asks the API server for a Service's ClusterIP: the cluster's DNS answers with it.
func (n *Node) clusterIP(ctx context.Context, namespace, name string) (string, bool, error) {
	status, body := n.API.Do(http.MethodGet, "/api/v1/namespaces/"+namespace+"/services/"+name, nil)
	switch status {
	case http.StatusOK:
	case http.StatusNotFound:
		return "", false, nil
	default:
		return "", false, fmt.Errorf("GET service %s/%s: %d", namespace, name, status)
	}
	var svc struct {
		Spec struct {
			ClusterIP string `json:"clusterIP"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(body, &svc); err != nil {
		return "", false, err
	}
	if _, err := netip.ParseAddr(svc.Spec.ClusterIP); err != nil {
		return "", false, nil // headless
	}
	return svc.Spec.ClusterIP, true, nil
}

// stop deletes every pod, so that the kubelet tears their sandboxes down (veths, network
// namespaces, mounts), then stops the programs, newest first.
func (n *Node) stop() {
	n.tb.Helper()
	if n.tb.Failed() {
		n.tb.Logf("nodetest: the node's logs:\n%s", n.Logs(30))
	}
	// The controller manager first, so that nothing recreates what is deleted.
	for _, p := range n.procs {
		if p.Name == "kube-controller-manager" || p.Name == "kube-scheduler" {
			p.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	n.deletePods()
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(syscall.SIGTERM, 20*time.Second)
	}
	if n.dns != nil {
		n.dns.Close()
	}
}

// deletePods deletes every pod at once and waits, a bounded time, until containerd runs no
// task: the kubelet has stopped every sandbox.
func (n *Node) deletePods() {
	status, body := n.API.Do(http.MethodGet, "/api/v1/namespaces", nil)
	if status != http.StatusOK {
		n.tb.Errorf("nodetest: list namespaces: %d %s", status, body)
		return
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		n.tb.Error(err)
		return
	}
	for _, ns := range list.Items {
		n.API.Do(http.MethodDelete, "/api/v1/namespaces/"+ns.Metadata.Name+"/pods?gracePeriodSeconds=0", nil)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		out, err := exec.Command("ctr", "--address", n.containerd, "--namespace", "k8s.io", "tasks", "ls", "-q").Output()
		if err == nil && strings.TrimSpace(string(out)) == "" {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	n.tb.Logf("nodetest: containerd still ran tasks 2 minutes after every pod was deleted; they are killed")
}

// putBack removes what the node's programs left and puts the host's settings back. It runs
// after every program has stopped (the API server included); each step runs even when one
// before it failed, and a failure fails the test.
func (n *Node) putBack() {
	n.tb.Helper()
	h := n.host
	steps := []struct {
		what string
		do   func() error
	}{
		{"kill containerd's shims", func() error {
			if n.containerd == "" {
				return nil
			}
			return killProcesses(n.containerd)
		}},
		// Right after the shims: whatever runs in the pods' cgroups is killed before anything
		// else is removed, so that no container keeps a namespace or makes a connection.
		{"kill what runs in the pods' cgroups and remove them", h.removeCgroups},
		{"remove the pods' network namespaces", h.removeNamespaces},
		{"unmount the node's volumes and snapshots", func() error { return unmountUnder(n.Dir) }},
		{"remove kube-proxy's rules", n.cleanupProxy},
		{"remove kube-router's rules and ipsets", kuberouter.Cleanup},
		{"remove the kubelet's chains", h.removeKubeletChains},
		{"forget the node's connections", func() error { return forgetConntrack(clusterCIDR, serviceCIDR) }},
		{"put the sysctls back", h.restoreSysctls},
	}
	for i := len(h.undo) - 1; i >= 0; i-- {
		steps = append(steps, struct {
			what string
			do   func() error
		}{"undo a change to the host", h.undo[i]})
	}
	steps = append(steps, struct {
		what string
		do   func() error
	}{"remove the node's directory", func() error { return os.RemoveAll(n.Dir) }})
	for _, s := range steps {
		if err := s.do(); err != nil {
			n.tb.Errorf("nodetest: %s: %v", s.what, err)
		}
	}
}

// cleanupProxy runs kube-proxy --cleanup, which removes the chains and rules of its modes.
func (n *Node) cleanupProxy() error {
	bin, err := kubetest.Program("kube-proxy")
	if err != nil {
		return err
	}
	out, err := exec.Command(bin, "--cleanup", "--proxy-mode=iptables").CombinedOutput()
	if err != nil {
		return fmt.Errorf("kube-proxy --cleanup: %w: %s", err, tail(string(out), 20))
	}
	return nil
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
