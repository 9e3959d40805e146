package pgtest

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// EnvHostOverride is testcontainers-go's setting for the address under which a container's
// published ports are reached.
const EnvHostOverride = "TESTCONTAINERS_HOST_OVERRIDE"

// publishedHost returns the address the tests may dial to reach ports the engine at
// daemonHost (a DOCKER_HOST URL) publishes, given the TESTCONTAINERS_HOST_OVERRIDE value
// override (empty when unset).
//
// An engine on a unix socket or a named pipe publishes on this machine: the answer is
// 127.0.0.1, where pgtest publishes its containers. An engine reached over TCP publishes on
// its own host. An override is accepted only when it is a loopback address or the engine's
// own host; anything else is refused with an error, never dialled. Without this,
// testcontainers-go, finding /.dockerenv, guesses the default bridge's gateway, or an
// address such as 192.0.2.1 outside this machine, and waits a minute for it.
func publishedHost(daemonHost, override string) (string, error) {
	u, err := url.Parse(daemonHost)
	if err != nil || u.Scheme == "" {
		return "", fmt.Errorf("cannot tell where the engine at %q publishes ports", daemonHost)
	}
	var own string // the engine's host, when it is reached over the network
	switch u.Scheme {
	case "unix", "npipe":
	case "tcp", "http", "https":
		own = u.Hostname()
		if own == "" {
			return "", fmt.Errorf("DOCKER_HOST %q names no host", daemonHost)
		}
	default:
		return "", fmt.Errorf("cannot tell where the engine at %q (scheme %s) publishes ports; set %s to it", daemonHost, u.Scheme, EnvHostOverride)
	}
	if override == "" {
		if own == "" || isLoopback(own) {
			return "127.0.0.1", nil
		}
		return own, nil
	}
	if isLoopback(override) || (own != "" && strings.EqualFold(override, own)) {
		return override, nil
	}
	if own == "" {
		return "", fmt.Errorf("%s=%s is neither a loopback address nor the engine's host (the engine at %s publishes on this machine); refusing to send test traffic there", EnvHostOverride, override, daemonHost)
	}
	return "", fmt.Errorf("%s=%s is neither a loopback address nor the engine's host %s; refusing to send test traffic there", EnvHostOverride, override, own)
}

// isLoopback reports whether host is localhost or a loopback IP address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
