// Command refundctl answers auditors' and operators' questions about a
// refundd journal: does it hold together, what happened to a reservation,
// what was its state at a past moment, what are the figures, does it agree
// with WeChat Pay; and it takes, checks and restores backups.
//
// It reads a backup file (--file), the journal of a stopped refundd
// (--data DIR), or a hot backup it takes from a running one (--server
// URL), always read-only: the file stays byte-identical. Only restore
// writes, and only a new file.
//
// Exit status: 0 all is well; 1 the journal or the reconciliation has
// problems (they are listed); 2 bad usage; 3 the work could not be done (a
// file that cannot be opened or is held by a running refundd, a server that
// does not answer); 4 reconcile had nothing to compare (no refund in the
// range on either side).
//
// Run "refundctl help" for the commands, "refundctl COMMAND --help" for
// one.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/refundd/refundd/internal/runtimetune"
)

func main() {
	// The audit commands' live heap stays small whatever the journal's
	// size, so a rarer collection saves a sixth of their CPU; but GOGC=400
	// lets the heap reach five times the live set, and verify's live set
	// is its budget of reservations in progress (about 120 MiB on an
	// interleaved journal): the memory limit keeps the heap under the
	// audit's 512 MiB target, collecting more often only near it
	// (docs/BENCHMARKS.md). GOGC and GOMEMLIMIT in the environment win.
	if _, err := runtimetune.Apply(runtimetune.Config{Percent: 400, MemoryLimit: "384MiB"}, os.Getenv); err != nil {
		panic(err) // a constant that parses
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
