//go:build chart

package helmtest

import (
	"slices"
	"strings"
	"testing"
)

// What issue 37's security review asked of the chart: the server's own service account, the
// operator token kept out of curl's arguments, single sign-on that says who may sign in,
// forwarding headers trusted only from proxies, and no /metrics where nobody asked for it.

// notes is the NOTES.txt helm prints after installing the chart as the release terdut-server
// in the namespace terdut with args (a client-side dry run: nothing is installed).
func notes(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := helm(t, append([]string{"install", "terdut-server", chartDir(t), "--namespace", "terdut", "--dry-run=client"}, args...)...)
	if err != nil {
		t.Fatalf("helm install --dry-run=client %v: %v\n%s", args, err, errOut)
	}
	_, n, ok := strings.Cut(out, "\nNOTES:\n")
	if !ok {
		t.Fatalf("helm install --dry-run=client %v: got no NOTES in\n%s", args, out)
	}
	return n
}

// podSpec is the part of the Deployment's pod spec these checks read.
type podSpec struct {
	Spec struct {
		Template struct {
			Spec struct {
				ServiceAccountName           string `yaml:"serviceAccountName"`
				AutomountServiceAccountToken *bool  `yaml:"automountServiceAccountToken"`
				Containers                   []struct {
					Args []string `yaml:"args"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// rendered renders the chart with args and returns its Deployment's pod spec and its objects.
func rendered(t *testing.T, args ...string) (podSpec, []object) {
	t.Helper()
	objs := objects(t, render(t, "terdut", args...))
	var d podSpec
	for _, o := range objs {
		if o.Kind == "Deployment" {
			decodeInto(t, o, &d)
		}
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("%v: got %d containers, want one Deployment of one container", args, len(d.Spec.Template.Spec.Containers))
	}
	return d, objs
}

// valueSets are the chart's defaults and each preset.
func valueSets(t *testing.T) map[string][]string {
	sets := map[string][]string{"defaults": nil}
	for _, p := range presets(t) {
		sets[p] = []string{"-f", presetFile(t, p)}
	}
	return sets
}

// TestChart_OwnServiceAccount: with its defaults and every preset, the server's pods run as a
// service account of their own (never the namespace's default, CIS Kubernetes Benchmark
// 5.1.5) that mounts no token, and the chart renders that account.
func TestChart_OwnServiceAccount(t *testing.T) {
	for name, args := range valueSets(t) {
		t.Run(name, func(t *testing.T) {
			d, objs := rendered(t, args...)
			pod := d.Spec.Template.Spec
			if pod.ServiceAccountName != "terdut-server" {
				t.Errorf("got serviceAccountName %q, want terdut-server, the server's own", pod.ServiceAccountName)
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("got the pod's automountServiceAccountToken %v, want false", pod.AutomountServiceAccountToken)
			}
			var account *object
			for i, o := range objs {
				if o.Kind == "ServiceAccount" && o.Metadata.Name == "terdut-server" {
					account = &objs[i]
				}
			}
			if account == nil {
				t.Fatalf("got kinds %v, want the ServiceAccount terdut-server", kinds(objs))
			}
			if automount, ok := account.doc["automountServiceAccountToken"].(bool); !ok || automount {
				t.Errorf("got the account's automountServiceAccountToken %v, want false", account.doc["automountServiceAccountToken"])
			}
		})
	}
}

// TestChart_NotesKeepTheOperatorTokenOutOfArguments: the claim command of NOTES.txt hands the
// operator token to curl on its standard input, as the server's banner does, so that it is in
// no process's arguments (ps) and no shell history; and reads the Secret's key it is given.
func TestChart_NotesKeepTheOperatorTokenOutOfArguments(t *testing.T) {
	for _, c := range []struct {
		name string
		args []string
		key  string // the jsonpath of the Secret's key
	}{
		{"token", []string{"-f", presetFile(t, "token")}, `{.data.token}`},
		{"DottedKey", []string{"-f", presetFile(t, "token"), "--set", "operator.token.key=operator.token"}, `{.data.operator\.token}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := notes(t, c.args...)
			for _, unwanted := range []string{"$OPERATOR_TOKEN", `-H "Authorization`, `-H 'Authorization`} {
				if strings.Contains(n, unwanted) {
					t.Errorf("got NOTES with %q:\n%s\nwant the token given to curl on its standard input", unwanted, n)
				}
			}
			for _, want := range []string{"get secret terdut-server-operator-token -o jsonpath='" + c.key + "' | base64 -d",
				"| sed 's/^/Authorization: Bearer /'", "| curl -H @- -X POST http://localhost:8081/api/bootstrap"} {
				if !strings.Contains(n, want) {
					t.Errorf("got NOTES:\n%s\nwant %q", n, want)
				}
			}
		})
	}
}

// TestChart_SSOSaysWhoMaySignIn: single sign-on is off by default; on, it needs groups or an
// explicit allowAllAccounts (refused otherwise, in TestChart_SchemaRefuses), which NOTES.txt
// then warns about.
func TestChart_SSOSaysWhoMaySignIn(t *testing.T) {
	oidcArgs := func(args []string) []string {
		var o []string
		for _, a := range args {
			if strings.HasPrefix(a, "--oidc-") {
				o = append(o, a)
			}
		}
		return o
	}
	d, _ := rendered(t)
	if got := oidcArgs(d.Spec.Template.Spec.Containers[0].Args); len(got) != 0 {
		t.Errorf("defaults: got %q, want single sign-on off", got)
	}
	on := []string{"--set", "sso.enabled=true", "--set", "sso.issuer=https://sso.example.com"}
	d, _ = rendered(t, append(on, "--set", "sso.allowedGroups={oncall}")...)
	if got := oidcArgs(d.Spec.Template.Spec.Containers[0].Args); !slices.Contains(got, "--oidc-allowed-groups=oncall") {
		t.Errorf("allowedGroups oncall: got %q, want --oidc-allowed-groups=oncall", got)
	}
	all := append(on, "--set", "sso.allowAllAccounts=true")
	d, _ = rendered(t, all...)
	got := oidcArgs(d.Spec.Template.Spec.Containers[0].Args)
	if !slices.Contains(got, "--oidc-issuer=https://sso.example.com") || slices.ContainsFunc(got, func(a string) bool {
		return strings.HasPrefix(a, "--oidc-allowed-groups")
	}) {
		t.Errorf("allowAllAccounts: got %q, want the issuer and no --oidc-allowed-groups", got)
	}
	if n := notes(t, all...); !strings.Contains(n, "WARNING: sso.allowAllAccounts is true: every account https://sso.example.com authenticates may sign in") {
		t.Errorf("allowAllAccounts: got NOTES\n%s\nwant a warning that every account may sign in", n)
	}
	if n := notes(t, "-f", presetFile(t, "token")); strings.Contains(n, "WARNING") {
		t.Errorf("token preset: got NOTES\n%s\nwant no warning", n)
	}
}

// TestChart_TrustedProxiesOnlyBehindProxies: a preset that trusts the pod network's forwarding
// headers admits one namespace alone to the people's port, the proxies', and neither the
// monitoring namespace nor the operator's: any pod it admits could otherwise name any client
// address (the per-address sign-in limit, the log, the audit). Without a NetworkPolicy,
// NOTES.txt warns.
func TestChart_TrustedProxiesOnlyBehindProxies(t *testing.T) {
	type rule struct {
		From []struct {
			NamespaceSelector struct {
				MatchLabels map[string]string `yaml:"matchLabels"`
			} `yaml:"namespaceSelector"`
		} `yaml:"from"`
		Ports []struct {
			Port int `yaml:"port"`
		} `yaml:"ports"`
	}
	var policy struct {
		Spec struct {
			Ingress []rule `yaml:"ingress"`
		} `yaml:"spec"`
	}
	trusting := 0
	for _, p := range presets(t) {
		d, objs := rendered(t, "-f", presetFile(t, p))
		if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--trusted-proxies=") }) {
			continue
		}
		trusting++
		i := slices.IndexFunc(objs, func(o object) bool { return o.Kind == "NetworkPolicy" })
		if i < 0 {
			t.Errorf("%s: trusts forwarding headers with no NetworkPolicy, want one that admits the proxies alone", p)
			continue
		}
		decodeInto(t, objs[i], &policy)
		var people []string
		for _, r := range policy.Spec.Ingress {
			if len(r.Ports) == 1 && r.Ports[0].Port == 8080 {
				for _, f := range r.From {
					people = append(people, f.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])
				}
			}
		}
		if len(people) != 1 || slices.Contains([]string{"monitoring", "terdut-operator-system", ""}, people[0]) {
			t.Errorf("%s: trusts forwarding headers and admits %q to the people's port, want the proxies' namespace alone", p, people)
		}
	}
	if trusting == 0 {
		t.Fatal("no preset sets trustedProxies: is --trusted-proxies still the flag?")
	}
	n := notes(t, "-f", presetFile(t, "token"), "--set", "networkPolicy.enabled=false")
	if !strings.Contains(n, "WARNING: trustedProxies is set and the NetworkPolicy is off") {
		t.Errorf("trustedProxies without a NetworkPolicy: got NOTES\n%s\nwant a warning", n)
	}
}

// TestChart_MetricsOnlyWhereAsked: metrics.enabled runs the server with --metrics-listen on the
// metrics port, which the Service names; off, neither, and the server then serves /metrics on
// no port (cmd/terdut-server's TestServe_MetricsListen: never on --listen).
func TestChart_MetricsOnlyWhereAsked(t *testing.T) {
	for _, c := range []struct {
		set  string
		want bool
	}{{"metrics.enabled=true", true}, {"metrics.enabled=false", false}} {
		d, _ := rendered(t, "-f", presetFile(t, "token"), "--set", c.set)
		args := d.Spec.Template.Spec.Containers[0].Args
		if got := slices.Contains(args, "--metrics-listen=:9090"); got != c.want {
			t.Errorf("%s: got --metrics-listen=:9090 %v in %q, want %v", c.set, got, args, c.want)
		}
		service := string(render(t, "terdut", "-f", presetFile(t, "token"), "--set", c.set, "--show-only", "templates/service.yaml"))
		if got := strings.Contains(service, "name: metrics"); got != c.want {
			t.Errorf("%s: got the Service's port metrics %v, want %v", c.set, got, c.want)
		}
	}
}
