// Package gctune sets Go's garbage collector for refundd's heap from its
// --gc-percent and --memory-limit settings.
package gctune

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Config sets Go's garbage collector for refundd's heap, which is a small
// live set (idle actors of a few KiB each) under a stream of short-lived
// request, decision and commit garbage. With Go's default (a cycle each
// time the heap doubles) the collector took about a fifth of refundd's CPU
// under the lifecycle load; a larger Percent runs it a quarter as often,
// and MemoryLimit keeps the larger heap from growing past a bound, where
// the collector runs as often as it must (docs/BENCHMARKS.md).
type Config struct {
	// Percent is the heap growth between collections, as GOGC; zero
	// leaves Go's default (100). GOGC in the environment wins.
	Percent int
	// MemoryLimit is the soft limit of the Go heap and runtime: a size
	// ("1536MiB", "4GiB", bytes), "auto" (half of the cgroup's memory
	// limit, or of the machine's memory) or "off". GOMEMLIMIT in the
	// environment wins.
	MemoryLimit string
}

// Apply sets the collector as c says and describes what it did, for the
// start-up log. It changes process-wide settings, so only main calls it.
func Apply(c Config, getenv func(string) string) (string, error) {
	var parts []string
	switch {
	case getenv("GOGC") != "":
		parts = append(parts, "gc percent from GOGC="+getenv("GOGC"))
	case c.Percent > 0:
		debug.SetGCPercent(c.Percent)
		parts = append(parts, fmt.Sprintf("gc percent %d", c.Percent))
	}
	if getenv("GOMEMLIMIT") != "" {
		return strings.Join(append(parts, "memory limit from GOMEMLIMIT="+getenv("GOMEMLIMIT")), ", "), nil
	}
	limit, err := Limit(c.MemoryLimit, readMemory)
	if err != nil {
		return "", err
	}
	if limit > 0 {
		debug.SetMemoryLimit(limit)
		parts = append(parts, fmt.Sprintf("memory limit %d MiB", limit>>20))
	} else {
		parts = append(parts, "no memory limit")
	}
	return strings.Join(parts, ", "), nil
}

// Limit turns a --memory-limit value into bytes; 0 means none. total
// reports the memory refundd may use (cgroup limit or machine).
func Limit(v string, total func() (int64, error)) (int64, error) {
	switch strings.ToLower(strings.TrimSpace(v)) {
	case "", "off", "0":
		return 0, nil
	case "auto":
		t, err := total()
		if err != nil {
			return 0, fmt.Errorf("--memory-limit auto: %w", err)
		}
		return t / 2, nil
	}
	n, err := parseSize(v)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit: %w", err)
	}
	if n < 64<<20 {
		return 0, fmt.Errorf("--memory-limit: %q is below 64MiB", v)
	}
	return n, nil
}

// parseSize reads a byte count with an optional KiB, MiB or GiB suffix.
func parseSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}} {
		if rest, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a size like 1536MiB, 4GiB or a byte count", v)
	}
	return n * mult, nil
}

// readMemory is the memory this process may use: its cgroup's limit when
// one is set and below the machine's memory, else the machine's.
//
// The cgroup is found as the kernel describes it (/proc/self/cgroup and
// /proc/self/mountinfo), in the v2 hierarchy or the v1 memory controller
// (older hosts and container runtimes, hybrid set-ups): automemlimit's
// reading of both, rather than one more hand-written parser of mountinfo.
func readMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	machine, err := memTotal(f)
	if err != nil {
		return 0, err
	}
	// An error here means no cgroup limit (none set, not Linux, no
	// controller mounted): the machine's memory is the bound then.
	if n, err := memlimit.FromCgroup(); err == nil && n > 0 && n < uint64(machine) {
		return int64(n), nil
	}
	return machine, nil
}

// memTotal reads MemTotal from /proc/meminfo's format, in bytes.
func memTotal(r io.Reader) (int64, error) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("meminfo: %w", err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, errors.New("meminfo: no MemTotal line")
}
