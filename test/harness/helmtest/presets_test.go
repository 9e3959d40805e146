//go:build chart

package helmtest

import (
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// deployment is the part of the Deployment the preset checks read.
type deployment struct {
	Spec struct {
		Template struct {
			Metadata struct {
				Labels map[string]string `yaml:"labels"`
			} `yaml:"metadata"`
			Spec struct {
				Containers []struct {
					Args []string `yaml:"args"`
					Env  []struct {
						Name      string `yaml:"name"`
						Value     string `yaml:"value"`
						ValueFrom *struct {
							SecretKeyRef *struct {
								Name string `yaml:"name"`
								Key  string `yaml:"key"`
							} `yaml:"secretKeyRef"`
						} `yaml:"valueFrom"`
					} `yaml:"env"`
					VolumeMounts []struct {
						Name      string `yaml:"name"`
						MountPath string `yaml:"mountPath"`
					} `yaml:"volumeMounts"`
					ReadinessProbe struct {
						HTTPGet struct {
							Scheme string `yaml:"scheme"`
						} `yaml:"httpGet"`
					} `yaml:"readinessProbe"`
				} `yaml:"containers"`
				Volumes []struct {
					Name   string `yaml:"name"`
					Secret *struct {
						SecretName string `yaml:"secretName"`
						Items      []struct {
							Key string `yaml:"key"`
						} `yaml:"items"`
					} `yaml:"secret"`
				} `yaml:"volumes"`
				TopologySpreadConstraints []struct {
					TopologyKey string `yaml:"topologyKey"`
				} `yaml:"topologySpreadConstraints"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// decodeInto reads o's document into the typed view v.
func decodeInto(t *testing.T, o object, v any) {
	t.Helper()
	b, err := yaml.Marshal(o.doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s %s: %v", o.Kind, o.Metadata.Name, err)
	}
}

// TestChart_Presets renders each preset and checks what its layout needs, the way the
// server reads it: the flags of the operator's identity per layout, the database's
// variables, the routes, the monitoring objects.
func TestChart_Presets(t *testing.T) {
	type check func(t *testing.T, d deployment, args []string, ks []string)
	hasArg := func(args []string, a string) bool { return slices.Contains(args, a) }
	argPrefix := func(args []string, p string) bool {
		return slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, p) })
	}
	checks := map[string]check{
		"token": func(t *testing.T, d deployment, args, ks []string) {
			// Postgres directly: the default, which the chart leaves to the server.
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "TERDUT_DATABASE_POOLER" {
					t.Errorf("got TERDUT_DATABASE_POOLER=%s, want none set with database.pooler none", e.Value)
				}
			}
			if !hasArg(args, "--operator-token-file=/etc/terdut/operator-token/token") || argPrefix(args, "--operator-oidc-") {
				t.Errorf("got %q, want --operator-token-file and no --operator-oidc-*", args)
			}
			// The server's own account, with no permission: no RBAC with the operator token.
			if !slices.Contains(ks, "Ingress") || !slices.Contains(ks, "ServiceAccount") || slices.Contains(ks, "HTTPRoute") ||
				slices.Contains(ks, "ClusterRole") || slices.Contains(ks, "ClusterRoleBinding") {
				t.Errorf("got kinds %v, want an Ingress, a ServiceAccount, no HTTPRoute and no RBAC", ks)
			}
		},
		"kubeadm": func(t *testing.T, d deployment, args, ks []string) {
			for _, a := range []string{"--operator-oidc-issuer=https://kubernetes.default.svc.cluster.local",
				"--operator-oidc-subjects=system:serviceaccount:terdut-operator-system:terdut-operator",
				"--operator-oidc-ca-file=/var/run/secrets/kubernetes.io/serviceaccount/ca.crt",
				"--operator-oidc-token-review-url=https://kubernetes.default.svc"} {
				if !hasArg(args, a) {
					t.Errorf("got %q, want %s", args, a)
				}
			}
			if argPrefix(args, "--operator-token-file") {
				t.Errorf("got %q, want no --operator-token-file", args)
			}
			for _, k := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Ingress"} {
				if !slices.Contains(ks, k) {
					t.Errorf("got kinds %v, want %s", ks, k)
				}
			}
		},
		"eks": func(t *testing.T, d deployment, args, ks []string) {
			// An external issuer with a public CA: no CA file, so the server's own token is
			// never sent there (docs/kubernetes.md#cluster-layouts).
			if argPrefix(args, "--operator-oidc-ca-file") {
				t.Errorf("got %q, want no --operator-oidc-ca-file on an external issuer", args)
			}
			if !hasArg(args, "--operator-oidc-issuer=https://oidc.eks.eu-west-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE") ||
				!hasArg(args, "--operator-oidc-token-review-url=https://kubernetes.default.svc") {
				t.Errorf("got %q, want the preset's issuer and TokenReview", args)
			}
		},
		"zalando": func(t *testing.T, d deployment, args, ks []string) {
			c := d.Spec.Template.Spec.Containers[0]
			env := map[string]int{}
			for i, e := range c.Env {
				env[e.Name] = i
			}
			url := c.Env[env["TERDUT_DATABASE_URL"]].Value
			if url != "postgres://terdut-db-pooler:5432/terdut?sslmode=require" {
				t.Errorf("got TERDUT_DATABASE_URL %q, want the pooler Service's, sslmode=require, no secret", url)
			}
			// Behind Zalando's pooler, PgBouncer in transaction mode: the server must know.
			if i, ok := env["TERDUT_DATABASE_POOLER"]; !ok || c.Env[i].Value != "transaction" {
				t.Errorf("got TERDUT_DATABASE_POOLER set %v, want transaction", ok)
			}
			user := c.Env[env["TERDUT_DATABASE_USER"]]
			const secret = "terdut.terdut-db.credentials.postgresql.acid.zalan.do"
			if user.ValueFrom == nil || user.ValueFrom.SecretKeyRef == nil || *user.ValueFrom.SecretKeyRef != (struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			}{secret, "username"}) {
				t.Errorf("got TERDUT_DATABASE_USER %+v, want the username of %s", user, secret)
			}
			pw := c.Env[env["TERDUT_DATABASE_PASSWORD_FILE"]].Value
			mounted := false
			for _, m := range c.VolumeMounts {
				for _, v := range d.Spec.Template.Spec.Volumes {
					if m.Name == v.Name && v.Secret != nil && v.Secret.SecretName == secret && pw == m.MountPath+"/password" &&
						len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "password" {
						mounted = true
					}
				}
			}
			if !mounted {
				t.Errorf("TERDUT_DATABASE_PASSWORD_FILE=%s: got no mount of %s's password there", pw, secret)
			}
			if _, ok := env["TERDUT_DATABASE_URL_FILE"]; ok {
				t.Errorf("got TERDUT_DATABASE_URL_FILE too, want the URL alone")
			}
			if c.ReadinessProbe.HTTPGet.Scheme != "HTTPS" || !hasArg(args, "--tls-cert-file=/etc/terdut/tls/tls.crt") {
				t.Errorf("got probe scheme %q and %q, want https from the TLS Secret", c.ReadinessProbe.HTTPGet.Scheme, args)
			}
			for _, k := range []string{"ServiceMonitor", "PrometheusRule", "HTTPRoute", "BackendTLSPolicy"} {
				if !slices.Contains(ks, k) {
					t.Errorf("got kinds %v, want %s", ks, k)
				}
			}
		},
		"password-only": func(t *testing.T, d deployment, args, ks []string) {
			if argPrefix(args, "--oidc-") || argPrefix(args, "--metrics-listen") {
				t.Errorf("got %q, want no single sign-on and no metrics port", args)
			}
			for _, k := range []string{"NetworkPolicy", "HTTPRoute", "Ingress", "PodDisruptionBudget"} {
				if slices.Contains(ks, k) {
					t.Errorf("got kinds %v, want no %s", ks, k)
				}
			}
		},
	}
	for _, p := range presets(t) {
		t.Run(p, func(t *testing.T) {
			check, ok := checks[p]
			if !ok {
				t.Fatalf("the preset ci/%s-values.yaml has no check here: add one", p)
			}
			objs := objects(t, render(t, "terdut", "-f", presetFile(t, p)))
			var d deployment
			for _, o := range objs {
				if o.Metadata.Namespace != "terdut" && !slices.Contains([]string{"ClusterRole", "ClusterRoleBinding", "Namespace"}, o.Kind) {
					t.Errorf("%s %s: got namespace %q, want the release's", o.Kind, o.Metadata.Name, o.Metadata.Namespace)
				}
				if o.Kind == "Deployment" {
					decodeInto(t, o, &d)
				}
			}
			if len(d.Spec.Template.Spec.Containers) != 1 {
				t.Fatalf("got %d containers, want one Deployment of one container", len(d.Spec.Template.Spec.Containers))
			}
			ks := kinds(objs)
			for _, k := range []string{"Deployment", "Service"} {
				if !slices.Contains(ks, k) {
					t.Errorf("got kinds %v, want %s", ks, k)
				}
			}
			if len(d.Spec.Template.Spec.TopologySpreadConstraints) != 2 {
				t.Errorf("got %d topology spread constraints, want nodes and zones", len(d.Spec.Template.Spec.TopologySpreadConstraints))
			}
			check(t, d, d.Spec.Template.Spec.Containers[0].Args, ks)
		})
	}
}
