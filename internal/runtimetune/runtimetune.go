// Package runtimetune sets Go's runtime for refundd: the garbage collector
// from --gc-percent and --memory-limit, and the number of Ps (GOMAXPROCS)
// from --min-procs.
package runtimetune

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// Config sets Go's runtime. Its collector settings are for refundd's heap: a small
// live set (idle actors of a few KiB each) under a stream of short-lived
// request, decision and commit garbage. With Go's default (a cycle each
// time the heap doubles) the collector took about a fifth of refundd's CPU
// under the lifecycle load; a larger Percent runs it a quarter as often,
// and MemoryLimit keeps the larger heap from growing past a bound, where
// the collector runs as often as it must (docs/BENCHMARKS.md). On a core
// the requests keep busy, a cycle's marking takes most of it for a few
// hundred milliseconds, which is where refundd's slowest lifecycles came
// from: refundd's default, 1600, cut the pinned p99 by about a third
// against 400, at two and a half times the resident memory
// (docs/BENCHMARKS.md, "The collector and the tail").
type Config struct {
	// Percent is the heap growth between collections, as GOGC; zero
	// leaves Go's default (100). GOGC in the environment wins.
	Percent int
	// MemoryLimit is the soft limit of the Go heap and runtime: a size
	// ("1536MiB", "4GiB", bytes), "auto" (half of the cgroup's memory
	// limit, or of the machine's memory) or "off". GOMEMLIMIT in the
	// environment wins.
	MemoryLimit string
	// MinProcs is the least GOMAXPROCS when the CPUs the process may run on
	// (its affinity) are fewer; 0 or 1 leaves Go's choice. GOMAXPROCS in the
	// environment wins. See Procs for why.
	MinProcs int
}

// Apply sets the runtime as c says and describes what it did, for the
// start-up log. It changes process-wide settings, so only main calls it.
func Apply(c Config, getenv func(string) string) (string, error) {
	n, note := Procs(c.MinProcs, getenv("GOMAXPROCS"), runtime.NumCPU(), runtime.GOMAXPROCS(0))
	if n > 0 {
		runtime.GOMAXPROCS(n)
	}
	parts := []string{note}
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

// Procs decides GOMAXPROCS from minProcs (--min-procs), env (GOMAXPROCS in the
// environment), cpus (the CPUs the affinity mask allows, runtime.NumCPU)
// and current (Go's own choice). It returns the value to set, 0 to leave
// current, and a note for the start-up log.
//
// The journal's committer spends most of each commit blocked in fdatasync,
// and Go's scheduler hands that goroutine's P to other work only once its
// monitor notices the blocked system call. With one P the core sits idle
// meanwhile: pinned to one CPU, refundd kept it 84% busy under the
// lifecycle load, and 92-94% with two Ps, for about a seventh more
// lifecycles (docs/BENCHMARKS.md, "Two Ps on one CPU"). The affinity case
// only: when a CPU quota, not the mask, makes Go choose fewer Ps, the
// threads could run on several CPUs at once and spend the quota early, so
// Go's choice stands.
func Procs(minProcs int, env string, cpus, current int) (int, string) {
	switch {
	case env != "":
		return 0, "procs from GOMAXPROCS=" + env
	case current >= minProcs:
		return 0, fmt.Sprintf("procs %d", current)
	case cpus >= minProcs:
		return 0, fmt.Sprintf("procs %d (the CPU quota's; --min-procs %d applies to an affinity of fewer CPUs only)", current, minProcs)
	}
	return minProcs, fmt.Sprintf("procs %d on %d CPU (--min-procs: a P runs requests while the journal waits in fdatasync)", minProcs, cpus)
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
