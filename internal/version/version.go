// Package version says which build of refundd is running: the version
// stamped into a release build, or else what the Go toolchain recorded
// (module version, VCS revision and time, uncommitted changes).
//
// scripts/release stamps the version with
//
//	go build -ldflags "-X github.com/refundd/refundd/internal/version.stamped=v1.2.3"
//
// A plain "go build" or "go run" leaves it empty; the module's build info
// then says "(devel)" for the main module, and the revision tells which
// commit it was built from (when built with -buildvcs in a git checkout).
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// stamped is set at link time by release builds (-ldflags -X); a variable,
// not a constant, because -X can only set variables.
var stamped string

// Info describes one build.
type Info struct {
	Version   string // "v1.2.3", or "devel" for an unstamped build of a checkout
	Revision  string // VCS commit, "" when not recorded
	Time      string // VCS commit time (RFC 3339), "" when not recorded
	Modified  bool   // the checkout had uncommitted changes
	GoVersion string // "go1.26.8"
}

// Get returns this binary's build information.
func Get() Info {
	bi, ok := debug.ReadBuildInfo()
	return fromBuildInfo(stamped, bi, ok)
}

func fromBuildInfo(stamp string, bi *debug.BuildInfo, ok bool) Info {
	info := Info{Version: "devel", GoVersion: runtime.Version()}
	if ok && bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		// "go install module@v1.2.3" records the module's version; a build
		// inside the checkout records "(devel)".
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			info.Version = v
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
	}
	if stamp != "" {
		info.Version = stamp
	}
	return info
}

// String is the one line that --version prints, e.g.
// "refundd v1.2.3 (revision 0123abcd, 2026-12-01T10:00:00Z, modified) go1.26.8".
func (i Info) String(program string) string {
	var details []string
	if i.Revision != "" {
		details = append(details, "revision "+short(i.Revision))
	}
	if i.Time != "" {
		details = append(details, i.Time)
	}
	if i.Modified {
		details = append(details, "modified")
	}
	s := program + " " + i.Version
	if len(details) > 0 {
		s += " (" + strings.Join(details, ", ") + ")"
	}
	return fmt.Sprintf("%s %s", s, i.GoVersion)
}

func short(rev string) string {
	if len(rev) > 12 {
		return rev[:12]
	}
	return rev
}

// Requested reports whether args ask for the version: a --version (or
// -version) anywhere before "--". Each command
// also registers the flag so that --help lists it; checking the arguments
// first lets a command print its version before it parses, and so without
// having to be given a valid configuration.
func Requested(args []string) bool {
	for _, a := range args {
		switch {
		case a == "--":
			return false
		case a == "--version" || a == "-version" || a == "--version=true" || a == "-version=true":
			return true
		}
	}
	return false
}
