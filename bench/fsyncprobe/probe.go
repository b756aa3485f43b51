// Package fsyncprobe measures what a disk charges for the shape of a bbolt
// commit: some 4 KiB pages written in place, an fdatasync, one more page
// (bbolt's meta page) and a second fdatasync. It varies how many of the
// data pages sit apart from the rest, because the journal's profiles showed
// its data fdatasync costing three times its meta fdatasync (a 3 s trace
// at ~600 commits/s: 673 us against 202 us) while writing ~19 pages in ~8
// separate runs.
//
// The file is written in full and synced before any case, so pages are
// overwritten in place, as bbolt overwrites the pages it reuses.
package fsyncprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"time"
)

// PageSize is bbolt's page size on this platform's usual setting.
const PageSize = 4096

// Config is one probe: every case in Scattered is run Rounds times, each
// run being Commits commits of Pages data pages.
type Config struct {
	Dir       string // where the probe's file is made (the disk to measure)
	FileBytes int64  // size of the file the scattered pages land in
	Pages     int    // data pages per commit
	Scattered []int  // cases: how many of the Pages land at random offsets
	Commits   int    // commits per case and round
	Rounds    int    // rounds over all cases, for the noise
}

// Result is one case of one round.
type Result struct {
	Round     int
	Scattered int
	Commits   int
	Elapsed   time.Duration
	Data      Stats // the fdatasync after the data pages
	Meta      Stats // the fdatasync after the one meta page
}

// PerSecond is the commits per second of the case.
func (r Result) PerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Commits) / r.Elapsed.Seconds()
}

// Stats summarizes the fdatasync latencies of one kind.
type Stats struct {
	Mean, P50, P99 time.Duration
}

func (c Config) validate() error {
	switch {
	case c.Dir == "":
		return errors.New("fsyncprobe: no directory")
	case c.Pages < 1:
		return fmt.Errorf("fsyncprobe: pages per commit must be >= 1, got %d", c.Pages)
	case c.Commits < 1 || c.Rounds < 1:
		return fmt.Errorf("fsyncprobe: commits and rounds must be >= 1, got %d and %d", c.Commits, c.Rounds)
	case len(c.Scattered) == 0:
		return errors.New("fsyncprobe: no scattered cases")
	}
	for _, k := range c.Scattered {
		if k < 0 || k > c.Pages {
			return fmt.Errorf("fsyncprobe: scattered pages must be 0..%d (pages per commit), got %d", c.Pages, k)
		}
	}
	// The contiguous run of each commit moves along the file; it must fit
	// once without wrapping, past page 0 (the meta page).
	if least := int64(c.Pages+1) * PageSize * 2; c.FileBytes < least {
		return fmt.Errorf("fsyncprobe: file must be at least %d bytes for %d pages per commit, got %d", least, c.Pages, c.FileBytes)
	}
	return nil
}

// Run makes the file, runs every case and removes the file. progress, if
// not nil, gets each result as it is measured.
func Run(ctx context.Context, c Config, progress func(Result)) ([]Result, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(c.Dir, "fsyncprobe-*.dat")
	if err != nil {
		return nil, fmt.Errorf("fsyncprobe: %w", err)
	}
	defer func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}()
	pages := c.FileBytes / PageSize
	if err := fill(ctx, f, pages*PageSize); err != nil {
		return nil, err
	}
	var out []Result
	for round := 1; round <= c.Rounds; round++ {
		for _, k := range c.Scattered {
			r, err := runCase(ctx, f, pages, c.Pages, k, c.Commits)
			if err != nil {
				return out, err
			}
			r.Round = round
			out = append(out, r)
			if progress != nil {
				progress(r)
			}
		}
	}
	return out, nil
}

// fill writes the whole file once and syncs it: later writes overwrite
// allocated blocks instead of filling holes.
func fill(ctx context.Context, f *os.File, size int64) error {
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := min(int64(len(buf)), size-off)
		if _, err := f.WriteAt(buf[:n], off); err != nil {
			return fmt.Errorf("fsyncprobe: fill: %w", err)
		}
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("fsyncprobe: fill: %w", err)
	}
	return nil
}

func runCase(ctx context.Context, f *os.File, filePages int64, perCommit, scattered, commits int) (Result, error) {
	page := make([]byte, PageSize)
	data := make([]time.Duration, 0, commits)
	meta := make([]time.Duration, 0, commits)
	// The contiguous pages of a commit follow those of the one before,
	// wrapping before the end; page 0 is the meta page.
	run := int64(perCommit - scattered)
	next := int64(1)
	start := time.Now()
	for i := 0; i < commits; i++ {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		page[0] = byte(i) // not all zeros: every write changes the block
		for j := 0; j < scattered; j++ {
			if _, err := f.WriteAt(page, (1+rand.Int64N(filePages-1))*PageSize); err != nil {
				return Result{}, fmt.Errorf("fsyncprobe: write: %w", err)
			}
		}
		if next+run > filePages {
			next = 1
		}
		for j := int64(0); j < run; j++ {
			if _, err := f.WriteAt(page, (next+j)*PageSize); err != nil {
				return Result{}, fmt.Errorf("fsyncprobe: write: %w", err)
			}
		}
		next += run
		d, err := timedSync(f)
		if err != nil {
			return Result{}, err
		}
		data = append(data, d)
		if _, err := f.WriteAt(page, 0); err != nil {
			return Result{}, fmt.Errorf("fsyncprobe: write meta: %w", err)
		}
		if d, err = timedSync(f); err != nil {
			return Result{}, err
		}
		meta = append(meta, d)
	}
	return Result{Scattered: scattered, Commits: commits, Elapsed: time.Since(start),
		Data: summarize(data), Meta: summarize(meta)}, nil
}

func timedSync(f *os.File) (time.Duration, error) {
	t := time.Now()
	if err := dataSync(f); err != nil {
		return 0, fmt.Errorf("fsyncprobe: sync: %w", err)
	}
	return time.Since(t), nil
}

func summarize(ds []time.Duration) Stats {
	if len(ds) == 0 {
		return Stats{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Stats{Mean: sum / time.Duration(len(s)), P50: s[len(s)/2], P99: s[(len(s)*99)/100]}
}
