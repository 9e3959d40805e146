//go:build kube

package docs

import (
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/terdut-server/terdut-server/test/harness/kubetest"
)

// mustManifestTree returns every YAML file under manifestDir, walked, by directory.
func mustManifestTree(t *testing.T) map[string][]string {
	t.Helper()
	tree := map[string][]string{}
	err := filepath.WalkDir(manifestDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			tree[filepath.Dir(p)] = append(tree[filepath.Dir(p)], p)
		}
		return err
	})
	if err != nil || len(tree) == 0 {
		t.Fatalf("walking %s: got %v (%v), want its YAML files", manifestDir, tree, err)
	}
	return tree
}

// mustApplyDir starts an API server of its own, creates the namespaces the files name (in
// metadata.namespace and in a NetworkPolicy's namespace selectors), as an administrator's
// `kubectl create namespace` would before applying, and applies every document of every
// file with strict validation. A refusal, or a file whose objects are not all applied,
// fails the test naming the file and the object. It returns the server and the kinds
// applied.
func mustApplyDir(t *testing.T, files []string) (*kubetest.APIServer, map[string]bool) {
	t.Helper()
	a := kubetest.Start(t, kubetest.Options{})
	want := map[string][]kubetest.Object{}
	namespaces := map[string]bool{}
	for _, f := range files {
		for _, o := range mustManifestFile(t, f) {
			if o.Kind == "" && o.APIVersion == "" {
				continue // comments only, as Apply skips them
			}
			want[f] = append(want[f], kubetest.Object{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: o.Metadata.Namespace, Name: o.Metadata.Name})
			namespaces[o.Metadata.Namespace] = true
			if o.Kind == "NetworkPolicy" {
				var np k8sNetworkPolicy
				o.decode(t, &np)
				for _, in := range np.Spec.Ingress {
					for _, from := range in.From {
						if from.NamespaceSelector != nil {
							namespaces[from.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]] = true
						}
					}
				}
			}
		}
	}
	delete(namespaces, "")
	for _, ns := range slices.Sorted(maps.Keys(namespaces)) {
		a.CreateNamespace(ns)
	}
	kinds := map[string]bool{}
	for _, f := range files {
		manifest, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Apply(manifest)
		if err != nil {
			t.Fatalf("%s: refused: %v", f, err)
		}
		if len(got) == 0 || !slices.Equal(got, want[f]) {
			t.Errorf("%s: got %v applied, want %v (every document, at least one)", f, got, want[f])
		}
		for _, o := range got {
			kinds[o.Kind] = true
		}
	}
	return a, kinds
}

// TestKube_ManifestsApply applies every YAML file under deploy/kubernetes to a real API
// server with server-side apply and strict field validation, each directory (each way to
// install) to a fresh server, so that no object of one variant (both have a Deployment
// terdut/terdut-server) hides a refusal of the other's. Between them they must apply every
// kind the manifests hold.
func TestKube_ManifestsApply(t *testing.T) {
	tree := mustManifestTree(t)
	if _, ok := tree[identityDir]; !ok {
		t.Fatalf("got directories %v, want %s among them", slices.Sorted(maps.Keys(tree)), identityDir)
	}
	applied := map[string]bool{}
	for _, dir := range slices.Sorted(maps.Keys(tree)) {
		t.Run(filepath.Base(dir), func(t *testing.T) {
			_, kinds := mustApplyDir(t, tree[dir])
			maps.Copy(applied, kinds)
		})
	}
	if t.Failed() {
		return // a directory refused: its kinds are missing for that reason
	}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Deployment", "NetworkPolicy", "Secret", "Service", "ServiceAccount"} {
		if !applied[kind] {
			t.Errorf("got kinds %v applied, want %s among them", slices.Sorted(maps.Keys(applied)), kind)
		}
	}
}

// The rules the API server's bootstrap policy gives every service account, found by asking
// it (SelfSubjectRulesReview) as service accounts bound to nothing else. To every
// authenticated caller: system:basic-user's self reviews, and system:discovery's and
// system:public-info-viewer's paths. To every service account (the group
// system:serviceaccounts): system:service-account-issuer-discovery's paths and
// system:cluster-trust-bundle-discovery's read of ClusterTrustBundles. Each is
// "verb group resource" or "verb path".
var kubeDefaultRules = []string{
	"create authorization.k8s.io selfsubjectaccessreviews",
	"create authorization.k8s.io selfsubjectrulesreviews",
	"create authentication.k8s.io selfsubjectreviews",
	"get /api", "get /api/*", "get /apis", "get /apis/*",
	"get /healthz", "get /livez", "get /readyz", "get /version", "get /version/",
	"get /openapi", "get /openapi/*",
	"get /.well-known/openid-configuration", "get /.well-known/openid-configuration/",
	"get /openid/v1/jwks", "get /openid/v1/jwks/",
	"get certificates.k8s.io clustertrustbundles",
	"list certificates.k8s.io clustertrustbundles",
	"watch certificates.k8s.io clustertrustbundles",
}

// kubeServerGrants are what the chart grants terdut-server's account (kubeadm's preset).
var kubeServerGrants = []kubetest.Access{
	{Verb: "get", Path: "/.well-known/openid-configuration"},
	{Verb: "get", Path: "/openid/v1/jwks"},
	{Verb: "create", Group: "authentication.k8s.io", Resource: "tokenreviews"},
}

// ruleKeys flattens rules into "verb group resource" (with "/name" for a rule limited to
// names) and "verb path" keys, one per combination a rule allows.
func ruleKeys(r kubetest.Rules) []string {
	var keys []string
	for _, rr := range r.ResourceRules {
		names := rr.ResourceNames
		if len(names) == 0 {
			names = []string{""}
		}
		for _, v := range rr.Verbs {
			for _, g := range rr.APIGroups {
				for _, res := range rr.Resources {
					for _, n := range names {
						key := v + " " + groupName(g) + " " + res
						if n != "" {
							key += "/" + n
						}
						keys = append(keys, key)
					}
				}
			}
		}
	}
	for _, nr := range r.NonResourceRules {
		for _, v := range nr.Verbs {
			for _, u := range nr.NonResourceURLs {
				keys = append(keys, v+" "+u)
			}
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// accessKey is x as ruleKeys spells a rule that allows it.
func accessKey(x kubetest.Access) string {
	if x.Path != "" {
		return x.Verb + " " + x.Path
	}
	return x.Verb + " " + groupName(x.Group) + " " + x.Resource
}

// groupName spells the core API group, "", so that a key shows it.
func groupName(g string) string {
	if g == "" {
		return `""`
	}
	return g
}

// mustOnlyRules fails the test unless every rule of got is one of allowed, and every one
// of must is among them, printing what the API server answered.
func mustOnlyRules(t *testing.T, who string, got kubetest.Rules, allowed, must []string) {
	t.Helper()
	keys := ruleKeys(got)
	if got.Incomplete {
		t.Errorf("%s: the API server says its rules are incomplete, want the whole list", who)
	}
	for _, k := range keys {
		if !slices.Contains(allowed, k) {
			t.Errorf("%s: got the rule %q, want only the allow-list %q", who, k, allowed)
		}
	}
	for _, k := range must {
		if !slices.Contains(keys, k) {
			t.Errorf("%s: got no rule %q, want it", who, k)
		}
	}
	if t.Failed() {
		t.Logf("%s: the API server lists:\n  %s", who, strings.Join(keys, "\n  "))
	}
}
