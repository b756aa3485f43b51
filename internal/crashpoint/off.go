//go:build !crashpoints

package crashpoint

// Hit is a no-op outside crash-test builds.
func Hit(string) {}

// Enabled reports whether this build can crash on purpose.
const Enabled = false
