package kubetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Object names one object of a manifest.
type Object struct {
	APIVersion, Kind, Namespace, Name string
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// Apply applies every document of a YAML manifest as `kubectl apply --server-side
// --field-validation=Strict` does: a server-side apply patch of the document's own text, so
// that the API server, not a client's decoding, judges unknown and duplicate fields. It
// returns the objects applied, and the first refusal with the object it was for.
func (a *APIServer) Apply(manifest []byte) ([]Object, error) {
	a.tb.Helper()
	var applied []Object
	for _, doc := range docSeparator.Split(string(manifest), -1) {
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Metadata   struct {
				Name      string `yaml:"name"`
				Namespace string `yaml:"namespace"`
			} `yaml:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return applied, fmt.Errorf("a document is not YAML: %w", err)
		}
		if head.Kind == "" && head.APIVersion == "" {
			continue // comments only
		}
		o := Object{head.APIVersion, head.Kind, head.Metadata.Namespace, head.Metadata.Name}
		path, err := a.resourcePath(o)
		if err != nil {
			return applied, err
		}
		status, body := a.Do(http.MethodPatch, path+query("fieldManager", "terdut-kubetest", "fieldValidation", "Strict", "force", "true"), applyPatch(doc))
		if status != http.StatusOK && status != http.StatusCreated {
			return applied, fmt.Errorf("%s: the API server answered %d: %s", o, status, reason(body))
		}
		applied = append(applied, o)
	}
	return applied, nil
}

// MustApplyFiles applies each manifest file with Apply, failing the test on a file that cannot
// be read or an object the API server refuses.
func (a *APIServer) MustApplyFiles(paths ...string) {
	a.tb.Helper()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			a.tb.Fatal(err)
		}
		if _, err := a.Apply(b); err != nil {
			a.tb.Fatalf("kubetest: apply %s: %v", p, err)
		}
	}
}

// applyPatch is a body sent as a server-side apply patch.
type applyPatch string

// resourcePath is the URL path of object o, found through the API server's discovery.
func (a *APIServer) resourcePath(o Object) (string, error) {
	base := "/apis/" + o.APIVersion
	if !strings.Contains(o.APIVersion, "/") {
		base = "/api/" + o.APIVersion
	}
	status, body := a.Do(http.MethodGet, base, nil)
	if status != http.StatusOK {
		return "", fmt.Errorf("%s: the API server does not serve %s (%d)", o, o.APIVersion, status)
	}
	var list struct {
		Resources []struct {
			Name       string `json:"name"`
			Kind       string `json:"kind"`
			Namespaced bool   `json:"namespaced"`
		} `json:"resources"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return "", err
	}
	for _, r := range list.Resources {
		if r.Kind != o.Kind || strings.Contains(r.Name, "/") {
			continue
		}
		switch {
		case r.Namespaced && o.Namespace == "":
			return "", fmt.Errorf("%s: a namespaced kind without metadata.namespace", o)
		case r.Namespaced:
			return base + "/namespaces/" + o.Namespace + "/" + r.Name + "/" + o.Name, nil
		default:
			return base + "/" + r.Name + "/" + o.Name, nil
		}
	}
	return "", fmt.Errorf("%s: the API server has no kind %s in %s", o, o.Kind, o.APIVersion)
}

// reason is the message of an API server's Status answer, or the body.
func reason(body []byte) string {
	var st struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return st.Message
	}
	return string(body)
}

// Access is one question for an access review: a verb on a resource (Resource set, in
// Namespace, of Group, and on its Subresource when set, such as "token" of
// "serviceaccounts") or on a path of the API (Path set).
type Access struct {
	Verb, Group, Resource, Subresource, Namespace, Name, Path string
}

func (x Access) String() string {
	if x.Path != "" {
		return x.Verb + " " + x.Path
	}
	r := x.Resource
	if x.Group != "" {
		r += "." + x.Group
	}
	if x.Namespace != "" {
		r = x.Namespace + "/" + r
	}
	if x.Name != "" {
		r += "/" + x.Name
	}
	if x.Subresource != "" {
		r += "/" + x.Subresource // as in the URL: serviceaccounts/NAME/token
	}
	return x.Verb + " " + r
}

// Allowed asks the API server (a SubjectAccessReview) whether service account ns/sa may do x.
func (a *APIServer) Allowed(ns, sa string, x Access) bool {
	a.tb.Helper()
	spec := map[string]any{"user": "system:serviceaccount:" + ns + ":" + sa,
		"groups": []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	if x.Path != "" {
		spec["nonResourceAttributes"] = map[string]any{"path": x.Path, "verb": x.Verb}
	} else {
		spec["resourceAttributes"] = map[string]any{"namespace": x.Namespace, "verb": x.Verb, "group": x.Group,
			"resource": x.Resource, "subresource": x.Subresource, "name": x.Name}
	}
	var out struct {
		Status struct {
			Allowed bool `json:"allowed"`
		} `json:"status"`
	}
	a.MustDo(http.MethodPost, "/apis/authorization.k8s.io/v1/subjectaccessreviews",
		map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}, &out, http.StatusCreated)
	return out.Status.Allowed
}

// Rules are what a SelfSubjectRulesReview lists for a caller in one namespace. Incomplete
// is the API server's word that an authorizer could not list its rules (never with RBAC
// alone, as Start runs it): the lists are then not all the caller may do.
type Rules struct {
	Incomplete    bool `json:"incomplete"`
	ResourceRules []struct {
		Verbs         []string `json:"verbs"`
		APIGroups     []string `json:"apiGroups"`
		Resources     []string `json:"resources"`
		ResourceNames []string `json:"resourceNames"`
	} `json:"resourceRules"`
	NonResourceRules []struct {
		Verbs           []string `json:"verbs"`
		NonResourceURLs []string `json:"nonResourceURLs"`
	} `json:"nonResourceRules"`
}

// RulesOf lists everything the holder of token may do in namespace ns, asked as that caller
// (a SelfSubjectRulesReview).
func (a *APIServer) RulesOf(token, ns string) Rules {
	a.tb.Helper()
	status, body := a.DoAs(token, http.MethodPost, "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews",
		map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "spec": map[string]any{"namespace": ns}})
	var out struct {
		Status Rules `json:"status"`
	}
	if status != http.StatusCreated || json.Unmarshal(body, &out) != nil {
		a.tb.Fatalf("kubetest: SelfSubjectRulesReview in %s: got %d %s, want 201", ns, status, body)
	}
	return out.Status
}
