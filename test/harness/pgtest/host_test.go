package pgtest

import "testing"

func TestPublishedHost(t *testing.T) {
	for _, tc := range []struct {
		name, daemon, override string
		want                   string // "" means refused
	}{
		{"UnixSocket", "unix:///tmp/terdut-docker/docker.sock", "", "127.0.0.1"},
		{"DefaultSocket", "unix:///var/run/docker.sock", "", "127.0.0.1"},
		{"UnixOverrideLoopback", "unix:///var/run/docker.sock", "127.0.0.1", "127.0.0.1"},
		{"UnixOverrideLocalhost", "unix:///var/run/docker.sock", "localhost", "localhost"},
		{"UnixOverrideIPv6Loopback", "unix:///var/run/docker.sock", "::1", "::1"},
		{"UnixOverrideOtherLoopback", "unix:///var/run/docker.sock", "127.0.0.2", "127.0.0.2"},
		{"ErrUnixOverrideGuessedGateway", "unix:///var/run/docker.sock", "192.0.2.1", ""},
		{"ErrUnixOverrideBridge", "unix:///var/run/docker.sock", "172.17.0.1", ""},
		{"ErrUnixOverrideName", "unix:///var/run/docker.sock", "host.docker.internal", ""},
		{"TCPLoopback", "tcp://127.0.0.1:2375", "", "127.0.0.1"},
		{"TCPRemote", "tcp://docker.internal.test:2376", "", "docker.internal.test"},
		{"TCPRemoteOverrideOwn", "tcp://10.1.2.3:2376", "10.1.2.3", "10.1.2.3"},
		{"ErrTCPRemoteOverrideOther", "tcp://10.1.2.3:2376", "192.0.2.1", ""},
		{"ErrUnknownScheme", "ssh://user@host", "", ""},
		{"ErrNoScheme", "/var/run/docker.sock", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := publishedHost(tc.daemon, tc.override)
			switch {
			case tc.want == "" && err == nil:
				t.Fatalf("publishedHost(%q, %q) = %q, want it refused", tc.daemon, tc.override, got)
			case tc.want != "" && err != nil:
				t.Fatalf("publishedHost(%q, %q): %v, want %q", tc.daemon, tc.override, err, tc.want)
			case got != tc.want:
				t.Fatalf("publishedHost(%q, %q) = %q, want %q", tc.daemon, tc.override, got, tc.want)
			}
		})
	}
}
