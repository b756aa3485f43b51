package main

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// cpuWatch samples the CPU time (user + system) of the service under test
// over the measured window: on a shared machine throughput moves with the
// neighbours' load, CPU time per operation much less.
type cpuWatch struct {
	pids []int
	uid  string // every process of this user too (e.g. postgres); "" none
	tick float64
}

func newCPUWatch(pids string, userName string) (*cpuWatch, error) {
	w := &cpuWatch{tick: 100} // USER_HZ is 100 on every Linux architecture Go supports
	for _, p := range strings.FieldsFunc(pids, func(r rune) bool { return r == ',' || r == ' ' }) {
		n, err := strconv.Atoi(p)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--cpu-pids: %q is not a process id", p)
		}
		w.pids = append(w.pids, n)
	}
	if userName != "" {
		u, err := user.Lookup(userName)
		if err != nil {
			return nil, fmt.Errorf("--cpu-user: %w", err)
		}
		w.uid = u.Uid
	}
	return w, nil
}

// sample returns the service's and this process's CPU seconds so far.
func (w *cpuWatch) sample() (service, self float64) {
	seen := map[int]bool{}
	for _, p := range w.pids {
		seen[p] = true
		service += w.procCPU(p)
	}
	if w.uid != "" {
		dirs, _ := filepath.Glob("/proc/[0-9]*")
		for _, d := range dirs {
			p, _ := strconv.Atoi(filepath.Base(d))
			if seen[p] || !w.ownedBy(d) {
				continue
			}
			service += w.procCPU(p)
		}
	}
	return service, w.procCPU(os.Getpid())
}

func (w *cpuWatch) ownedBy(dir string) bool {
	raw, err := os.ReadFile(dir + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Uid:" {
			return f[1] == w.uid
		}
	}
	return false
}

// procCPU reads utime + stime of a process (0 if it is gone).
func (w *cpuWatch) procCPU(pid int) float64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / w.tick
}

// cpuWindow samples at warmEnd and end (from a goroutine started before
// the load) and fills the report's CPU fields.
type cpuWindow struct {
	w            *cpuWatch // nil: only the load average is taken
	svc0, self0  float64
	svc1, self1  float64
	load0, load1 string
	// alloc reads the bytes the service has allocated so far (false: it
	// does not say); alloc1 - alloc0 is the window's when allocOK.
	alloc          func() (float64, bool)
	alloc0, alloc1 float64
	allocOK        bool
	done           chan struct{}
}

func watchWindow(w *cpuWatch, alloc func() (float64, bool), warmEnd, end time.Time) *cpuWindow {
	c := &cpuWindow{w: w, alloc: alloc, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		time.Sleep(time.Until(warmEnd))
		if c.w != nil {
			c.svc0, c.self0 = c.w.sample()
		}
		ok0 := false
		if c.alloc != nil {
			c.alloc0, ok0 = c.alloc()
		}
		c.load0 = loadAvg()
		time.Sleep(time.Until(end))
		if c.w != nil {
			c.svc1, c.self1 = c.w.sample()
		}
		if ok0 {
			c.alloc1, c.allocOK = c.alloc()
		}
		c.load1 = loadAvg()
	}()
	return c
}

func loadAvg() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(raw))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
