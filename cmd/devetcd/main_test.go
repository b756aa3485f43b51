package main

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestFlagsExit runs the built command: --help is a request, not a
// mistake, and exits 0 with the usage on stderr; an unknown flag is a
// mistake (2); --version prints one line and exits 0.
func TestFlagsExit(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "devetcd")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	tests := []struct {
		args     []string
		code     int
		contains string
	}{
		{[]string{"--help"}, 0, "-listen"},
		{[]string{"-h"}, 0, "-listen"},
		{[]string{"--no-such-flag"}, 2, "no-such-flag"},
		{[]string{"--version"}, 0, "devetcd "},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, err := exec.Command(bin, tt.args...).CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(string(out), tt.contains) {
				t.Errorf("devetcd %s: exit %d, output %q; want exit %d and %q in it", strings.Join(tt.args, " "), code, out, tt.code, tt.contains)
			}
		})
	}
}
