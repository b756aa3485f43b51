// Command fsyncprobe measures what the disk under a directory charges for
// the shape of a bbolt commit, as more of the commit's pages sit apart
// (package fsyncprobe):
//
//	go run ./bench/cmd/fsyncprobe --dir data
//
// Run it on the disk the journal lives on, with nothing else writing.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/bench/fsyncprobe"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "fsyncprobe:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("fsyncprobe", flag.ContinueOnError)
	dir := fs.String("dir", ".", "directory on the disk to measure (a file is made and removed there)")
	sizeMB := fs.Int64("size-mb", 256, "size of the file the scattered pages land in, MiB")
	pages := fs.Int("pages", 19, "data pages per commit (the journal wrote ~19 at 64 lifecycle clients)")
	scattered := fs.String("scattered", "0,1,2,4,8,12,19", "cases: how many of the pages land at random offsets, comma-separated")
	commits := fs.Int("commits", 1000, "commits per case and round")
	rounds := fs.Int("rounds", 2, "rounds over all cases")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ks []int
	for _, s := range strings.Split(*scattered, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--scattered: %q is not a number", s)
		}
		ks = append(ks, k)
	}
	c := fsyncprobe.Config{Dir: *dir, FileBytes: *sizeMB << 20, Pages: *pages, Scattered: ks, Commits: *commits, Rounds: *rounds}
	fmt.Fprintf(out, "fsyncprobe: %d pages of 4 KiB per commit, then fdatasync, one meta page, fdatasync; %d commits per case; file %d MiB in %s\n",
		c.Pages, c.Commits, *sizeMB, c.Dir)
	fmt.Fprintf(out, "machine: %d CPUs, %s/%s, %s\n\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
	fmt.Fprintln(out, "| round | scattered pages | commits/s | data fdatasync mean | p50 | p99 | meta fdatasync mean | p99 |")
	fmt.Fprintln(out, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
	_, err := fsyncprobe.Run(ctx, c, func(r fsyncprobe.Result) {
		fmt.Fprintf(out, "| %d | %d of %d | %.0f | %s | %s | %s | %s | %s |\n", r.Round, r.Scattered, c.Pages, r.PerSecond(),
			us(r.Data.Mean), us(r.Data.P50), us(r.Data.P99), us(r.Meta.Mean), us(r.Meta.P99))
	})
	return err
}

func us(d time.Duration) string { return fmt.Sprintf("%d us", d.Microseconds()) }
