//go:build node

package helmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
	"github.com/terdut-server/terdut-server/test/harness/nodetest"
	"github.com/terdut-server/terdut-server/test/harness/nodetest/ociimage"
	"github.com/terdut-server/terdut-server/test/harness/pglocal"
)

// The namespaces of the node test: the release's, terdut-operator's, one the chart's
// NetworkPolicy lets reach the people's port (as an ingress controller's would be),
// Alertmanager's (the chart's default alertmanager.namespaces), and one it names nowhere.
const (
	releaseNS    = "terdut"
	operatorNS   = "terdut-operator-system"
	peopleNS     = "people"
	monitoringNS = "monitoring"
	strangerNS   = "stranger"
)

// Where the pods reach terdut-server: its Service, by name through the node's DNS.
const (
	peopleURL   = "http://terdut-server." + releaseNS + ".svc:8080"
	operatorURL = "http://terdut-server." + releaseNS + ".svc:8081"
	webhookURL  = "http://terdut-server." + releaseNS + ".svc:8082/api/webhooks/alertmanager"
)

// podBound bounds how long a pod, a rollout or a policy may take to take effect: a hang, not
// the speed.
const podBound = 4 * time.Minute

// TestNode_Chart installs terdut-server with its chart on a real single-node cluster
// (test/harness/nodetest), from the server's own image, as kubeadm's preset installs it: the
// operator proves itself with the service-account token the kubelet projects into its pod.
// From a pod playing terdut-operator, through the Service: the claim, then a reset; from a
// pod of the people's side: the key; from a pod of Alertmanager's namespace: a notification on
// the webhook's port; the NetworkPolicies enforced both ways; a rolling upgrade during which
// the gate holds; and the operator's token rotated by the kubelet and still accepted.
func TestNode_Chart(t *testing.T) {
	serverImage := os.Getenv("TERDUT_NODE_SERVER_IMAGE")
	if serverImage == "" {
		t.Fatal("TERDUT_NODE_SERVER_IMAGE names no archive of the server's image: run make node (it builds one with scripts/node-image.sh), or give a `docker save` of make image's")
	}
	serverRef := strings.TrimSpace(os.Getenv("TERDUT_NODE_SERVER_REF"))
	if serverRef == "" {
		t.Fatal("TERDUT_NODE_SERVER_REF names no image reference (such as terdut-server:ci) of the archive")
	}
	repo, tag, ok := strings.Cut(serverRef, ":")
	if !ok {
		t.Fatalf("TERDUT_NODE_SERVER_REF %q: want repository:tag", serverRef)
	}
	agentArchive, agentRef := podAgentImage(t)
	node := nodetest.Start(t, nodetest.Options{Images: []string{serverImage, agentArchive}})
	api := node.API
	dbURL := startDatabase(t)

	for _, ns := range []string{releaseNS, operatorNS, peopleNS, monitoringNS, strangerNS} {
		api.CreateNamespace(ns)
	}
	if _, err := api.Apply(fmt.Appendf(nil, `apiVersion: v1
kind: Secret
metadata: {name: terdut-server-database, namespace: %s}
stringData: {url: %q}
`, releaseNS, dbURL)); err != nil {
		t.Fatal(err)
	}

	kubeconfig := api.Kubeconfig()
	values := []string{"-f", presetFile(t, "kubeadm"),
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag, "--set", "image.pullPolicy=Never",
		"--set", "sso.enabled=false", "--set", "sso.issuer=", "--set", "route.kind=none",
		"--set", "publicURL=" + peopleURL,
		"--set", "networkPolicy.people.namespaces={" + peopleNS + "}",
	}
	helmIn := func(args ...string) {
		t.Helper()
		out, errOut, err := helm(t, append(append(args, "--kubeconfig", kubeconfig, "--namespace", releaseNS), values...)...)
		if err != nil {
			t.Fatalf("helm %s: %v\n%s%s", args[0], err, out, errOut)
		}
	}
	helmIn("install", "terdut-server", chartDir(t))
	waitRollout(t, api, 1)

	// The pods that play the other parts, each with the projected token terdut-operator has.
	api.CreateServiceAccount(operatorNS, "terdut-operator")
	operator := startAgent(t, node, agentRef, operatorNS, "terdut-operator", true)
	people := startAgent(t, node, agentRef, peopleNS, "", false)
	monitoring := startAgent(t, node, agentRef, monitoringNS, "", false)
	stranger := startAgent(t, node, agentRef, strangerNS, "", false)

	// The install starts pending; the operator claims it through the Service.
	claim := operator.reconcile(t, "")
	if claim.Action != "claimed" || claim.Generation != 1 || claim.Key == "" {
		t.Fatalf("the operator's first reconcile: got %v, want claimed, generation 1, a key", claim)
	}
	if status, body := people.get(t, peopleURL+"/api/me", claim.Key); status != http.StatusOK || !strings.Contains(body, `"kind":"service"`) {
		t.Fatalf("GET /api/me with the claim's key from the people's side: got %d %s, want 200 and the bootstrap principal", status, body)
	}

	// The NetworkPolicies: the people's side reaches the people's port alone, the operator's
	// namespace the operator's port alone, Alertmanager's the webhook's port alone (the
	// people's port believes proxies, which Alertmanager is not), another namespace none.
	// kube-router applies them a few seconds after the pods appear: each is waited for, then
	// held.
	svc := "terdut-server." + releaseNS + ".svc"
	reach := []struct {
		from *agent
		port string
		want bool
	}{
		{people, "8080", true}, {people, "8081", false}, {people, "8082", false},
		{operator, "8081", true}, {operator, "8080", false}, {operator, "8082", false},
		{monitoring, "8082", true}, {monitoring, "8080", false}, {monitoring, "8081", false},
		{stranger, "8080", false}, {stranger, "8081", false}, {stranger, "8082", false},
	}
	for _, r := range reach {
		r.from.waitDial(t, svc+":"+r.port, r.want)
	}
	// And nothing past the node: a pod has no route off its bridge (an address of the
	// documentation range, which no packet is sent to).
	if people.dials(t, "203.0.113.1:80") {
		t.Fatal("a pod reached an address off the node")
	}

	// Alertmanager's webhook through the Service's webhook port, from Alertmanager's
	// namespace, with an integration key an admin (the claim's key) made through the API: the
	// notification is taken and opens an incident.
	status, body := people.post(t, peopleURL+"/api/integrations", claim.Key, `{"name": "node"}`)
	var integration struct {
		Keys []struct{ Key string } `json:"keys"`
	}
	if status != http.StatusCreated || json.Unmarshal([]byte(body), &integration) != nil || len(integration.Keys) != 1 {
		t.Fatalf("POST /api/integrations with the claim's key: got %d %s, want 201 and a key", status, body)
	}
	notification := fmt.Sprintf(`{"version": "4", "groupKey": "{}:{alertname=\"NodeWebhook\"}", "status": "firing", "receiver": "terdut",
		"groupLabels": {"alertname": "NodeWebhook"}, "commonLabels": {"alertname": "NodeWebhook"}, "commonAnnotations": {}, "externalURL": "",
		"alerts": [{"status": "firing", "labels": {"alertname": "NodeWebhook"}, "annotations": {}, "startsAt": %q, "fingerprint": "0f1e2d3c4b5a6978"}]}`,
		time.Now().UTC().Format(time.RFC3339))
	if status, body := monitoring.post(t, webhookURL, integration.Keys[0].Key, notification); status != http.StatusOK {
		t.Fatalf("POST %s from %s with the integration key: got %d %s, want 200", webhookURL, monitoringNS, status, body)
	}
	if status, body := people.get(t, peopleURL+"/api/incidents", claim.Key); status != http.StatusOK || !strings.Contains(body, `"title":"NodeWebhook"`) {
		t.Fatalf("GET /api/incidents after the notification: got %d %s, want the incident NodeWebhook", status, body)
	}

	// The reset: the operator holds no key, so it resets the claim and claims again; the
	// first key stops working, no person's data is touched.
	reset := operator.reconcile(t, "")
	if reset.Action != "reset_and_claimed" || reset.Generation != 2 || reset.Key == "" || reset.Key == claim.Key {
		t.Fatalf("the operator's reconcile with no key: got %v, want reset_and_claimed, generation 2, a new key", reset)
	}
	if status, _ := people.get(t, peopleURL+"/api/me", claim.Key); status != http.StatusUnauthorized {
		t.Fatalf("the first key after the reset: got %d, want 401", status)
	}
	if status, _ := people.get(t, peopleURL+"/api/me", reset.Key); status != http.StatusOK {
		t.Fatalf("the reset's key: got %d, want 200", status)
	}
	tokenBefore := operator.token(t)

	// A rolling upgrade to another release of the image: the replicas are replaced one at a
	// time, and all along the install stays claimed, the key works, nothing answers 5xx
	// through the Service, and a second claim is refused.
	next := repo + ":" + tag + "-next"
	node.TagImage(normalizeRef(serverRef), normalizeRef(next))
	values = append(values, "--set", "image.tag="+tag+"-next")
	watch := watchGate(t, people, reset.Key)
	helmIn("upgrade", "terdut-server", chartDir(t))
	waitRollout(t, api, 2)
	if seen := watch(); seen.requests == 0 || len(seen.bad) > 0 {
		t.Fatalf("during the rolling upgrade, GET /api/me with the key (%d requests): unexpected answers %v", seen.requests, seen.bad)
	}
	if images := podImages(t, api); len(images) != 2 || images[0] != normalizeRef(next) || images[1] != normalizeRef(next) {
		t.Fatalf("after the upgrade the pods run %v, want two of %s", images, normalizeRef(next))
	}
	if st := operator.status(t); st != "complete" {
		t.Fatalf("the claim after the upgrade: got %q, want complete", st)
	}

	// The kubelet rotates the projected token at 80% of its 600 s life: the operator's next
	// reset is made with the new token and accepted.
	rotated := operator.waitRotation(t, tokenBefore)
	again := operator.reconcile(t, "")
	if again.Action != "reset_and_claimed" || again.Generation != 3 {
		t.Fatalf("the operator's reconcile with the rotated token (iat %d, was %d): got %v, want reset_and_claimed, generation 3",
			rotated.Iat, tokenBefore.Iat, again)
	}
}

// startDatabase starts Postgres on the node's bridge (the pods reach it there; the test on
// loopback) with a role and database for terdut-server, which signs in with a password. It
// returns the URL the server's Secret holds.
func startDatabase(t *testing.T) string {
	t.Helper()
	// Postgres runs as its own user, which must read the file: not in t.TempDir() (0700).
	dir, err := os.MkdirTemp("", "nodetest-hba-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	hba := filepath.Join(dir, "pg_hba.conf")
	rules := "local all all trust\nhost all all 127.0.0.1/32 trust\nhost terdut terdut " + nodetest.Gateway + "/24 scram-sha-256\n"
	if err := os.WriteFile(hba, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cluster, err := pglocal.Start(ctx, pglocal.Options{Settings: map[string]string{
		"listen_addresses": "127.0.0.1," + nodetest.Gateway, "hba_file": hba, "password_encryption": "scram-sha-256"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Stop(); err != nil {
			t.Error(err)
		}
	})
	conn, err := pgx.Connect(ctx, cluster.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	password := "node-" + strings.ReplaceAll(t.Name(), "/", "-")
	for _, stmt := range []string{
		"CREATE ROLE terdut LOGIN PASSWORD '" + password + "'",
		"CREATE DATABASE terdut OWNER terdut",
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword("terdut", password),
		Host: fmt.Sprintf("%s:%d", nodetest.Gateway, cluster.Port), Path: "/terdut", RawQuery: "sslmode=disable"}
	return u.String()
}

// podAgentImage builds test/harness/nodetest/podagent as a static binary and its one-layer image.
func podAgentImage(t *testing.T) (archive, ref string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "podagent")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "github.com/terdut-server/terdut-server/test/harness/nodetest/podagent")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build podagent: %v\n%s", err, out)
	}
	ref = "terdut.test/podagent:1"
	archive, err := ociimage.Binary(dir, ref, bin, ociimage.Config{Entrypoint: []string{"/podagent"}, User: "65532:65532"})
	if err != nil {
		t.Fatal(err)
	}
	return archive, ref
}

// normalizeRef is an image reference as containerd names it: docker.io/library/ for a bare
// name, as the kubelet asks for it.
func normalizeRef(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	if !ok {
		return "docker.io/library/" + ref
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// waitRollout waits until the Deployment's generation is observed and every replica is
// updated, available and Ready, with no old replica left.
func waitRollout(t *testing.T, api *kubetest.APIServer, generation int64) {
	t.Helper()
	deadline := time.Now().Add(podBound)
	var last string
	for time.Now().Before(deadline) {
		var d struct {
			Metadata struct{ Generation int64 } `json:"metadata"`
			Spec     struct{ Replicas int }     `json:"spec"`
			Status   struct {
				ObservedGeneration                                          int64
				Replicas, UpdatedReplicas, ReadyReplicas, AvailableReplicas int
			} `json:"status"`
		}
		status, body := api.Do(http.MethodGet, "/apis/apps/v1/namespaces/"+releaseNS+"/deployments/terdut-server", nil)
		if status == http.StatusOK {
			if err := json.Unmarshal(body, &d); err != nil {
				t.Fatal(err)
			}
			s := d.Status
			last = fmt.Sprintf("%+v", s)
			if d.Metadata.Generation == generation && s.ObservedGeneration == generation && s.Replicas == d.Spec.Replicas &&
				s.UpdatedReplicas == d.Spec.Replicas && s.ReadyReplicas == d.Spec.Replicas && s.AvailableReplicas == d.Spec.Replicas {
				return
			}
		}
		time.Sleep(time.Second)
	}
	t.Fatalf("the Deployment's generation %d did not roll out within %s (%s); its pods:\n%s", generation, podBound, last, api.Get("/api/v1/namespaces/"+releaseNS+"/pods"))
}

// podImages lists the images the release's running pods were made with (their spec: the
// runtime names an image by the first of its names, and the upgrade's is a second name of
// the same image).
func podImages(t *testing.T, api *kubetest.APIServer) []string {
	t.Helper()
	var pods struct {
		Items []struct {
			Metadata struct{ DeletionTimestamp *string } `json:"metadata"`
			Spec     struct {
				Containers []struct{ Image string } `json:"containers"`
			} `json:"spec"`
			Status struct{ Phase string } `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(api.Get("/api/v1/namespaces/"+releaseNS+"/pods?labelSelector=app.kubernetes.io/name%3Dterdut-server"), &pods); err != nil {
		t.Fatal(err)
	}
	var images []string
	for _, p := range pods.Items {
		if p.Metadata.DeletionTimestamp != nil || p.Status.Phase != "Running" {
			continue
		}
		for _, c := range p.Spec.Containers {
			images = append(images, normalizeRef(c.Image))
		}
	}
	return images
}
