package gctune

import (
	"errors"
	"runtime/debug"
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
	if note != "gc percent 300, memory limit 512 MiB" {
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
