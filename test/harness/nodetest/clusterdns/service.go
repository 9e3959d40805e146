package clusterdns

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
)

// ServiceLookup answers <service>.<namespace>.svc.cluster.local with the
// Service's ClusterIP, as CoreDNS does in a real cluster. get returns the
// ClusterIP of the Service, found false when there is none. Every other name,
// a Service without a ClusterIP ("" or headless "None"), and labels that are
// not DNS labels are not found, without calling get. A get error, or a
// ClusterIP that is not an IP address, is returned as an error.
func ServiceLookup(get func(ctx context.Context, namespace, name string) (clusterIP string, found bool, err error)) Lookup {
	return func(ctx context.Context, name string) ([]netip.Addr, bool, error) {
		rest, ok := strings.CutSuffix(name, ".svc.cluster.local")
		if !ok {
			return nil, false, nil
		}
		svc, ns, ok := strings.Cut(rest, ".")
		if !ok || !isLabel(svc) || !isLabel(ns) {
			return nil, false, nil
		}
		ip, found, err := get(ctx, ns, svc)
		if err != nil {
			return nil, false, fmt.Errorf("service %s/%s: %w", ns, svc, err)
		}
		if !found || ip == "" || ip == "None" {
			return nil, false, nil
		}
		addr, err := netip.ParseAddr(ip)
		if err != nil {
			return nil, false, fmt.Errorf("service %s/%s: clusterIP: %w", ns, svc, err)
		}
		return []netip.Addr{addr}, true, nil
	}
}

// isLabel reports whether s is an RFC 1123 label, as Kubernetes requires of
// Service and namespace names.
func isLabel(s string) bool {
	if s == "" || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
