//go:build chart

package helmtest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// What an Alertmanager in the cluster needs of the chart (issue 38, "The install"): a port of
// the webhook's own (--webhook-listen), named webhook on the pod and the Service, which the
// NetworkPolicy opens to Alertmanager's namespaces and to nothing else, and, when asked, an
// AlertmanagerConfig that sends there with the integration key of a Secret.

// policyRule is one ingress rule of the chart's NetworkPolicy.
type policyRule struct {
	From []struct {
		NamespaceSelector struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"namespaceSelector"`
	} `yaml:"from"`
	Ports []struct {
		Port int `yaml:"port"`
	} `yaml:"ports"`
}

// admitted maps each port the NetworkPolicy of objs opens to the namespaces it admits there;
// nil when there is no NetworkPolicy.
func admitted(t *testing.T, objs []object) map[int][]string {
	t.Helper()
	i := slices.IndexFunc(objs, func(o object) bool { return o.Kind == "NetworkPolicy" })
	if i < 0 {
		return nil
	}
	var policy struct {
		Spec struct {
			Ingress []policyRule `yaml:"ingress"`
		} `yaml:"spec"`
	}
	decodeInto(t, objs[i], &policy)
	ports := map[int][]string{}
	for _, r := range policy.Spec.Ingress {
		for _, p := range r.Ports {
			for _, f := range r.From {
				ports[p.Port] = append(ports[p.Port], f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
			}
		}
	}
	return ports
}

// namedPorts maps the names of the Deployment's container ports, or of the Service's ports,
// to their numbers (the Service's: "port->targetPort").
func namedPorts(t *testing.T, objs []object) (container map[string]string, service map[string]string) {
	t.Helper()
	container, service = map[string]string{}, map[string]string{}
	for _, o := range objs {
		switch o.Kind {
		case "Deployment":
			var d struct {
				Spec struct {
					Template struct {
						Spec struct {
							Containers []struct {
								Ports []struct {
									Name          string `yaml:"name"`
									ContainerPort int    `yaml:"containerPort"`
								} `yaml:"ports"`
							} `yaml:"containers"`
						} `yaml:"spec"`
					} `yaml:"template"`
				} `yaml:"spec"`
			}
			decodeInto(t, o, &d)
			for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
				container[p.Name] = fmt.Sprint(p.ContainerPort)
			}
		case "Service":
			var s struct {
				Spec struct {
					Ports []struct {
						Name       string `yaml:"name"`
						Port       int    `yaml:"port"`
						TargetPort string `yaml:"targetPort"`
					} `yaml:"ports"`
				} `yaml:"spec"`
			}
			decodeInto(t, o, &s)
			for _, p := range s.Spec.Ports {
				service[p.Name] = fmt.Sprintf("%d->%s", p.Port, p.TargetPort)
			}
		}
	}
	return container, service
}

// TestChart_WebhookPort: with its defaults and every preset, the server listens for
// Alertmanager's webhook on a port of its own (--webhook-listen=:8082), the pod and the Service
// name it webhook, and the NetworkPolicy, where there is one, admits Alertmanager's namespaces
// (monitoring) to that port, and neither to the people's port nor to the operator's, and
// nobody else to it. Values move the port and
// name the namespaces.
func TestChart_WebhookPort(t *testing.T) {
	check := func(t *testing.T, args []string, port string, namespaces []string) {
		t.Helper()
		d, objs := rendered(t, args...)
		if got := d.Spec.Template.Spec.Containers[0].Args; !slices.Contains(got, "--webhook-listen=:"+port) {
			t.Errorf("got arguments %q, want --webhook-listen=:%s", got, port)
		}
		container, service := namedPorts(t, objs)
		if container["webhook"] != port || service["webhook"] != port+"->webhook" {
			t.Errorf("got the container's ports %v and the Service's %v, want webhook %s on both", container, service, port)
		}
		policy := admitted(t, objs)
		if policy == nil {
			return
		}
		n := 0
		fmt.Sscan(port, &n)
		if got := policy[n]; !slices.Equal(got, namespaces) {
			t.Errorf("got the webhook's port %d open to %q, want %q alone", n, got, namespaces)
		}
		// Prometheus's namespace may be Alertmanager's too, and reach the metrics port: the
		// people's and the operator's ports are what Alertmanager must never reach.
		for _, p := range []int{8080, 8081} {
			for _, ns := range namespaces {
				if slices.Contains(policy[p], ns) {
					t.Errorf("got port %d open to %s, Alertmanager's namespace: want it admitted to the webhook's port, not the people's or the operator's", p, ns)
				}
			}
		}
	}
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) { check(t, args, "8082", []string{"monitoring"}) })
	}
	t.Run("Moved", func(t *testing.T) {
		check(t, []string{"-f", presetFile(t, "token"), "--set", "alertmanager.webhookPort=9443",
			"--set", "alertmanager.namespaces={observability,alerting}"}, "9443", []string{"observability", "alerting"})
	})
	// No namespace named: the port is open to nobody (the NetworkPolicy renders no rule for it).
	t.Run("NoNamespace", func(t *testing.T) {
		_, objs := rendered(t, "-f", presetFile(t, "token"), "--set", "alertmanager.namespaces=null")
		if from, ok := admitted(t, objs)[8082]; ok {
			t.Errorf("alertmanager.namespaces empty: got the webhook's port open to %q, want no rule for it", from)
		}
	})
}

// alertmanagerConfig is the part of the AlertmanagerConfig the checks read.
type alertmanagerConfig struct {
	Metadata struct {
		Namespace string            `yaml:"namespace"`
		Labels    map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Spec struct {
		Route struct {
			Receiver       string   `yaml:"receiver"`
			GroupBy        []string `yaml:"groupBy"`
			GroupWait      string   `yaml:"groupWait"`
			GroupInterval  string   `yaml:"groupInterval"`
			RepeatInterval string   `yaml:"repeatInterval"`
		} `yaml:"route"`
		Receivers []struct {
			Name           string `yaml:"name"`
			WebhookConfigs []struct {
				URL          string `yaml:"url"`
				SendResolved *bool  `yaml:"sendResolved"`
				MaxAlerts    *int   `yaml:"maxAlerts"`
				HTTPConfig   struct {
					Authorization struct {
						Type        string            `yaml:"type"`
						Credentials map[string]string `yaml:"credentials"`
					} `yaml:"authorization"`
					TLSConfig *struct {
						ServerName string `yaml:"serverName"`
						CA         struct {
							ConfigMap map[string]string `yaml:"configMap"`
						} `yaml:"ca"`
					} `yaml:"tlsConfig"`
				} `yaml:"httpConfig"`
			} `yaml:"webhookConfigs"`
		} `yaml:"receivers"`
	} `yaml:"spec"`
}

// amConfigs returns the AlertmanagerConfigs of objs.
func amConfigs(t *testing.T, objs []object) []alertmanagerConfig {
	t.Helper()
	var cs []alertmanagerConfig
	for _, o := range objs {
		if o.Kind == "AlertmanagerConfig" {
			if o.APIVersion != "monitoring.coreos.com/v1alpha1" {
				t.Errorf("got the AlertmanagerConfig of %s, want monitoring.coreos.com/v1alpha1", o.APIVersion)
			}
			var c alertmanagerConfig
			decodeInto(t, o, &c)
			cs = append(cs, c)
		}
	}
	return cs
}

// TestChart_AlertmanagerConfig: off by default and in every preset; on, one AlertmanagerConfig
// in the namespace named, whose route sends every group to a webhook receiver at the Service's
// webhook port, with resolutions, every alert of a group, and the integration key of the
// Secret named as its Bearer credentials; with tls.enabled, over https checked against the CA.
func TestChart_AlertmanagerConfig(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run("Off/"+name, func(t *testing.T) {
			if _, objs := rendered(t, args...); len(amConfigs(t, objs)) != 0 {
				t.Errorf("got an AlertmanagerConfig with alertmanager.config.enabled false, want none")
			}
		})
	}
	on := []string{"-f", presetFile(t, "token"), "--set", "alertmanager.config.enabled=true"}
	t.Run("On", func(t *testing.T) {
		_, objs := rendered(t, on...)
		cs := amConfigs(t, objs)
		if len(cs) != 1 {
			t.Fatalf("got %d AlertmanagerConfigs, want one", len(cs))
		}
		c := cs[0]
		if c.Metadata.Namespace != "monitoring" {
			t.Errorf("got the namespace %q, want monitoring (alertmanager.config.namespace's default)", c.Metadata.Namespace)
		}
		r := c.Spec.Route
		if r.Receiver != "terdut-server" || !slices.Equal(r.GroupBy, []string{"alertname", "cluster"}) ||
			r.GroupWait != "30s" || r.GroupInterval != "5m" || r.RepeatInterval != "4h" {
			t.Errorf("got the route %+v, want receiver terdut-server, groupBy [alertname cluster], 30s, 5m, 4h", r)
		}
		if len(c.Spec.Receivers) != 1 || c.Spec.Receivers[0].Name != r.Receiver || len(c.Spec.Receivers[0].WebhookConfigs) != 1 {
			t.Fatalf("got the receivers %+v, want one, the route's, with one webhook", c.Spec.Receivers)
		}
		w := c.Spec.Receivers[0].WebhookConfigs[0]
		if w.URL != "http://terdut-server.terdut.svc:8082/api/webhooks/alertmanager" {
			t.Errorf("got the URL %q, want the Service's webhook port", w.URL)
		}
		if w.SendResolved == nil || !*w.SendResolved || w.MaxAlerts == nil || *w.MaxAlerts != 0 {
			t.Errorf("got sendResolved %v and maxAlerts %v, want true and 0 (every alert of a group)", w.SendResolved, w.MaxAlerts)
		}
		a := w.HTTPConfig.Authorization
		if a.Type != "Bearer" || a.Credentials["name"] != "terdut-server-alertmanager" || a.Credentials["key"] != "key" {
			t.Errorf("got the authorization %+v, want Bearer with the key key of the Secret terdut-server-alertmanager", a)
		}
		if w.HTTPConfig.TLSConfig != nil {
			t.Errorf("got a tlsConfig %+v over http, want none", w.HTTPConfig.TLSConfig)
		}
	})
	t.Run("Named", func(t *testing.T) {
		_, objs := rendered(t, append(on, "--set", "alertmanager.config.namespace=observability",
			"--set", "alertmanager.config.keySecret.secretName=am-keys", "--set", "alertmanager.config.keySecret.key=terdut.key",
			"--set", "alertmanager.config.labels.alertmanagerConfig=terdut", "--set", "alertmanager.webhookPort=9443")...)
		cs := amConfigs(t, objs)
		if len(cs) != 1 {
			t.Fatalf("got %d AlertmanagerConfigs, want one", len(cs))
		}
		c := cs[0]
		w := c.Spec.Receivers[0].WebhookConfigs[0]
		if c.Metadata.Namespace != "observability" || c.Metadata.Labels["alertmanagerConfig"] != "terdut" ||
			w.URL != "http://terdut-server.terdut.svc:9443/api/webhooks/alertmanager" ||
			w.HTTPConfig.Authorization.Credentials["name"] != "am-keys" || w.HTTPConfig.Authorization.Credentials["key"] != "terdut.key" {
			t.Errorf("got namespace %q, labels %v, URL %q, credentials %v; want the values'", c.Metadata.Namespace, c.Metadata.Labels,
				w.URL, w.HTTPConfig.Authorization.Credentials)
		}
	})
	// docs/install.md's values for the AlertmanagerConfig are the chart's.
	t.Run("InstallDoc", func(t *testing.T) {
		b, err := os.ReadFile(filepath.Join(chartDir(t), "..", "..", "..", "docs", "install.md"))
		if err != nil {
			t.Fatal(err)
		}
		var values string
		for _, block := range strings.Split(string(b), "```yaml\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			if strings.Contains(block, "alertmanager:") && strings.Contains(block, "config:") {
				values = block
			}
		}
		if values == "" {
			t.Fatal("docs/install.md has no yaml block of alertmanager's values")
		}
		f := filepath.Join(t.TempDir(), "alertmanager-values.yaml")
		if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		_, objs := rendered(t, "-f", presetFile(t, "token"), "-f", f)
		if cs := amConfigs(t, objs); len(cs) != 1 || cs[0].Metadata.Labels["release"] != "kube-prometheus-stack" {
			t.Errorf("docs/install.md's values: got the AlertmanagerConfigs %+v, want one with its labels", cs)
		}
	})
	t.Run("TLS", func(t *testing.T) {
		_, objs := rendered(t, "-f", presetFile(t, "zalando"), "--set", "alertmanager.config.enabled=true")
		cs := amConfigs(t, objs)
		if len(cs) != 1 {
			t.Fatalf("got %d AlertmanagerConfigs, want one", len(cs))
		}
		w := cs[0].Spec.Receivers[0].WebhookConfigs[0]
		tc := w.HTTPConfig.TLSConfig
		if !strings.HasPrefix(w.URL, "https://terdut-server.terdut.svc:8082/") || tc == nil || tc.ServerName != "terdut-server.terdut.svc" ||
			tc.CA.ConfigMap["name"] != "terdut-server-ca" || tc.CA.ConfigMap["key"] != "ca.crt" {
			t.Errorf("tls.enabled: got the URL %q and tlsConfig %+v, want https checked against ca.crt of the ConfigMap terdut-server-ca", w.URL, tc)
		}
	})
}
