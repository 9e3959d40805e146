package docs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/terdut-server/terdut-server/client"
	"github.com/terdut-server/terdut-server/internal/optoken"
)

// The parts of the Kubernetes objects the tests check; everything else is ignored.
type (
	k8sObject struct {
		APIVersion string `yaml:"apiVersion"`
		Kind       string `yaml:"kind"`
		Metadata   struct {
			Name      string `yaml:"name"`
			Namespace string `yaml:"namespace"`
		} `yaml:"metadata"`
		node yaml.Node
		file string
	}
	k8sDeployment struct {
		Spec struct {
			Replicas int `yaml:"replicas"`
			Selector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"selector"`
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec struct {
					SecurityContext struct {
						RunAsNonRoot *bool `yaml:"runAsNonRoot"`
						RunAsUser    int   `yaml:"runAsUser"`
					} `yaml:"securityContext"`
					Containers []k8sContainer `yaml:"containers"`
					Volumes    []struct {
						Name   string `yaml:"name"`
						Secret *struct {
							SecretName string `yaml:"secretName"`
						} `yaml:"secret"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	k8sContainer struct {
		Args []string `yaml:"args"`
		Env  []struct {
			Name  string `yaml:"name"`
			Value string `yaml:"value"`
		} `yaml:"env"`
		Ports           []k8sPort `yaml:"ports"`
		LivenessProbe   k8sProbe  `yaml:"livenessProbe"`
		ReadinessProbe  k8sProbe  `yaml:"readinessProbe"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
			Capabilities             struct {
				Drop []string `yaml:"drop"`
			} `yaml:"capabilities"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			SubPath   string `yaml:"subPath"`
		} `yaml:"volumeMounts"`
	}
	k8sPort struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	}
	k8sProbe struct {
		HTTPGet *struct {
			Path string `yaml:"path"`
			Port string `yaml:"port"`
		} `yaml:"httpGet"`
	}
	k8sSecret struct {
		StringData map[string]string `yaml:"stringData"`
	}
	k8sService struct {
		Spec struct {
			Selector map[string]string `yaml:"selector"`
			Ports    []struct {
				Port       int    `yaml:"port"`
				TargetPort string `yaml:"targetPort"`
			} `yaml:"ports"`
		} `yaml:"spec"`
	}
	k8sNetworkPolicy struct {
		Spec struct {
			PodSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"podSelector"`
			PolicyTypes []string `yaml:"policyTypes"`
			Ingress     []struct {
				From []struct {
					NamespaceSelector *struct {
						MatchLabels map[string]string `yaml:"matchLabels"`
					} `yaml:"namespaceSelector"`
				} `yaml:"from"`
				Ports []struct {
					Port int `yaml:"port"`
				} `yaml:"ports"`
			} `yaml:"ingress"`
		} `yaml:"spec"`
	}
)

// manifestDir holds the example manifests.
const manifestDir = "../deploy/kubernetes"

// mustManifests parses every document of every YAML file in manifestDir.
func mustManifests(t *testing.T) []k8sObject {
	t.Helper()
	return mustManifestsIn(t, manifestDir)
}

// mustManifestsIn parses every document of every YAML file in dir (not below it).
func mustManifestsIn(t *testing.T, dir string) []k8sObject {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("got files %v (%v), want the example manifests in %s", files, err, dir)
	}
	var objs []k8sObject
	for _, f := range files {
		objs = append(objs, mustManifestFile(t, f)...)
	}
	return objs
}

// mustManifestFile parses every document of the YAML file f.
func mustManifestFile(t *testing.T, f string) []k8sObject {
	t.Helper()
	r, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var objs []k8sObject
	dec := yaml.NewDecoder(r)
	for {
		var o k8sObject
		err := dec.Decode(&o.node)
		if errors.Is(err, io.EOF) {
			return objs
		}
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if err := o.node.Decode(&o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		o.file = filepath.Base(f)
		objs = append(objs, o)
	}
}

// decode reads the object into the typed view v, failing the test if it does not fit.
func (o k8sObject) decode(t *testing.T, v any) {
	t.Helper()
	if err := o.node.Decode(v); err != nil {
		t.Fatalf("%s: %s %s: %v", o.file, o.Kind, o.Metadata.Name, err)
	}
}

// flagPattern finds the flags that parseConfig defines, such as fs.StringVar(&x, "listen", ...).
var flagPattern = regexp.MustCompile(`fs\.\w+Var\(&[\w.]+,\s*"([a-z0-9-]+)"`)

// mustConfigMatches returns the first group of every match of pattern in config*.go of
// cmd/terdut-server (not its tests), each once, in the order found.
func mustConfigMatches(t *testing.T, pattern *regexp.Regexp) []string {
	t.Helper()
	files, err := filepath.Glob("../cmd/terdut-server/config*.go")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pattern.FindAllStringSubmatch(string(src), -1) {
			if !slices.Contains(found, m[1]) {
				found = append(found, m[1])
			}
		}
	}
	return found
}

// mustServeFlags returns the names of terdut-server's flags, read from its source: config.go
// and the config_*.go files beside it.
func mustServeFlags(t *testing.T) []string {
	t.Helper()
	flags := mustConfigMatches(t, flagPattern)
	// The pattern must keep finding them: a config.go written differently would otherwise
	// leave nothing to check against.
	for _, want := range []string{"listen", "database-url-file", "operator-token-file", "bootstrap-gate", "oidc-issuer", "operator-oidc-issuer"} {
		if !slices.Contains(flags, want) {
			t.Fatalf("got flags %v from config.go, want them to include %q: has the way flags are defined changed?", flags, want)
		}
	}
	return flags
}

// envFlag returns the flag that a TERDUT_* variable sets: TERDUT_DATABASE_URL_FILE is database-url-file.
func envFlag(env string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(env, "TERDUT_"), "_", "-"))
}

func TestKubernetesManifests(t *testing.T) {
	objs := mustManifests(t)
	flags := mustServeFlags(t)
	byKind := map[string][]k8sObject{}
	for _, o := range objs {
		if o.Kind == "Namespace" {
			if o.Metadata.Name != "terdut" {
				t.Errorf("%s: got the Namespace %q, want terdut", o.file, o.Metadata.Name)
			}
		} else if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" || o.Metadata.Namespace != "terdut" {
			t.Errorf("%s: got apiVersion %q kind %q name %q namespace %q, want all set and namespace terdut",
				o.file, o.APIVersion, o.Kind, o.Metadata.Name, o.Metadata.Namespace)
		}
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	for kind, n := range map[string]int{"Namespace": 1, "Deployment": 1, "Service": 1, "NetworkPolicy": 1, "Secret": 3,
		"PodDisruptionBudget": 1, "Ingress": 1} {
		if got := len(byKind[kind]); got != n {
			t.Fatalf("got %d objects of kind %s, want %d", got, kind, n)
		}
	}
	secrets := map[string]map[string]string{}
	for _, o := range byKind["Secret"] {
		var s k8sSecret
		o.decode(t, &s)
		secrets[o.Metadata.Name] = s.StringData
	}
	var d k8sDeployment
	byKind["Deployment"][0].decode(t, &d)
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	podLabels := d.Spec.Template.Metadata.Labels

	t.Run("Deployment", func(t *testing.T) {
		if d.Spec.Replicas != 2 {
			t.Errorf("got %d replicas, want 2", d.Spec.Replicas)
		}
		if !labelsMatch(d.Spec.Selector.MatchLabels, podLabels) {
			t.Errorf("got selector %v, want it to match the pod's labels %v", d.Spec.Selector.MatchLabels, podLabels)
		}
		sc := c.SecurityContext
		if pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot || pod.SecurityContext.RunAsUser != 65532 {
			t.Errorf("got pod runAsNonRoot %v runAsUser %d, want true and 65532", pod.SecurityContext.RunAsNonRoot, pod.SecurityContext.RunAsUser)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
			!slices.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
			t.Errorf("got container securityContext %+v, want readOnlyRootFilesystem, no privilege escalation and capabilities dropped: [ALL]", sc)
		}
		mustPorts(t, c)
		for name, p := range map[string]struct {
			probe k8sProbe
			path  string
		}{"liveness": {c.LivenessProbe, "/healthz"}, "readiness": {c.ReadinessProbe, "/readyz"}} {
			// On people's port: the operator's answers every other path 404.
			if p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || (p.probe.HTTPGet.Port != "http" && p.probe.HTTPGet.Port != "8080") {
				t.Errorf("got %s probe %+v, want GET %s on port http (8080)", name, p.probe.HTTPGet, p.path)
			}
		}
	})

	t.Run("Flags", func(t *testing.T) {
		for _, a := range c.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			if !strings.HasPrefix(a, "--") || !(slices.Contains(flags, name)) {
				t.Errorf("got argument %q, want a flag of config.go (%s)", a, strings.Join(flags, ", "))
			}
		}
		for _, e := range c.Env {
			if !strings.HasPrefix(e.Name, "TERDUT_") || !slices.Contains(flags, envFlag(e.Name)) {
				t.Errorf("got variable %s, want the TERDUT_* variable of a flag of config.go", e.Name)
			}
		}
	})

	// Each secret file the server is pointed at must be a key of a Secret mounted as a
	// directory: a subPath mount would never see a rotated Secret.
	t.Run("SecretFiles", func(t *testing.T) {
		files := map[string]string{} // setting → path
		for _, a := range c.Args {
			if name, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok && strings.HasSuffix(name, "-file") {
				files["--"+name] = v
			}
		}
		for _, e := range c.Env {
			if strings.HasSuffix(e.Name, "_FILE") {
				files[e.Name] = e.Value
			}
		}
		for _, want := range []string{"--operator-token-file", "--oidc-client-secret-file", "TERDUT_DATABASE_URL_FILE"} {
			if _, ok := files[want]; !ok {
				t.Errorf("got secret files %v, want %s set", files, want)
			}
		}
		for setting, file := range files {
			secret, key := "", path.Base(file)
			for _, m := range c.VolumeMounts {
				if path.Dir(file) != m.MountPath {
					continue
				}
				if m.SubPath != "" {
					t.Errorf("%s: got volume %s mounted with subPath, want the whole Secret mounted so that updates reach the file", setting, m.Name)
				}
				for _, v := range pod.Volumes {
					if v.Name == m.Name && v.Secret != nil {
						secret = v.Secret.SecretName
					}
				}
			}
			if _, ok := secrets[secret][key]; !ok {
				t.Errorf("%s=%s: got Secret %q mounted there, want a Secret of secrets.yaml with the key %q", setting, file, secret, key)
			}
		}
		// The example token must never run: a published token would let anyone claim.
		if _, err := optoken.Parse([]byte(secrets["terdut-server-operator-token"]["token"])); err == nil {
			t.Errorf("got an example operator token the server accepts, want a placeholder it refuses")
		}
	})

	t.Run("Service", func(t *testing.T) {
		var s k8sService
		byKind["Service"][0].decode(t, &s)
		if !labelsMatch(s.Spec.Selector, podLabels) {
			t.Errorf("got selector %v, want it to match the pod's labels %v", s.Spec.Selector, podLabels)
		}
		mustServicePorts(t, s, c)
	})

	t.Run("NetworkPolicy", func(t *testing.T) {
		var np k8sNetworkPolicy
		byKind["NetworkPolicy"][0].decode(t, &np)
		if !labelsMatch(np.Spec.PodSelector.MatchLabels, podLabels) || !slices.Contains(np.Spec.PolicyTypes, "Ingress") {
			t.Errorf("got podSelector %v policyTypes %v, want the pod's labels %v and Ingress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes, podLabels)
		}
		mustPortsPolicy(t, np)
	})
}

// Ports of terdut-server's pod: people's (--listen), the operator's (--operator-listen),
// Alertmanager's webhook's (--webhook-listen) and the metrics port (--metrics-listen).
const (
	peoplePort   = 8080
	operatorPort = 8081
	webhookPort  = 8082
	metricsPort  = 9090
)

// mustPorts checks that the container names people's port http, the operator's operator,
// the webhook's webhook and the metrics port metrics, and listens on them: --listen,
// --operator-listen, --webhook-listen and --metrics-listen name the same numbers.
func mustPorts(t *testing.T, c k8sContainer) {
	t.Helper()
	got := map[string]int{}
	for _, p := range c.Ports {
		got[p.Name] = p.ContainerPort
	}
	if len(c.Ports) != 4 || got["http"] != peoplePort || got["operator"] != operatorPort || got["webhook"] != webhookPort || got["metrics"] != metricsPort {
		t.Errorf("got ports %+v, want http %d, operator %d, webhook %d and metrics %d", c.Ports, peoplePort, operatorPort, webhookPort, metricsPort)
	}
	for flag, want := range map[string]string{"--listen": ":8080", "--operator-listen": ":8081", "--webhook-listen": ":8082", "--metrics-listen": ":9090"} {
		if !slices.Contains(c.Args, flag+"="+want) {
			t.Errorf("got arguments %q, want %s=%s", c.Args, flag, want)
		}
	}
}

// mustServicePorts checks that the Service exposes the container's four ports, by name.
func mustServicePorts(t *testing.T, s k8sService, c k8sContainer) {
	t.Helper()
	targets := map[string]int{}
	for _, p := range s.Spec.Ports {
		targets[p.TargetPort] = p.Port
	}
	if len(s.Spec.Ports) != 4 || targets["http"] != peoplePort || targets["operator"] != operatorPort || targets["webhook"] != webhookPort || targets["metrics"] != metricsPort {
		t.Errorf("got ports %+v, want %d to targetPort http, %d to targetPort operator, %d to targetPort webhook and %d to targetPort metrics",
			s.Spec.Ports, peoplePort, operatorPort, webhookPort, metricsPort)
	}
	for target := range targets {
		if !slices.ContainsFunc(c.Ports, func(p k8sPort) bool { return p.Name == target }) {
			t.Errorf("the Service's targetPort %q is no port of the container %+v", target, c.Ports)
		}
	}
}

// mustPortsPolicy checks that the operator's namespace reaches the operator's port and
// nothing else, that nobody else reaches the operator's port, that the webhook's port is
// opened to Alertmanager's namespace and the people's port is not, and that the metrics port
// is opened (to Prometheus's namespace): no rule opens every port or admits every source.
func mustPortsPolicy(t *testing.T, np k8sNetworkPolicy) {
	t.Helper()
	const operatorNamespace = "terdut-operator-system"
	operator, people, webhook, metrics := false, false, false, false
	opened := map[int][]string{} // port → the namespaces admitted to it
	for _, rule := range np.Spec.Ingress {
		for _, p := range rule.Ports {
			for _, from := range rule.From {
				if from.NamespaceSelector != nil {
					opened[p.Port] = append(opened[p.Port], from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
	}
	for _, ns := range opened[webhookPort] {
		if slices.Contains(opened[peoplePort], ns) {
			t.Errorf("got %s, Alertmanager's namespace, admitted to the people's port %d too; want it at the webhook's port %d alone", ns, peoplePort, webhookPort)
		}
	}
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) == 0 || len(rule.Ports) == 0 {
			t.Errorf("ingress rule %d: got from %d sources and %d ports, want both named (an empty list admits everything)", i, len(rule.From), len(rule.Ports))
			continue
		}
		fromOperator := false
		for _, from := range rule.From {
			if from.NamespaceSelector == nil || from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "" {
				t.Errorf("ingress rule %d: got a source %+v, want a namespace named by kubernetes.io/metadata.name", i, from)
			} else if from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == operatorNamespace {
				fromOperator = true
			}
		}
		for _, p := range rule.Ports {
			switch {
			case fromOperator && p.Port == operatorPort && len(rule.From) == 1:
				operator = true
			case !fromOperator && p.Port == peoplePort:
				people = true
			case !fromOperator && p.Port == webhookPort && len(rule.Ports) == 1:
				webhook = true
			case !fromOperator && p.Port == metricsPort:
				metrics = true
			default:
				t.Errorf("ingress rule %d: opens port %d to %+v; want the operator's namespace to reach %d alone, Alertmanager's %d alone, and others %d or %d alone",
					i, p.Port, rule.From, operatorPort, webhookPort, peoplePort, metricsPort)
			}
		}
	}
	if !operator || !people || !webhook || !metrics {
		t.Errorf("got a rule opening %d to %s: %v, a rule opening %d to another namespace (the ingress controller's): %v, a rule opening %d alone to another (Alertmanager's): %v, a rule opening %d to another (Prometheus's): %v; want all four",
			operatorPort, operatorNamespace, operator, peoplePort, people, webhookPort, webhook, metricsPort, metrics)
	}
}

// labelsMatch reports whether every label of selector is on labels (and selector selects something).
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

// TestDockerfile checks the image against what the manifests expect of it (test/e2e/image runs
// the image itself).
func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(b)
	// The bases are build arguments so that scripts/server-image.sh can build the same file
	// with no registry; their defaults are the golang builder and the distroless runtime.
	for _, want := range []string{"ARG BUILDER_IMAGE=golang:1.26\n", "FROM ${BUILDER_IMAGE} AS build",
		"ARG RUNTIME_IMAGE=", "/distroless/static:nonroot\n", "FROM ${RUNTIME_IMAGE}\n", "CGO_ENABLED=0", "-trimpath",
		"USER 65532:65532", "EXPOSE 8080", `ENTRYPOINT ["/terdut-server"]`} {
		if !strings.Contains(df, want) {
			t.Errorf("got a Dockerfile without %q, want it", want)
		}
	}
}

// otherFlags are flags of other programs that the pages may name: kube-apiserver's, where
// kubernetes.md says how a cluster's issuer is set up (test/harness/kubetest passes each of them
// to the real kube-apiserver, so they are its flags at the release the suite runs).
var otherFlags = []string{"--service-account-jwks-uri", "--service-account-issuer", "--service-account-key-file",
	"--service-account-signing-key-file",
	// kubectl's and helm's, in the commands of install.md and bootstrap.md (the chart's tests
	// run helm with the same flags: test/harness/helmtest).
	"--namespace", "--create-namespace", "--set", "--from-literal", "--from-file", "--raw", "--audience", "--duration"}

// commandFlags are terdut-server's flags that are no setting.
var commandFlags = []string{"--help", "--version"}

// developerPages are the pages about developing terdut-server, which name the variables of
// its tests and scripts (TERDUT_TEST_*, ...) and the flags of the tools they run (docker,
// debootstrap): each variable they name must be one the repository's code or scripts read,
// and their flags are not terdut-server's.
var developerPages = []string{"developing.md"}

// mustRepositoryText returns the text of the repository's Go files, scripts and Makefile,
// where the variables of developerPages are read.
func mustRepositoryText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "docs" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if ext := filepath.Ext(path); ext != ".go" && ext != ".sh" && d.Name() != "Makefile" {
			return nil
		}
		data, err := os.ReadFile(path)
		b.Write(data)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestDocs_Settings checks that every flag and TERDUT_* variable each page names is one
// terdut-server has (or, for a flag, one of otherFlags); on developerPages, that every
// variable is one the repository reads.
func TestDocs_Settings(t *testing.T) {
	flags, vars := mustServeFlags(t), mustServeVariables(t)
	repository := mustRepositoryText(t)
	for _, page := range mustDocPages(t) {
		t.Run(strings.TrimSuffix(page, ".md"), func(t *testing.T) {
			doc, err := os.ReadFile(page)
			if err != nil {
				t.Fatal(err)
			}
			named := map[string]bool{} // each flag (--x) and variable the page names, once
			for _, m := range regexp.MustCompile(`--[a-z][a-z0-9-]+|\bTERDUT_[A-Z_]+`).FindAllString(string(doc), -1) {
				named[m] = true
			}
			for name := range named {
				known := slices.Contains(flags, strings.TrimPrefix(name, "--")) || slices.Contains(otherFlags, name) ||
					slices.Contains(commandFlags, name)
				if strings.HasPrefix(name, "TERDUT_") {
					known = slices.Contains(docVars, name) || slices.Contains(flags, envFlag(name)) || slices.Contains(vars, name)
				}
				if slices.Contains(developerPages, page) {
					// A tool's flag, or a variable of the tests and scripts that they read.
					known = !strings.HasPrefix(name, "TERDUT_") || known || strings.Contains(repository, name)
				}
				if !known {
					t.Errorf("%s names %s, want a flag of config.go or its TERDUT_* variable (%s), or one of %v %v", page, name, strings.Join(flags, ", "), docVars, otherFlags)
				}
			}
			if page == "bootstrap.md" && len(named) < 5 {
				t.Fatalf("got %d flags and variables in %s, want at least 5: is the page being read?", len(named), page)
			}
		})
	}
}

// TestDocs_Client checks that the client names the pages use are the client's, and that
// bootstrap.md describes each action of Reconcile.
func TestDocs_Client(t *testing.T) {
	errs := map[string]error{"ErrAlreadyClaimed": client.ErrAlreadyClaimed, "ErrUnauthorized": client.ErrUnauthorized,
		"ErrOperatorTokenNotConfigured": client.ErrOperatorTokenNotConfigured, "ErrRateLimited": client.ErrRateLimited,
		"ErrBootstrapPending": client.ErrBootstrapPending, "ErrUnavailable": client.ErrUnavailable}
	for _, page := range mustDocPages(t) {
		doc, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		named := regexp.MustCompile(`\bErr[A-Z]\w*`).FindAllString(string(doc), -1)
		if page == "bootstrap.md" && len(named) == 0 {
			t.Fatalf("got no client errors named in %s, want the table of the reconcile's outcomes", page)
		}
		for _, name := range named {
			if _, ok := errs[name]; !ok {
				t.Errorf("%s names %s, want an error of package client", page, name)
			}
		}
		if page != "bootstrap.md" {
			continue
		}
		for _, a := range []client.Action{client.ActionNone, client.ActionClaimed, client.ActionResetAndClaimed} {
			if !strings.Contains(string(doc), "**`"+string(a)+"`**") {
				t.Errorf("got no **`%s`** in %s, want each action of Reconcile described", a, page)
			}
		}
	}
}
