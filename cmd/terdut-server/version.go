package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version and revision are the release this binary is and the commit it was built from,
// stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3 -X main.revision=$(git rev-parse HEAD)" ./cmd/terdut-server
//
// (make build, scripts/server-image.sh and the Dockerfile do so). Empty: readBuildInfo falls
// back to what the Go toolchain recorded.
var version, revision string

// buildInfo is which terdut-server this is: its version, the VCS revision it was built from
// and the Go release that built it.
type buildInfo struct {
	Version, Revision, GoVersion string
}

// readBuildInfo returns the stamped version or, without one, the module's version (a build
// with `go install ...@v1.2.3`) or "devel"; and the stamped revision or, without one, the one
// the toolchain recorded (with "-dirty" for uncommitted changes), or "unknown" (a build with
// -buildvcs=false, or from a tree that is not a git checkout).
func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Revision: revision, GoVersion: runtime.Version()}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	info, ok := debug.ReadBuildInfo()
	if ok && b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.Version = info.Main.Version
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if !ok || revision != "" {
		return b
	}
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != "unknown" {
		b.Revision += "-dirty"
	}
	return b
}

// printVersion answers `terdut-server version` and `terdut-server --version`.
func printVersion(w io.Writer, args []string) error {
	if len(args) > 0 {
		if isHelp(args[0]) {
			fmt.Fprintln(w, "usage: terdut-server version (or terdut-server --version)\n\nPrints the version, the VCS revision it was built from and the Go release that built it.")
			return nil
		}
		return fmt.Errorf("version takes no arguments, got %q (see terdut-server --help)", args[0])
	}
	b := readBuildInfo()
	fmt.Fprintf(w, "terdut-server %s (revision %s, %s)\n", b.Version, b.Revision, b.GoVersion)
	return nil
}

// newBuildInfoMetric is terdut_build_info, 1 with the build's labels, as Prometheus's own
// servers report theirs: a dashboard joins it to see which version each replica runs.
func newBuildInfoMetric(b buildInfo) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "terdut_build_info",
		Help:        "1, with the version, VCS revision and Go release of this terdut-server as labels.",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Revision, "goversion": b.GoVersion}},
		func() float64 { return 1 })
}
