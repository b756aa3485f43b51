//go:build !unix

package actors_test

import "time"

// processCPU is not measured here: benchmarks leave cpu-us/refund out.
func processCPU() time.Duration { return 0 }
