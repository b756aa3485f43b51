package version

import (
	"os/exec"
	"runtime/debug"
	"strings"
	"testing"
)

func TestFromBuildInfo(t *testing.T) {
	vcs := []debug.BuildSetting{
		{Key: "vcs", Value: "git"},
		{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"},
		{Key: "vcs.time", Value: "2026-12-01T10:00:00Z"},
		{Key: "vcs.modified", Value: "true"},
	}
	tests := []struct {
		name  string
		stamp string
		bi    *debug.BuildInfo
		ok    bool
		want  Info
		line  string
	}{
		{"no build info", "", nil, false,
			Info{Version: "devel", GoVersion: "GO"}, "refundd devel GO"},
		{"checkout build", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs}, true,
			Info{Version: "devel", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-12-01T10:00:00Z", Modified: true, GoVersion: "go1.26.8"},
			"refundd devel (revision 0123456789ab, 2026-12-01T10:00:00Z, modified) go1.26.8"},
		{"go install of a tag", "", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.3.0"}}, true,
			Info{Version: "v0.3.0", GoVersion: "go1.26.8"}, "refundd v0.3.0 go1.26.8"},
		{"stamped release wins", "v1.0.0", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: vcs[:3]}, true,
			Info{Version: "v1.0.0", Revision: "0123456789abcdef0123456789abcdef01234567", Time: "2026-12-01T10:00:00Z", GoVersion: "go1.26.8"},
			"refundd v1.0.0 (revision 0123456789ab, 2026-12-01T10:00:00Z) go1.26.8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuildInfo(tt.stamp, tt.bi, tt.ok)
			if tt.want.GoVersion == "GO" {
				tt.want.GoVersion = got.GoVersion
				tt.line = strings.Replace(tt.line, "GO", got.GoVersion, 1)
				if !strings.HasPrefix(got.GoVersion, "go") {
					t.Errorf("GoVersion = %q, want the runtime's", got.GoVersion)
				}
			}
			if got != tt.want {
				t.Errorf("fromBuildInfo = %+v, want %+v", got, tt.want)
			}
			if s := got.String("refundd"); s != tt.line {
				t.Errorf("String = %q, want %q", s, tt.line)
			}
		})
	}
}

func TestRequested(t *testing.T) {
	tests := []struct {
		args []string
		want bool
	}{
		{nil, false},
		{[]string{"--version"}, true},
		{[]string{"-version"}, true},
		{[]string{"--listen", "127.0.0.1:0", "--version"}, true},
		{[]string{"--version=true"}, true},
		{[]string{"--version=false"}, false},
		{[]string{"--", "--version"}, false},
		{[]string{"--versions"}, false},
	}
	for _, tt := range tests {
		if got := Requested(tt.args); got != tt.want {
			t.Errorf("Requested(%q) = %v, want %v", tt.args, got, tt.want)
		}
	}
}

// TestStampedBuild links a binary with -X as scripts/release does and
// checks that it reports the stamped version.
func TestStampedBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	bin := t.TempDir() + "/refundctl"
	build := exec.Command("go", "build", "-o", bin,
		"-ldflags", "-X github.com/refundd/refundd/internal/version.stamped=v9.8.7-test", "github.com/refundd/refundd/cmd/refundctl")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("refundctl --version: %v\n%s", err, out)
	}
	if !strings.HasPrefix(string(out), "refundctl v9.8.7-test ") {
		t.Errorf("refundctl --version = %q, want it to start with %q", out, "refundctl v9.8.7-test ")
	}
}
