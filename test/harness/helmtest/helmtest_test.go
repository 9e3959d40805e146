//go:build chart

package helmtest

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// presets are the names of the chart's ci/<name>-values.yaml files.
func presets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir(t), "ci", "*-values.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("got presets %v (%v), want the chart's ci/*-values.yaml", files, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), "-values.yaml"))
	}
	return names
}

// render is `helm template` of the chart as the release terdut-server in ns with the values
// files and flags given.
func render(t *testing.T, ns string, args ...string) []byte {
	t.Helper()
	out, errOut, err := helm(t, append([]string{"template", "terdut-server", chartDir(t), "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, errOut)
	}
	return []byte(out)
}

// object is a rendered object, with its typed head and the whole document.
type object struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name      string `yaml:"name"`
		Namespace string `yaml:"namespace"`
	} `yaml:"metadata"`
	doc map[string]any
}

// objects parses every document of a rendering.
func objects(t *testing.T, manifest []byte) []object {
	t.Helper()
	dec := yaml.NewDecoder(bytes.NewReader(manifest))
	var objs []object
	for {
		var n yaml.Node
		err := dec.Decode(&n)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("rendering is not YAML: %v", err)
		}
		var o object
		if err := n.Decode(&o); err != nil {
			t.Fatal(err)
		}
		if o.Kind == "" {
			continue
		}
		if err := n.Decode(&o.doc); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, o)
	}
}

// kinds lists the kinds of objs, sorted, once each.
func kinds(objs []object) []string {
	var k []string
	for _, o := range objs {
		if !slices.Contains(k, o.Kind) {
			k = append(k, o.Kind)
		}
	}
	slices.Sort(k)
	return k
}

// TestChart_Lint runs `helm lint --strict` on the chart with its defaults and with each preset.
func TestChart_Lint(t *testing.T) {
	args := [][]string{nil}
	for _, p := range presets(t) {
		args = append(args, []string{"-f", presetFile(t, p)})
	}
	for _, a := range args {
		out, errOut, err := helm(t, append([]string{"lint", "--strict", chartDir(t)}, a...)...)
		if err != nil {
			t.Errorf("helm lint --strict %v: %v\n%s%s", a, err, out, errOut)
		}
	}
}

// TestChart_SchemaRefuses gives the chart values it must refuse, each with the name of what
// is wrong in the refusal, and checks that helm template refuses them and says so.
func TestChart_SchemaRefuses(t *testing.T) {
	for _, c := range []struct {
		name string
		set  []string
		want string // in the refusal
	}{
		{"unknown value", []string{"replica=2"}, "replica"},
		{"unknown nested value", []string{"database.urll.key=url"}, "urll"},
		{"mistyped number", []string{"replicas=two"}, "replicas"},
		{"mistyped boolean", []string{"tls.enabled=yes"}, "enabled"},
		{"no replica", []string{"replicas=0"}, "replicas"},
		{"unknown identity", []string{"operator.identity=secret"}, "identity"},
		{"unknown database mode", []string{"database.mode=postgres"}, "mode"},
		{"unknown layout", []string{"operator.identity=serviceAccount", "operator.serviceAccount.layout=eks"}, "layout"},
		{"public URL without scheme", []string{"publicURL=terdut.example.com"}, "publicURL"},
		{"plain http issuer", []string{"operator.serviceAccount.issuer=http://issuer.example.com"}, "issuer"},
		{"port out of range", []string{"ports.operator=70000"}, "operator"},
		{"trusted proxy not an address", []string{"trustedProxies[0]=ingress"}, "trustedProxies"},
		{"an argument that is no flag", []string{"extraArgs[0]=rm"}, "extraArgs"},
		{"unknown route", []string{"route.kind=gateway"}, "kind"},
		{"unknown update strategy", []string{"updateStrategy=recreate"}, "updateStrategy"},
		{"external issuer not given", []string{"operator.identity=serviceAccount", "operator.serviceAccount.layout=external"}, "operator.serviceAccount.issuer"},
		// Single sign-on says who may sign in; an upgrade does not turn it off without a word.
		{"single sign-on for every account unasked", []string{"sso.enabled=true", "sso.issuer=https://sso.example.com"}, "sso.allowedGroups is empty"},
		{"single sign-on without an issuer", []string{"sso.enabled=true", "sso.allowedGroups={oncall}"}, "sso.issuer"},
		{"single sign-on both ways", []string{"sso.enabled=true", "sso.issuer=https://sso.example.com", "sso.allowedGroups={oncall}", "sso.allowAllAccounts=true"}, "sso.allowAllAccounts"},
		{"an issuer left without enabled", []string{"sso.issuer=https://sso.example.com", "sso.allowedGroups={oncall}"}, "sso.enabled"},
		{"an allowAllAccounts that is no boolean", []string{"sso.allowAllAccounts=yes"}, "allowAllAccounts"},
		// Alertmanager's webhook port and the AlertmanagerConfig.
		{"webhook port out of range", []string{"alertmanager.webhookPort=0"}, "webhookPort"},
		{"webhook port that is no number", []string{"alertmanager.webhookPort=webhook"}, "webhookPort"},
		{"Alertmanager's namespace no name", []string{"alertmanager.namespaces={Monitoring}"}, "namespaces"},
		{"webhook port shared with the people's", []string{"alertmanager.webhookPort=8080"}, "alertmanager.webhookPort 8080 is also ports.people"},
		{"webhook port shared with the operator's", []string{"alertmanager.webhookPort=8081"}, "alertmanager.webhookPort 8081 is also ports.operator"},
		{"webhook port shared with the metrics'", []string{"alertmanager.webhookPort=9090"}, "alertmanager.webhookPort 9090 is also metrics.port"},
		{"Alertmanager admitted to the people's port behind trusted proxies",
			[]string{"trustedProxies={10.244.0.0/16}", "networkPolicy.people.namespaces={ingress,monitoring}"}, "networkPolicy.people.namespaces lists monitoring"},
		{"an AlertmanagerConfig enabled that is no boolean", []string{"alertmanager.config.enabled=yes"}, "enabled"},
		{"an AlertmanagerConfig's namespace no name", []string{"alertmanager.config.namespace=Monitoring"}, "namespace"},
		{"an AlertmanagerConfig without its Secret", []string{"alertmanager.config.keySecret.secretName="}, "secretName"},
		{"an AlertmanagerConfig's key no key", []string{"alertmanager.config.keySecret.key=a key"}, "key"},
		{"an AlertmanagerConfig's interval no duration", []string{"alertmanager.config.route.repeatInterval=4 hours"}, "repeatInterval"},
		{"an unknown AlertmanagerConfig value", []string{"alertmanager.config.url=http://example.com"}, "url"},
		{"an AlertmanagerConfig to a port nobody may reach", []string{"alertmanager.config.enabled=true", "alertmanager.namespaces=null"},
			"alertmanager.config.enabled sends Alertmanager to the webhook's port, and alertmanager.namespaces admits no namespace to it"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"template", "terdut-server", chartDir(t), "--namespace", "terdut"}
			for _, s := range c.set {
				args = append(args, "--set", s)
			}
			out, errOut, err := helm(t, args...)
			if err == nil {
				t.Fatalf("--set %v: got a rendering of %d bytes, want a refusal", c.set, len(out))
			}
			if !strings.Contains(errOut, c.want) {
				t.Errorf("--set %v: got the refusal %q, want it to name %q", c.set, errOut, c.want)
			}
		})
	}
}

// renderedFiles are deploy/kubernetes's files that are renderings of a preset: whoever
// applies the manifests with kubectl gets what the chart installs.
var renderedFiles = map[string]string{
	"terdut-server.yaml":                          "token",
	"service-account-identity/terdut-server.yaml": "kubeadm",
}

// TestChart_DeployKubernetesIsRendered checks that deploy/kubernetes's renderings are the
// chart's, byte for byte. TERDUT_CHART_UPDATE=1 writes them instead.
func TestChart_DeployKubernetesIsRendered(t *testing.T) {
	dir := filepath.Join(chartDir(t), "..", "..", "kubernetes")
	for file, preset := range renderedFiles {
		head := "# Rendered from deploy/helm/terdut-server with ci/" + preset + "-values.yaml and createNamespace=true\n" +
			"# (the release terdut-server in the namespace terdut): do not edit, change the chart and run\n" +
			"# TERDUT_CHART_UPDATE=1 make chart. The Secrets it reads are in secrets.yaml beside it.\n"
		want := head + string(render(t, "terdut", "-f", presetFile(t, preset), "--set", "createNamespace=true"))
		p := filepath.Join(dir, file)
		if os.Getenv("TERDUT_CHART_UPDATE") == "1" {
			if err := os.WriteFile(p, []byte(want), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not the chart's rendering of ci/%s-values.yaml: run TERDUT_CHART_UPDATE=1 make chart", p, preset)
		}
	}
}

// TestChart_ShutdownDelay: a replica being replaced sleeps shutdownDelaySeconds in preStop
// (a sleep hook, Kubernetes 1.30 and later) and its grace period covers the sleep and the
// server's drain; on an older cluster, which would refuse the hook, none is rendered; 0 turns
// it off.
func TestChart_ShutdownDelay(t *testing.T) {
	for _, c := range []struct {
		kube, delay string
		hook        bool
		grace       string
	}{
		{"1.30.0", "5", true, "35"}, {"1.34.2", "12", true, "42"}, {"1.29.9", "5", false, "35"}, {"1.34.2", "0", false, "30"},
	} {
		out := string(render(t, "terdut", "-f", presetFile(t, "token"), "--kube-version", c.kube, "--set", "shutdownDelaySeconds="+c.delay))
		hook := strings.Contains(out, "preStop:\n              sleep:\n                seconds: "+c.delay+"\n")
		if hook != c.hook || strings.Contains(out, "preStop") != c.hook {
			t.Errorf("Kubernetes %s, shutdownDelaySeconds %s: preStop sleep rendered %v, want %v", c.kube, c.delay, hook, c.hook)
		}
		if !strings.Contains(out, "terminationGracePeriodSeconds: "+c.grace+"\n") {
			t.Errorf("Kubernetes %s, shutdownDelaySeconds %s: want terminationGracePeriodSeconds %s", c.kube, c.delay, c.grace)
		}
	}
}
