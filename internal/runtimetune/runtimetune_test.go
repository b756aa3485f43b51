package runtimetune

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
)

func TestMemoryLimit(t *testing.T) {
	total := func() (int64, error) { return 8 << 30, nil }
	for _, tc := range []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{in: "auto", want: 4 << 30},
		{in: "off"},
		{in: ""},
		{in: "0"},
		{in: "1536MiB", want: 1536 << 20},
		{in: "4GiB", want: 4 << 30},
		{in: " 2 GiB ", want: 2 << 30},
		{in: "131072KiB", want: 128 << 20},
		{in: "268435456", want: 256 << 20},
		{in: "12MiB", wantErr: true}, // below the 64 MiB floor
		{in: "4GB", wantErr: true},
		{in: "-1GiB", wantErr: true},
		{in: "lots", wantErr: true},
		{in: "9999999999GiB", wantErr: true},
	} {
		got, err := Limit(tc.in, total)
		if (err != nil) != tc.wantErr || got != tc.want {
			t.Errorf("Limit(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.wantErr)
		}
	}
	broken := func() (int64, error) { return 0, errors.New("no meminfo") }
	if _, err := Limit("auto", broken); err == nil {
		t.Error("auto without a memory size: want an error")
	}
}

func TestMemTotal(t *testing.T) {
	n, err := memTotal(strings.NewReader("MemTotal:       24576000 kB\nMemFree:  1 kB\n"))
	if err != nil || n != 24576000<<10 {
		t.Fatalf("memTotal = %d, %v", n, err)
	}
	if _, err := memTotal(strings.NewReader("MemFree: 1 kB\n")); err == nil {
		t.Fatal("no MemTotal line: want an error")
	}
}

// TestApplyGC changes process-wide settings and puts them back.
func TestApplyGC(t *testing.T) {
	pct := debug.SetGCPercent(100)
	lim := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(pct); debug.SetMemoryLimit(lim) })

	note, err := Apply(Config{Percent: 300, MemoryLimit: "512MiB"}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 300 {
		t.Errorf("gc percent = %d, want 300", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 512<<20 {
		t.Errorf("memory limit = %d, want %d", got, 512<<20)
	}
	if want := fmt.Sprintf("procs %d, gc percent 300, memory limit 512 MiB", runtime.GOMAXPROCS(0)); note != want {
		t.Errorf("note = %q", note)
	}

	// GOGC and GOMEMLIMIT in the environment are the operator's: left alone.
	debug.SetMemoryLimit(1 << 40)
	env := map[string]string{"GOGC": "150", "GOMEMLIMIT": "1GiB"}
	note, err = Apply(Config{Percent: 300, MemoryLimit: "512MiB"}, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("gc percent with GOGC set = %d, want it untouched (100)", got)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<40 {
		t.Errorf("memory limit with GOMEMLIMIT set = %d, want it untouched", got)
	}
	if !strings.Contains(note, "GOGC=150") || !strings.Contains(note, "GOMEMLIMIT=1GiB") {
		t.Errorf("note = %q", note)
	}
}

func TestProcs(t *testing.T) {
	for _, tc := range []struct {
		name          string
		min           int
		env           string
		cpus, current int
		want          int
		noteHas       string
	}{
		{"one CPU by affinity: two Ps", 2, "", 1, 1, 2, "procs 2 on 1 CPU"},
		{"enough CPUs", 2, "", 2, 2, 0, "procs 2"},
		{"more than asked", 2, "", 16, 16, 0, "procs 16"},
		{"a quota chose one P: Go's choice stands", 2, "", 8, 1, 0, "the CPU quota's"},
		{"GOMAXPROCS set by the operator", 2, "1", 1, 1, 0, "GOMAXPROCS=1"},
		{"off", 0, "", 1, 1, 0, "procs 1"},
		{"one is Go's choice", 1, "", 1, 1, 0, "procs 1"},
		{"more asked", 4, "", 1, 1, 4, "procs 4 on 1 CPU"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, note := Procs(tc.min, tc.env, tc.cpus, tc.current)
			if got != tc.want || !strings.Contains(note, tc.noteHas) {
				t.Errorf("Procs(%d, %q, %d, %d) = %d, %q; want %d and a note with %q",
					tc.min, tc.env, tc.cpus, tc.current, got, note, tc.want, tc.noteHas)
			}
		})
	}
}

// TestApplyProcs asks for one P more than the CPUs this process may use,
// as --min-procs 2 does on one CPU, and checks Go's setting moved.
func TestApplyProcs(t *testing.T) {
	before := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(before) })
	want := runtime.NumCPU() + 1
	note, err := Apply(Config{MinProcs: want}, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Errorf("GOMAXPROCS = %d after --min-procs %d on %d CPUs (note %q)", got, want, runtime.NumCPU(), note)
	}
}

// TestReadMemory_CgroupV1 puts a child process in a memory cgroup of the
// v1 hierarchy with a 512 MiB limit and asks it what readMemory sees:
// --memory-limit auto must halve the cgroup's limit there too, not the
// machine's memory. It needs root and a v1 memory controller (this
// project's machines have one); elsewhere it skips.
func TestReadMemory_CgroupV1(t *testing.T) {
	if os.Getenv("REFUNDD_TEST_READMEMORY_CHILD") == "1" {
		// The child: wait until the parent has moved it, then answer.
		if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
			fmt.Println("stdin:", err)
			os.Exit(1)
		}
		n, err := readMemory()
		fmt.Println(n, err)
		os.Exit(0)
	}
	parent := cgroupV1MemoryDir(t)
	dir := filepath.Join(parent, fmt.Sprintf("refundd-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Skipf("cannot make a memory cgroup (%v): needs root", err)
	}
	t.Cleanup(func() { _ = os.Remove(dir) })
	const limit = 512 << 20
	if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.Itoa(limit)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadMemory_CgroupV1$")
	cmd.Env = append(os.Environ(), "REFUNDD_TEST_READMEMORY_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	moveErr := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	stdin.Write([]byte("go\n"))
	stdin.Close()
	waitErr := cmd.Wait()
	if moveErr != nil {
		t.Fatalf("moving the child into %s: %v", dir, moveErr)
	}
	if waitErr != nil {
		t.Fatalf("child: %v\n%s", waitErr, out.String())
	}
	if got, want := strings.TrimSpace(out.String()), fmt.Sprintf("%d <nil>", limit); got != want {
		t.Fatalf("readMemory in a v1 cgroup limited to 512 MiB = %q, want %q", got, want)
	}
}

// cgroupV1MemoryDir is this process's directory in the v1 memory
// hierarchy, or skips the test when there is none.
func cgroupV1MemoryDir(t *testing.T) string {
	t.Helper()
	const root = "/sys/fs/cgroup/memory"
	if _, err := os.Stat(filepath.Join(root, "memory.limit_in_bytes")); err != nil {
		t.Skipf("no cgroup v1 memory controller at %s", root)
	}
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		// "4:memory:/some/path"
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "memory" {
			return filepath.Join(root, parts[2])
		}
	}
	t.Skip("no memory line in /proc/self/cgroup")
	return ""
}
