package clusterdns

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
)

func TestServiceLookup(t *testing.T) {
	services := map[string]string{
		"terdut/terdut-server": "10.96.0.20",
		"default/kubernetes":   "10.96.0.1",
		"terdut/headless":      "None",
		"terdut/external":      "",
		"terdut/v6":            "fd00::20",
		"terdut/garbage":       "not-an-ip",
	}
	var asked []string
	get := func(ctx context.Context, namespace, name string) (string, bool, error) {
		asked = append(asked, namespace+"/"+name)
		if namespace == "broken" {
			return "", false, errors.New("kube-apiserver unreachable")
		}
		ip, ok := services[namespace+"/"+name]
		return ip, ok, nil
	}
	lookup := ServiceLookup(get)
	for _, tc := range []struct {
		name    string
		qname   string
		asked   string // the Service get is asked for, "" for none
		want    []netip.Addr
		wantOK  bool
		wantErr bool
	}{
		{"Found", "terdut-server.terdut.svc.cluster.local", "terdut/terdut-server", []netip.Addr{netip.MustParseAddr("10.96.0.20")}, true, false},
		{"Kubernetes", "kubernetes.default.svc.cluster.local", "default/kubernetes", []netip.Addr{netip.MustParseAddr("10.96.0.1")}, true, false},
		{"IPv6", "v6.terdut.svc.cluster.local", "terdut/v6", []netip.Addr{netip.MustParseAddr("fd00::20")}, true, false},
		{"NoService", "nothere.terdut.svc.cluster.local", "terdut/nothere", nil, false, false},
		{"Headless", "headless.terdut.svc.cluster.local", "terdut/headless", nil, false, false},
		{"NoClusterIP", "external.terdut.svc.cluster.local", "terdut/external", nil, false, false},
		{"GetError", "x.broken.svc.cluster.local", "broken/x", nil, false, true},
		{"BadClusterIP", "garbage.terdut.svc.cluster.local", "terdut/garbage", nil, false, true},
		{"SearchPath", "kubernetes.default.svc.cluster.local.terdut.svc.cluster.local", "", nil, false, false},
		{"NamespaceOnly", "terdut.svc.cluster.local", "", nil, false, false},
		{"SvcOnly", "svc.cluster.local", "", nil, false, false},
		{"Domain", "cluster.local", "", nil, false, false},
		{"Pod", "10-244-0-5.terdut.pod.cluster.local", "", nil, false, false},
		{"PortName", "_https._tcp.terdut-server.terdut.svc.cluster.local", "", nil, false, false},
		{"EmptyLabel", ".terdut.svc.cluster.local", "", nil, false, false},
		{"BadLabel", "a_b.terdut.svc.cluster.local", "", nil, false, false},
		{"HyphenStart", "-a.terdut.svc.cluster.local", "", nil, false, false},
		{"Outside", "terdut-server.terdut.svc.example.com", "", nil, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked = nil
			got, ok, err := lookup(context.Background(), tc.qname)
			if (err != nil) != tc.wantErr {
				t.Fatalf("got error %v, want error %v", err, tc.wantErr)
			}
			if ok != tc.wantOK || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v %v, want %v %v", got, ok, tc.want, tc.wantOK)
			}
			var want []string
			if tc.asked != "" {
				want = []string{tc.asked}
			}
			if !slices.Equal(asked, want) {
				t.Fatalf("get asked for %v, want %v", asked, want)
			}
		})
	}
}

// TestServiceLookup_Serve checks the two together as the node test uses them.
func TestServiceLookup_Serve(t *testing.T) {
	s := MustServe(t, ServiceLookup(func(ctx context.Context, namespace, name string) (string, bool, error) {
		if namespace == "terdut" && name == "terdut-server" {
			return "10.96.0.20", true, nil
		}
		return "", false, nil
	}))
	got, err := resolver(s, "udp").LookupHost(timeoutCtx(t), "terdut-server.terdut.svc.cluster.local.")
	if err != nil || !slices.Equal(got, []string{"10.96.0.20"}) {
		t.Fatalf("got %v %v, want [10.96.0.20]", got, err)
	}
}
