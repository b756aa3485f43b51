package consoletest_test

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/refundd/refundd/api/console/consoletest"
)

// recorder is a testing.TB whose Fatal ends only the goroutine it runs in,
// so a test can see what Launch reports.
type recorder struct {
	testing.TB
	mu    sync.Mutex
	logs  []string
	fatal string
}

func (r *recorder) Helper() {}
func (r *recorder) Log(args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprint(args...))
}
func (r *recorder) Fatal(args ...any) {
	r.mu.Lock()
	r.fatal = fmt.Sprint(args...)
	r.mu.Unlock()
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, args ...any) { r.Fatal(fmt.Sprintf(format, args...)) }

// TestLaunch_BrowserQuitsAtStart: a browser that quits before answering is
// started once more, and a second quit fails the test naming the exit
// status and what the browser wrote.
func TestLaunch_BrowserQuitsAtStart(t *testing.T) {
	dir := t.TempDir()
	quits := filepath.Join(dir, "chromium")
	if err := os.WriteFile(quits, []byte("#!/bin/sh\necho 'launcher: no display' >&2\nexit 7\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		consoletest.Launch(r, quits)
	}()
	<-done
	if len(r.logs) != 1 || !strings.Contains(r.logs[0], "starting it once more") {
		t.Fatalf("logs %q, want one saying it starts the browser once more", r.logs)
	}
	for _, want := range []string{"quit before its first answer", "exit status 7", "launcher: no display"} {
		if !strings.Contains(r.fatal, want) {
			t.Errorf("the failure does not say %q: %q", want, r.fatal)
		}
	}
}
