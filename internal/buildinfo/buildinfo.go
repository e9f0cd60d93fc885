// Package buildinfo reads what the Go toolchain recorded in this binary when
// it was built (runtime/debug.ReadBuildInfo): the module's version, the VCS
// revision and commit time, and the Go version. `gateway version` prints it
// and the gateway_build_info metric carries it, so an operator can tell which
// build a replica runs.
package buildinfo

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Unknown stands for a field the build did not record: `go run` and `go test`
// stamp no VCS information, and a build outside a repository has no revision.
const Unknown = "unknown"

// Info is the build of the running binary.
type Info struct {
	// Version is the main module's version: a release tag (v1.2.3), a
	// pseudo-version between tags (v0.0.0-20261127…-abcdef012345), either
	// with "+dirty" when the work tree had changes, or "(devel)".
	Version string `json:"version"`
	// Revision is the VCS commit the binary was built from.
	Revision string `json:"revision"`
	// Time is the commit's time (RFC 3339), not the build's: a rebuild of the
	// same commit records the same time, which keeps builds reproducible.
	Time string `json:"time"`
	// Modified is true when the work tree had uncommitted changes.
	Modified bool `json:"modified"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"go_version"`
}

// Read returns the running binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return Info{Version: Unknown, Revision: Unknown, Time: Unknown, GoVersion: Unknown}
	}
	return FromBuildInfo(bi)
}

// FromBuildInfo extracts Info from what debug.ReadBuildInfo returned.
func FromBuildInfo(bi *debug.BuildInfo) Info {
	info := Info{Version: bi.Main.Version, Revision: Unknown, Time: Unknown, GoVersion: bi.GoVersion}
	if info.Version == "" {
		info.Version = Unknown
	}
	if info.GoVersion == "" {
		info.GoVersion = Unknown
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.Revision = s.Value
		case "vcs.time":
			info.Time = s.Value
		case "vcs.modified":
			info.Modified = s.Value == "true"
		}
	}
	return info
}

// String is the one line `gateway version` prints.
func (i Info) String() string {
	s := fmt.Sprintf("gateway %s (revision %s, %s, %s)", i.Version, i.Revision, i.Time, i.GoVersion)
	if i.Modified {
		s += ", modified work tree"
	}
	return s
}

// Collector is the gateway_build_info gauge: always 1, with the build in its
// labels, the Prometheus convention for joining a build to other series
// (e.g. `… * on(instance) group_left(version) gateway_build_info`).
func (i Info) Collector() prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_build_info",
		Help: "The running build: always 1, labelled with the module version, VCS revision, commit time and Go version.",
		ConstLabels: prometheus.Labels{
			"version": i.Version, "revision": i.Revision, "time": i.Time, "go_version": i.GoVersion,
		},
	}, func() float64 { return 1 })
}
