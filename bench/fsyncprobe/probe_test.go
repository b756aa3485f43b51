package fsyncprobe

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"
)

func TestRun_MeasuresEveryCaseAndCleansUp(t *testing.T) {
	dir := t.TempDir()
	var seen []Result
	c := Config{Dir: dir, FileBytes: 1 << 20, Pages: 5, Scattered: []int{0, 5}, Commits: 4, Rounds: 2}
	out, err := Run(context.Background(), c, func(r Result) { seen = append(seen, r) })
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 4 || len(seen) != 4 {
		t.Fatalf("got %d results (%d reported), want 2 cases x 2 rounds", len(out), len(seen))
	}
	for i, r := range out {
		wantRound, wantK := i/2+1, c.Scattered[i%2]
		if r.Round != wantRound || r.Scattered != wantK || r.Commits != 4 {
			t.Errorf("result %d: round %d scattered %d commits %d, want %d %d 4", i, r.Round, r.Scattered, r.Commits, wantRound, wantK)
		}
		if r.Elapsed <= 0 || r.PerSecond() <= 0 || r.Data.Mean <= 0 || r.Meta.Mean <= 0 {
			t.Errorf("result %d measured nothing: %+v", i, r)
		}
		if r.Data.P50 > r.Data.P99 || r.Meta.P50 > r.Meta.P99 {
			t.Errorf("result %d: p50 above p99: %+v", i, r)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the probe left %d files behind", len(left))
	}
}

func TestRun_RefusesBadConfig(t *testing.T) {
	good := Config{Dir: t.TempDir(), FileBytes: 1 << 20, Pages: 4, Scattered: []int{1}, Commits: 1, Rounds: 1}
	for name, tc := range map[string]struct {
		change func(*Config)
		want   string
	}{
		"no dir":             {func(c *Config) { c.Dir = "" }, "no directory"},
		"no pages":           {func(c *Config) { c.Pages = 0 }, "pages per commit"},
		"scattered too many": {func(c *Config) { c.Scattered = []int{5} }, "scattered pages must be 0..4"},
		"negative scattered": {func(c *Config) { c.Scattered = []int{-1} }, "scattered pages"},
		"no cases":           {func(c *Config) { c.Scattered = nil }, "no scattered cases"},
		"no commits":         {func(c *Config) { c.Commits = 0 }, "commits and rounds"},
		"file too small":     {func(c *Config) { c.FileBytes = PageSize }, "file must be at least"},
	} {
		t.Run(name, func(t *testing.T) {
			c := good
			tc.change(&c)
			_, err := Run(context.Background(), c, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestRun_StopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	c := Config{Dir: t.TempDir(), FileBytes: 1 << 20, Pages: 2, Scattered: []int{0}, Commits: 1000, Rounds: 1}
	if _, err := Run(ctx, c, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*ms)
	}
	s := summarize(ds)
	if s.Mean != 50500*time.Microsecond || s.P50 != 51*ms || s.P99 != 100*ms {
		t.Fatalf("summarize = %+v, want mean 50.5ms p50 51ms p99 100ms", s)
	}
	if ds[0] != 100*ms {
		t.Fatal("summarize sorted its input in place")
	}
	if (summarize(nil) != Stats{}) {
		t.Fatal("summarize(nil) is not zero")
	}
}
