package amtest

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nonLoopbackSockets lists the TCP and UDP sockets of process pid (listening, bound or
// connected) whose local or remote address is neither loopback nor unspecified, as
// "proto local remote", and how many sockets it saw; from /proc/<pid>/fd and /proc/<pid>/net.
func nonLoopbackSockets(tb testing.TB, pid int) (bad []string, seen int) {
	tb.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		tb.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		link, err := os.Readlink(filepath.Join(fmt.Sprintf("/proc/%d/fd", pid), fd.Name()))
		if inode, ok := strings.CutPrefix(link, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	for _, proto := range []string{"tcp", "tcp6", "udp", "udp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, proto))
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || !inodes[f[9]] {
				continue
			}
			seen++
			local, remote := procAddr(tb, f[1]), procAddr(tb, f[2])
			if !local.IsLoopback() || !(remote.IsLoopback() || remote.IsUnspecified()) {
				bad = append(bad, fmt.Sprintf("%s %s %s", proto, local, remote))
			}
		}
	}
	return bad, seen
}

// procAddr decodes an address of /proc/net/{tcp,udp}[6], "0100007F:1F90": the IP as 32-bit
// words in host order (little-endian here), the port after the colon.
func procAddr(tb testing.TB, s string) net.IP {
	tb.Helper()
	h, _, _ := strings.Cut(s, ":")
	b, err := hex.DecodeString(h)
	if err != nil || (len(b) != 4 && len(b) != 16) {
		tb.Fatalf("/proc/net address %q: %v", s, err)
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}

// assertLoopbackOnly fails tb if any of ams has a socket off loopback.
func assertLoopbackOnly(tb testing.TB, ams ...*Alertmanager) {
	tb.Helper()
	for _, am := range ams {
		bad, seen := nonLoopbackSockets(tb, am.proc.Pid())
		if len(bad) > 0 {
			tb.Errorf("%s: sockets off loopback: %v", am.URL, bad)
		}
		if seen == 0 {
			tb.Errorf("%s: no socket found in /proc for pid %d: the check sees nothing", am.URL, am.proc.Pid())
		}
	}
}
