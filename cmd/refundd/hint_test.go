package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The start-up hint is a command to paste into a shell: its URL holds a
// '?', which zsh (and bash with failglob) refuse unquoted, and the data
// directory may hold spaces. Run through such a shell, with printf for
// curl, it must give curl exactly the arguments meant.
func TestRun_StartupHintIsAShellCommand(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash to run the hint with")
	}
	data := filepath.Join(t.TempDir(), "my data")
	var stdout bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr = &stdout, io.Discard
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", data, "--provider", "memory"}, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	var hint string
	for _, line := range strings.Split(stdout.String(), "\n") {
		if rest, ok := strings.CutPrefix(line, "try: curl "); ok {
			hint = rest
		}
	}
	if hint == "" {
		t.Fatalf("no \"try: curl\" line in:\n%s", stdout.String())
	}
	token, err := os.ReadFile(filepath.Join(data, "tokens", "service.token"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bash, "-O", "failglob", "-c", `printf '%s\n' `+hint)
	cmd.Dir = t.TempDir()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the hint fails in a shell that refuses unmatched globs: %v: %s\nhint: curl %s", err, out, hint)
	}
	want := strings.Join([]string{"-s", "-H", "Authorization: Bearer " + strings.TrimSpace(string(token)),
		"http://" + m.Addr() + "/v1/refunds?state=UNKNOWN", ""}, "\n")
	if string(out) != want {
		t.Errorf("curl would get\n%s\nwant\n%s", out, want)
	}
}
