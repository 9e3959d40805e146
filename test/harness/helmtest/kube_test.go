//go:build chart

package helmtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// crdBound bounds how long a CRD may take to be served: a hang, not the speed.
const crdBound = time.Minute

// startCluster starts a real API server with the CRDs the chart's objects need: Gateway
// API's standard channel and the Prometheus Operator's ServiceMonitor, PrometheusRule and
// AlertmanagerConfig.
func startCluster(t *testing.T) *kubetest.APIServer {
	t.Helper()
	tl := tools(t)
	a := kubetest.Start(t, kubetest.Options{})
	files, err := GatewayCRDs()
	if err != nil {
		t.Fatal(err)
	}
	monitoring, err := MonitoringCRDs(tl, t.TempDir(), "servicemonitors", "prometheusrules", "alertmanagerconfigs")
	if err != nil {
		t.Fatal(err)
	}
	zalando, err := ZalandoCRD()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range append(append(files, monitoring...), zalando) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := a.Apply(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			if o.Kind == "CustomResourceDefinition" {
				names = append(names, o.Name)
			}
		}
	}
	for _, name := range names {
		waitEstablished(t, a, name)
	}
	return a
}

// waitEstablished waits until the API server serves the CRD name.
func waitEstablished(t *testing.T, a *kubetest.APIServer, name string) {
	t.Helper()
	deadline := time.Now().Add(crdBound)
	for {
		var crd struct {
			Status struct {
				Conditions []struct{ Type, Status string } `json:"conditions"`
			} `json:"status"`
		}
		a.MustDo(http.MethodGet, "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"+name, nil, &crd, http.StatusOK)
		if slices.ContainsFunc(crd.Status.Conditions, func(c struct{ Type, Status string }) bool {
			return c.Type == "Established" && c.Status == "True"
		}) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the CRD %s: not established within %s", name, crdBound)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestKubeChart applies every preset's rendering to a real API server with server-side apply
// and strict field validation (each in a namespace of its own), then installs, upgrades and
// rolls back a release with helm against it.
func TestKubeChart(t *testing.T) {
	a := startCluster(t)

	t.Run("ApplyPresets", func(t *testing.T) {
		for _, p := range presets(t) {
			t.Run(p, func(t *testing.T) {
				ns := "terdut-" + p
				manifest := render(t, ns, "-f", presetFile(t, p), "--set", "createNamespace=true")
				want := objects(t, manifest)
				got, err := a.Apply(manifest)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if len(got) != len(want) {
					t.Errorf("got %d objects applied (%v), want every one of the %d rendered", len(got), got, len(want))
				}
			})
		}
	})

	// The AlertmanagerConfig of every preset, in the namespace Alertmanager runs in, as the
	// Prometheus Operator's CRD defines it (strict: a field it does not know is refused), and
	// read back with the receiver's settings the API server kept.
	t.Run("AlertmanagerConfig", func(t *testing.T) {
		if _, err := a.Apply([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: monitoring}\n")); err != nil {
			t.Fatal(err)
		}
		for _, p := range presets(t) {
			t.Run(p, func(t *testing.T) {
				ns := "terdut-am-" + p
				manifest := render(t, ns, "-f", presetFile(t, p), "--set", "createNamespace=true",
					"--set", "alertmanager.config.enabled=true", "--set", "alertmanager.config.labels.release=kube-prometheus-stack")
				got, err := a.Apply(manifest)
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if !slices.ContainsFunc(got, func(o kubetest.Object) bool { return o.Kind == "AlertmanagerConfig" && o.Namespace == "monitoring" }) {
					t.Fatalf("got %v applied, want an AlertmanagerConfig in monitoring", got)
				}
				// Each preset's release is named alike; its namespace tells them apart.
				var c struct {
					Spec struct {
						Receivers []struct {
							WebhookConfigs []struct {
								URL          string `json:"url"`
								SendResolved *bool  `json:"sendResolved"`
								HTTPConfig   struct {
									Authorization struct {
										Credentials struct{ Name, Key string } `json:"credentials"`
									} `json:"authorization"`
								} `json:"httpConfig"`
							} `json:"webhookConfigs"`
						} `json:"receivers"`
					} `json:"spec"`
				}
				a.MustDo(http.MethodGet, "/apis/monitoring.coreos.com/v1alpha1/namespaces/monitoring/alertmanagerconfigs/terdut-server", nil, &c, http.StatusOK)
				if len(c.Spec.Receivers) != 1 || len(c.Spec.Receivers[0].WebhookConfigs) != 1 {
					t.Fatalf("got the receivers %+v, want one webhook", c.Spec.Receivers)
				}
				w := c.Spec.Receivers[0].WebhookConfigs[0]
				if !strings.Contains(w.URL, "://terdut-server."+ns+".svc:8082/api/webhooks/alertmanager") || w.SendResolved == nil || !*w.SendResolved ||
					w.HTTPConfig.Authorization.Credentials.Name != "terdut-server-alertmanager" || w.HTTPConfig.Authorization.Credentials.Key != "key" {
					t.Errorf("got the webhook %+v as the API server keeps it, want the Service's webhook port in %s, resolutions and the key's Secret", w, ns)
				}
			})
		}
		// The check has teeth: Alertmanager's own spelling of a field, which the CRD does not
		// know, is refused rather than dropped.
		manifest := string(render(t, "terdut-am-token", "-f", presetFile(t, "token"), "--set", "alertmanager.config.enabled=true",
			"--show-only", "templates/alertmanagerconfig.yaml"))
		misspelt := strings.Replace(manifest, "sendResolved: true", "send_resolved: true", 1)
		if misspelt == manifest {
			t.Fatalf("got no sendResolved in\n%s", manifest)
		}
		if _, err := a.Apply([]byte(misspelt)); err == nil || !strings.Contains(err.Error(), "send_resolved") {
			t.Errorf("an AlertmanagerConfig with send_resolved: got %v, want a refusal naming the field", err)
		}
	})

	// docs/install.md's postgresql resource, as Zalando's postgres-operator defines it: every
	// field known to its CRD, and the names the zalando preset reads (the credentials Secret
	// of its user, the pooler's Service) the ones the operator makes from it.
	t.Run("ZalandoExample", func(t *testing.T) {
		doc := zalandoExample(t)
		if _, err := a.Apply([]byte("apiVersion: v1\nkind: Namespace\nmetadata: {name: terdut}\n")); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Apply([]byte(doc)); err != nil {
			t.Fatalf("docs/install.md's postgresql resource refused: %v", err)
		}
		var pg struct {
			Metadata struct{ Name string } `yaml:"metadata"`
			Spec     struct {
				Users                  map[string][]string   `yaml:"users"`
				EnableConnectionPooler bool                  `yaml:"enableConnectionPooler"`
				ConnectionPooler       struct{ Mode string } `yaml:"connectionPooler"`
			} `yaml:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &pg); err != nil {
			t.Fatal(err)
		}
		var values struct {
			Database struct {
				Pooler  string `yaml:"pooler"`
				Zalando struct {
					SecretName string `yaml:"secretName"`
					Host       string `yaml:"host"`
				} `yaml:"zalando"`
			} `yaml:"database"`
		}
		b, err := os.ReadFile(presetFile(t, "zalando"))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(b, &values); err != nil {
			t.Fatal(err)
		}
		z := values.Database.Zalando
		if _, ok := pg.Spec.Users["terdut"]; !ok || z.SecretName != "terdut."+pg.Metadata.Name+".credentials.postgresql.acid.zalan.do" {
			t.Errorf("the zalando preset reads the Secret %q; the example's cluster %q with users %v makes <user>.%s.credentials.postgresql.acid.zalan.do",
				z.SecretName, pg.Metadata.Name, pg.Spec.Users, pg.Metadata.Name)
		}
		if !pg.Spec.EnableConnectionPooler || pg.Spec.ConnectionPooler.Mode != "transaction" ||
			z.Host != pg.Metadata.Name+"-pooler" || values.Database.Pooler != "transaction" {
			t.Errorf("the example's pooler (enabled %v, mode %q) and the preset's host %q, pooler %q: want the transaction-mode pooler's Service %s-pooler with pooler: transaction",
				pg.Spec.EnableConnectionPooler, pg.Spec.ConnectionPooler.Mode, z.Host, values.Database.Pooler, pg.Metadata.Name)
		}
	})

	t.Run("InstallUpgradeRollback", func(t *testing.T) {
		const ns = "terdut-helm"
		kubeconfig := a.Kubeconfig()
		run := func(args ...string) string {
			t.Helper()
			out, errOut, err := helm(t, append(args, "--kubeconfig", kubeconfig, "--namespace", ns)...)
			if err != nil {
				t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
			}
			return out
		}
		exists := func(path string) bool {
			t.Helper()
			status, body := a.Do(http.MethodGet, path, nil)
			if status != http.StatusOK && status != http.StatusNotFound {
				t.Fatalf("GET %s: %d %s", path, status, body)
			}
			return status == http.StatusOK
		}
		args := func() []string {
			t.Helper()
			var d struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Args []string `json:"args"`
							} `json:"containers"`
						} `json:"spec"`
					} `json:"template"`
				} `json:"spec"`
			}
			a.MustDo(http.MethodGet, "/apis/apps/v1/namespaces/"+ns+"/deployments/terdut-server", nil, &d, http.StatusOK)
			return d.Spec.Template.Spec.Containers[0].Args
		}
		ingress := "/apis/networking.k8s.io/v1/namespaces/" + ns + "/ingresses/terdut-server"
		route := "/apis/gateway.networking.k8s.io/v1/namespaces/" + ns + "/httproutes/terdut-server"
		monitor := "/apis/monitoring.coreos.com/v1/namespaces/" + ns + "/servicemonitors/terdut-server"
		rule := "/apis/monitoring.coreos.com/v1/namespaces/" + ns + "/prometheusrules/terdut-server"
		account := "/api/v1/namespaces/" + ns + "/serviceaccounts/terdut-server"

		// Revision 1: the operator's token, an Ingress, and the server's own account.
		run("install", "terdut-server", chartDir(t), "--create-namespace", "-f", presetFile(t, "token"))
		if !slices.Contains(args(), "--operator-token-file=/etc/terdut/operator-token/token") || !exists(ingress) || exists(route) || !exists(account) {
			t.Fatalf("after install: got args %q, Ingress %v, HTTPRoute %v, ServiceAccount %v; want the token preset's",
				args(), exists(ingress), exists(route), exists(account))
		}
		// Revision 2: Zalando's database, an HTTPRoute, the ServiceMonitor and the alerts.
		run("upgrade", "terdut-server", chartDir(t), "-f", presetFile(t, "zalando"))
		if exists(ingress) || !exists(route) || !exists(monitor) || !exists(rule) {
			t.Errorf("after upgrade: got Ingress %v, HTTPRoute %v, ServiceMonitor %v, PrometheusRule %v; want all but the Ingress",
				exists(ingress), exists(route), exists(monitor), exists(rule))
		}
		// Revision 3: the service-account identity of kubeadm's layout.
		run("upgrade", "terdut-server", chartDir(t), "-f", presetFile(t, "kubeadm"))
		if !exists(account) || slices.Contains(args(), "--operator-token-file=/etc/terdut/operator-token/token") {
			t.Errorf("after the second upgrade: got ServiceAccount %v and args %q; want the account and no token file", exists(account), args())
		}
		// A mistyped value is refused before anything changes.
		if out, errOut, err := helm(t, "upgrade", "terdut-server", chartDir(t), "-f", presetFile(t, "kubeadm"), "--set", "replicas=two",
			"--kubeconfig", kubeconfig, "--namespace", ns); err == nil {
			t.Errorf("upgrade with replicas=two: got success %s, want a refusal", out)
		} else if !strings.Contains(errOut, "replicas") {
			t.Errorf("upgrade with replicas=two: got %q, want a refusal naming replicas", errOut)
		}
		// Revision 4: back to revision 1, whose pods run as the server's own account too.
		run("rollback", "terdut-server", "1")
		if !slices.Contains(args(), "--operator-token-file=/etc/terdut/operator-token/token") || !exists(ingress) ||
			exists(route) || exists(monitor) || exists(rule) || !exists(account) {
			t.Errorf("after rollback to 1: got args %q, Ingress %v, HTTPRoute %v, ServiceMonitor %v, PrometheusRule %v, ServiceAccount %v; want revision 1's",
				args(), exists(ingress), exists(route), exists(monitor), exists(rule), exists(account))
		}
		var history []struct {
			Revision int    `json:"revision"`
			Status   string `json:"status"`
		}
		if err := json.Unmarshal([]byte(run("history", "terdut-server", "-o", "json")), &history); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, h := range history {
			got = append(got, fmt.Sprintf("%d %s", h.Revision, h.Status))
		}
		if want := []string{"1 superseded", "2 superseded", "3 superseded", "4 deployed"}; !slices.Equal(got, want) {
			t.Errorf("got history %q, want %q", got, want)
		}
		run("uninstall", "terdut-server")
		if exists("/apis/apps/v1/namespaces/" + ns + "/deployments/terdut-server") {
			t.Errorf("after uninstall: the Deployment is still there")
		}
	})
}

// zalandoExample is the first yaml block of docs/install.md that holds a postgresql resource.
func zalandoExample(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(chartDir(t), "..", "..", "..", "docs", "install.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if strings.Contains(block, "apiVersion: acid.zalan.do/v1") && strings.Contains(block, "kind: postgresql") {
			return block
		}
	}
	t.Fatal("docs/install.md has no yaml block with a postgresql resource")
	return ""
}
