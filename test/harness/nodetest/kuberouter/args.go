package kuberouter

import "strconv"

// Args returns kube-router's command line as a NetworkPolicy engine and nothing else, for the
// node named hostname and the API server in kubeconfig. Its Prometheus metrics listen on
// 127.0.0.1:metricsPort; metricsPort 0 turns them off.
//
// kube-router's health check has no address flag (it listens on every address), so it is
// turned off: a caller learns that the firewall is up from its chains (KUBE-ROUTER-FORWARD in
// the filter table) or, with metrics on, from the metrics endpoint.
//
// The firewall needs the node's spec.podCIDR set before it starts, and uses kube-router's
// default Service range, 10.96.0.0/12, for its rule that lets the host reach Service
// addresses.
func Args(kubeconfig, hostname string, metricsPort int) []string {
	return []string{
		"--kubeconfig=" + kubeconfig,
		"--hostname-override=" + hostname,
		"--run-firewall=true",
		// Each of these is on by default. The router is kube-router's BGP speaker and pod
		// routes, the service proxy its IPVS Services (kube-proxy's job here), the CNI its
		// bridge (the test's own bridge plugin's job here).
		"--run-router=false",
		"--run-service-proxy=false",
		"--run-loadbalancer=false",
		"--enable-cni=false",
		"--enable-ipv4=true",
		"--enable-ipv6=false",
		"--enable-pprof=false",
		"--health-port=0",
		"--metrics-addr=127.0.0.1",
		"--metrics-port=" + strconv.Itoa(metricsPort),
	}
}
