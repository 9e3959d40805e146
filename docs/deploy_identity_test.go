package docs

import (
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// identityDir holds the variant of the manifests in which the operator proves itself with
// its service-account token, with no operator-token Secret.
const identityDir = manifestDir + "/service-account-identity"

// operatorSnippet finds, in docs/install.md, the part of terdut-operator's pod that makes it
// the operator of terdut-server: the YAML block after the marker below, a pod spec's fields.
var operatorSnippet = regexp.MustCompile("(?s)<!-- terdut-operator's pod -->\\s*```yaml\\n(.*?)```")

// mustOperatorPod reads the snippet of docs/install.md that terdut-operator's own manifests
// (its values) must carry for the service-account identity.
func mustOperatorPod(t *testing.T) k8sPodSpec {
	t.Helper()
	b, err := os.ReadFile("install.md")
	if err != nil {
		t.Fatal(err)
	}
	m := operatorSnippet.FindSubmatch(b)
	if m == nil {
		t.Fatalf("got no block after <!-- terdut-operator's pod --> in docs/install.md, want the operator's snippet")
	}
	var p k8sPodSpec
	if err := yaml.Unmarshal(m[1], &p); err != nil {
		t.Fatalf("docs/install.md: the operator's snippet: %v", err)
	}
	return p
}

type (
	k8sPodSpec struct {
		ServiceAccountName string `yaml:"serviceAccountName"`
		Containers         []struct {
			Name         string `yaml:"name"`
			Args         []string
			Env          []struct{ Name, Value string }
			Ports        []k8sPort `yaml:"ports"`
			VolumeMounts []struct {
				Name      string `yaml:"name"`
				MountPath string `yaml:"mountPath"`
				SubPath   string `yaml:"subPath"`
			} `yaml:"volumeMounts"`
		} `yaml:"containers"`
		Volumes []struct {
			Name   string `yaml:"name"`
			Secret *struct {
				SecretName string `yaml:"secretName"`
			} `yaml:"secret"`
			Projected *struct {
				Sources []struct {
					ServiceAccountToken *struct {
						Audience          string `yaml:"audience"`
						ExpirationSeconds int    `yaml:"expirationSeconds"`
						Path              string `yaml:"path"`
					} `yaml:"serviceAccountToken"`
					ConfigMap *struct {
						Name  string `yaml:"name"`
						Items []struct{ Key, Path string }
					} `yaml:"configMap"`
				} `yaml:"sources"`
			} `yaml:"projected"`
		} `yaml:"volumes"`
	}
	k8sPodTemplateOwner struct {
		Spec struct {
			Template struct {
				Metadata struct {
					Labels map[string]string `yaml:"labels"`
				} `yaml:"metadata"`
				Spec k8sPodSpec `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	k8sClusterRoleBinding struct {
		RoleRef  struct{ Kind, Name string } `yaml:"roleRef"`
		Subjects []struct{ Kind, Name, Namespace string }
	}
)

// projectedFile says what a file of a projected volume holds: "token:<audience>" (audience
// "" for the API server) or "configmap:<name>/<key>".
func (p k8sPodSpec) projectedFile(container int, file string) (what string, expiration int) {
	for _, m := range p.Containers[container].VolumeMounts {
		if m.MountPath != path.Dir(file) || m.SubPath != "" {
			continue
		}
		for _, v := range p.Volumes {
			if v.Name != m.Name || v.Projected == nil {
				continue
			}
			for _, src := range v.Projected.Sources {
				if t := src.ServiceAccountToken; t != nil && t.Path == path.Base(file) {
					return "token:" + t.Audience, t.ExpirationSeconds
				}
				if c := src.ConfigMap; c != nil {
					for _, it := range c.Items {
						if it.Path == path.Base(file) {
							return "configmap:" + c.Name + "/" + it.Key, 0
						}
					}
				}
			}
		}
	}
	return "", 0
}

// TestKubernetesManifests_ServiceAccountIdentity checks the variant without an operator
// secret: the server's settings are flags the binary has, name the operator's service
// account, read the cluster's CA and the server's own token from a projected volume; the
// operator's pod (docs/install.md's snippet for terdut-operator's own manifests: none of its
// objects is here) has a projected token for the audience the server wants; no
// operator-token Secret is used anywhere; and the Service and NetworkPolicy select the
// server's pods, whose ports are the ones they open.
func TestKubernetesManifests_ServiceAccountIdentity(t *testing.T) {
	flags := mustServeFlags(t)
	byKindName := map[string]k8sObject{}
	secrets := map[string]map[string]string{}
	for _, o := range mustManifestsIn(t, identityDir) {
		if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
			t.Errorf("%s: got apiVersion %q kind %q name %q, want all set", o.file, o.APIVersion, o.Kind, o.Metadata.Name)
		}
		byKindName[o.Kind+"/"+o.Metadata.Namespace+"/"+o.Metadata.Name] = o
		if o.Kind == "Secret" {
			var s k8sSecret
			o.decode(t, &s)
			secrets[o.Metadata.Name] = s.StringData
		}
	}
	get := func(key string, v any) {
		t.Helper()
		o, ok := byKindName[key]
		if !ok {
			t.Fatalf("got no %s in %s, want one", key, identityDir)
		}
		o.decode(t, v)
	}
	var server k8sPodTemplateOwner
	get("Deployment/terdut/terdut-server", &server)
	// terdut-operator's own objects are its manifests', never these: what its pod needs is
	// the snippet of docs/install.md.
	for key := range byKindName {
		if strings.Contains(key, "/terdut-operator-system/") {
			t.Errorf("got %s in %s, want none of terdut-operator's own objects", key, identityDir)
		}
	}
	opPod := mustOperatorPod(t)
	pod := server.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	settings := map[string]string{} // flag name → value, from arguments and variables
	for _, a := range pod.Containers[0].Args {
		name, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		if !strings.HasPrefix(a, "--") || !(slices.Contains(flags, name)) {
			t.Errorf("got argument %q, want a flag of the binary (%s)", a, strings.Join(flags, ", "))
		}
		settings[name] = v
	}
	for _, e := range pod.Containers[0].Env {
		if !strings.HasPrefix(e.Name, "TERDUT_") || !slices.Contains(flags, envFlag(e.Name)) {
			t.Errorf("got variable %s, want the TERDUT_* variable of a flag of the binary", e.Name)
		}
		settings[envFlag(e.Name)] = e.Value
	}

	t.Run("NoOperatorSecret", func(t *testing.T) {
		if v, ok := settings["operator-token-file"]; ok {
			t.Errorf("got --operator-token-file=%s, want none", v)
		}
		for name := range secrets {
			if strings.Contains(name, "operator") {
				t.Errorf("got the Secret %s, want no operator secret", name)
			}
		}
		for _, v := range pod.Volumes {
			if v.Secret != nil && strings.Contains(v.Secret.SecretName, "operator") {
				t.Errorf("got the volume %s of Secret %s, want no operator secret", v.Name, v.Secret.SecretName)
			}
		}
	})

	t.Run("OperatorIdentity", func(t *testing.T) {
		if !strings.HasPrefix(settings["operator-oidc-issuer"], "https://") {
			t.Errorf("got --operator-oidc-issuer=%q, want the cluster's https issuer", settings["operator-oidc-issuer"])
		}
		if opPod.ServiceAccountName == "" {
			t.Fatalf("got no serviceAccountName in the operator's snippet, want its account")
		}
		want := "system:serviceaccount:terdut-operator-system:" + opPod.ServiceAccountName
		if subjects := strings.Split(settings["operator-oidc-subjects"], ","); !slices.Contains(subjects, want) {
			t.Errorf("got --operator-oidc-subjects=%q, want it to hold the operator's %s", settings["operator-oidc-subjects"], want)
		}
		audience := "terdut-server" // the flag's default
		if v, ok := settings["operator-oidc-audience"]; ok {
			audience = v
		}
		found := false
		for i := range opPod.Containers {
			for _, m := range opPod.Containers[i].VolumeMounts {
				what, exp := opPod.projectedFile(i, m.MountPath+"/token")
				if what == "token:"+audience && exp == 3600 {
					found = true
				}
			}
		}
		if !found {
			t.Errorf("got no projected serviceAccountToken with audience %s and expirationSeconds 3600 mounted in the operator's snippet, want one", audience)
		}
	})

	t.Run("IssuerAccess", func(t *testing.T) {
		if what, _ := pod.projectedFile(0, settings["operator-oidc-ca-file"]); what != "configmap:kube-root-ca.crt/ca.crt" {
			t.Errorf("--operator-oidc-ca-file=%s: got %q mounted there, want the cluster's CA (configMap kube-root-ca.crt, key ca.crt)",
				settings["operator-oidc-ca-file"], what)
		}
		tokenFile, ok := settings["operator-oidc-issuer-token-file"]
		if !ok {
			tokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" // the flag's default
		}
		if what, _ := pod.projectedFile(0, tokenFile); what != "token:" {
			t.Errorf("--operator-oidc-issuer-token-file=%s: got %q mounted there, want the server's own token for the API server", tokenFile, what)
		}
		var sa struct{}
		get("ServiceAccount/terdut/"+pod.ServiceAccountName, &sa)
		bound := false
		for key, o := range byKindName {
			if !strings.HasPrefix(key, "ClusterRoleBinding/") {
				continue
			}
			var b k8sClusterRoleBinding
			o.decode(t, &b)
			for _, s := range b.Subjects {
				if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "system:service-account-issuer-discovery" &&
					s.Kind == "ServiceAccount" && s.Name == pod.ServiceAccountName && s.Namespace == "terdut" {
					bound = true
				}
			}
		}
		if !bound {
			t.Errorf("got no ClusterRoleBinding of system:service-account-issuer-discovery to the server's service account %s, want one", pod.ServiceAccountName)
		}
	})

	t.Run("SecretFiles", func(t *testing.T) {
		for name, file := range settings {
			if !strings.HasSuffix(name, "-file") || strings.HasPrefix(name, "operator-oidc-") {
				continue
			}
			secret := ""
			for _, m := range pod.Containers[0].VolumeMounts {
				for _, v := range pod.Volumes {
					if m.MountPath == path.Dir(file) && m.SubPath == "" && v.Name == m.Name && v.Secret != nil {
						secret = v.Secret.SecretName
					}
				}
			}
			if _, ok := secrets[secret][path.Base(file)]; !ok {
				t.Errorf("--%s=%s: got Secret %q mounted there, want a Secret of this directory with the key %q", name, file, secret, path.Base(file))
			}
		}
	})

	t.Run("ServiceAndNetworkPolicy", func(t *testing.T) {
		labels := server.Spec.Template.Metadata.Labels
		c := k8sContainer{Args: pod.Containers[0].Args, Ports: pod.Containers[0].Ports}
		mustPorts(t, c)
		for _, o := range byKindName {
			switch o.Kind {
			case "Service":
				var s k8sService
				o.decode(t, &s)
				if !labelsMatch(s.Spec.Selector, labels) {
					t.Errorf("the Service's selector %v does not select the variant's pods %v", s.Spec.Selector, labels)
				}
				mustServicePorts(t, s, c)
			case "NetworkPolicy":
				var np k8sNetworkPolicy
				o.decode(t, &np)
				if !labelsMatch(np.Spec.PodSelector.MatchLabels, labels) {
					t.Errorf("the NetworkPolicy's podSelector %v does not select the variant's pods %v", np.Spec.PodSelector.MatchLabels, labels)
				}
			}
		}
	})
}
