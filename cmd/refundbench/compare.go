package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// compare reads JSON reports of runs made in turn against two targets
// (A B A B ...; A is the label of the first file) and prints a Markdown
// table of each round with the ratios A/B, then the medians.
func compare(w io.Writer, files []string) error {
	var reps []Report
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r Report
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		reps = append(reps, r)
	}
	if len(reps) < 2 {
		return errors.New("compare: need reports of at least two runs")
	}
	a := reps[0].Label
	var as, bs []Report
	b := ""
	for _, r := range reps {
		if r.Label == a {
			as = append(as, r)
			continue
		}
		if b == "" {
			b = r.Label
		}
		if r.Label != b {
			return fmt.Errorf("compare: three targets (%s, %s, %s)", a, b, r.Label)
		}
		bs = append(bs, r)
	}
	n := min(len(as), len(bs))
	if n == 0 {
		return errors.New("compare: need runs of two targets")
	}
	h := reps[0].Headline
	fmt.Fprintf(w, "| round | %s %s/s | p50 ms | p99 ms | CPU ms/op | %s %s/s | p50 ms | p99 ms | CPU ms/op | throughput %s/%s | p99 %s/%s | CPU/op %s/%s | load avg | checks |\n",
		a, h, b, h, a, b, a, b, b, a)
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- |")
	var tr, pr, cr []float64
	for i := range n {
		x, y := as[i], bs[i]
		ox, oy := x.Ops[h], y.Ops[h]
		ratio := x.PerSecond / y.PerSecond
		p99 := ox.P99 / oy.P99
		tr, pr = append(tr, ratio), append(pr, p99)
		checks := "ok"
		if !x.Check.OK || !y.Check.OK {
			checks = "FAILED"
		}
		cpu := "n/a"
		if x.CPUPerOp > 0 && y.CPUPerOp > 0 {
			cr = append(cr, y.CPUPerOp/x.CPUPerOp)
			cpu = fmt.Sprintf("%.2fx", y.CPUPerOp/x.CPUPerOp)
		}
		fmt.Fprintf(w, "| %d | %.0f | %s | %s | %s | %.0f | %s | %s | %s | %.2fx | %.2f | %s | %s, %s | %s |\n", i+1,
			x.PerSecond, fmtMS(ox.P50), fmtMS(ox.P99), cpuMS(x), y.PerSecond, fmtMS(oy.P50), fmtMS(oy.P99), cpuMS(y),
			ratio, p99, cpu, x.LoadAvg[0], y.LoadAvg[0], checks)
	}
	fmt.Fprintf(w, "\nmedian throughput ratio %s/%s: %.2fx; median p99 ratio: %.2f (below 1: %s's p99 is lower)\n",
		a, b, median(tr), median(pr), a)
	if len(cr) > 0 {
		fmt.Fprintf(w, "median service CPU per %s, %s/%s: %.2fx\n", h, b, a, median(cr))
	}
	// Allocations per operation, where both targets report them: they
	// hardly move with the machine's load, so they show a change that the
	// rates and CPU times of a noisy machine hide.
	var xa, ya []float64
	for i := range n {
		if as[i].AllocPerOp > 0 && bs[i].AllocPerOp > 0 {
			xa, ya = append(xa, as[i].AllocPerOp), append(ya, bs[i].AllocPerOp)
		}
	}
	if len(xa) > 0 {
		fmt.Fprintf(w, "service KiB allocated per %s by round: %s %s; %s %s; median %s/%s: %.2fx\n",
			h, a, fmtKiB(xa), b, fmtKiB(ya), b, a, median(ya)/median(xa))
	}
	return nil
}

func fmtKiB(v []float64) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = fmt.Sprintf("%.1f", x)
	}
	return strings.Join(s, " ")
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func cpuMS(r Report) string {
	if r.CPUPerOp <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", r.CPUPerOp)
}
