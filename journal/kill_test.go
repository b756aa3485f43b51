package journal_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
)

// The child half of TestKill9_IndexTail: appends forever to a few streams
// and prints "stream seq" for every acknowledged append.
func init() {
	path := os.Getenv("JOURNAL_KILL_CHILD")
	if path == "" {
		return
	}
	// A tail that is never flushed by count and rarely by time, so the kill
	// lands with most acknowledged records only in the log.
	db, err := journal.Open(path, &journal.Options{IndexFlushEntries: 1 << 30, IndexFlushDelay: 300 * time.Millisecond})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	heads := map[string]uint64{}
	for i := range 5 {
		s := fmt.Sprintf("s%d", i)
		if heads[s], err = db.Head(context.Background(), s); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	}
	for i := 0; ; i++ {
		s := fmt.Sprintf("s%d", i%5)
		last, err := db.Append(context.Background(), journal.AppendRequest{Stream: s, Expected: heads[s],
			Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(strconv.Itoa(i))}}})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		heads[s] = last
		fmt.Fprintf(out, "%s %d\n", s, last)
		_ = out.Flush() // acknowledged only once the parent can read it
	}
}

// TestKill9_IndexTail kills a process that appends with fsync on at random
// moments (some between index flushes, some during one) and checks after
// each kill that every acknowledged append is readable by stream, that the
// file verifies, and that appends continue at the right seq.
func TestKill9_IndexTail(t *testing.T) {
	if testing.Short() {
		t.Skip("kills real processes")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "j.db")
	acked := map[string]uint64{}
	for round := range 4 {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), "JOURNAL_KILL_CHILD="+path)
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Kill after a number of acknowledgements that differs per round.
		killAt := 200 + round*350
		sc := bufio.NewScanner(stdout)
		n := 0
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			seq, _ := strconv.ParseUint(f[1], 10, 64)
			acked[f[0]] = seq
			if n++; n == killAt {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		_ = cmd.Wait()
		if n < killAt {
			t.Fatalf("round %d: child stopped after %d acks, before the kill", round, n)
		}

		db, err := journal.Open(path, nil)
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", round, err)
		}
		if err := db.Verify(context.Background()); err != nil {
			t.Fatalf("round %d: verify after kill: %v", round, err)
		}
		for s, want := range acked {
			recs, err := db.Load(context.Background(), s, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Appends acknowledged before the kill are all there; the
			// child may have committed one more per stream whose ack the
			// kill cut off.
			if uint64(len(recs)) < want || uint64(len(recs)) > want+1 {
				t.Fatalf("round %d: stream %s has %d records, %d were acknowledged", round, s, len(recs), want)
			}
			head, err := db.Head(context.Background(), s)
			if err != nil || head != uint64(len(recs)) {
				t.Fatalf("round %d: Head(%s) = %d, %v; Load found %d", round, s, head, err, len(recs))
			}
			acked[s] = head
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("round %d: killed after %d acks; %d streams intact", round, n, len(acked))
	}
}
