//go:build crashpoints

package crashpoint

import (
	"os"
	"syscall"
)

// Enabled reports whether this build can crash on purpose.
const Enabled = true

// Hit kills the process with SIGKILL if REFUNDD_CRASH_AT names this point.
// Nothing runs after it: no deferred call, no flush, exactly like a power
// cut for the process.
func Hit(name string) {
	if os.Getenv("REFUNDD_CRASH_AT") == name {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
