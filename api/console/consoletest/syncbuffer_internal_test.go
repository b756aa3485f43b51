package consoletest

import (
	"strings"
	"sync"
	"testing"
)

// TestSyncBuffer_ReadWhileWritten: NewPage reads the browser's stderr
// while exec's copier may still write it (the browser gone, its helpers
// not yet); with a bare bytes.Buffer the race detector failed
// TestConsole_DurableCounters that way.
func TestSyncBuffer_ReadWhileWritten(t *testing.T) {
	var b syncBuffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 200 {
			_, _ = b.Write([]byte("x"))
		}
	}()
	for range 200 {
		_ = tail(b.String(), 10)
		_ = b.Len()
	}
	wg.Wait()
	if got := b.String(); got != strings.Repeat("x", 200) {
		t.Fatalf("buffer holds %d bytes, want 200", len(got))
	}
}
