package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is one run's result, printed as a table or JSON.
type Report struct {
	Label     string             `json:"label"`
	Target    string             `json:"target"`
	Scenario  string             `json:"scenario"`
	Mode      string             `json:"mode"` // closed or open
	Clients   int                `json:"clients,omitempty"`
	Rate      float64            `json:"rate,omitempty"`
	RunID     string             `json:"run_id"`
	Warmup    float64            `json:"warmup_s"`
	Measured  float64            `json:"measured_s"`
	Headline  string             `json:"headline"` // the operation kind whose rate is the result
	PerSecond float64            `json:"per_second"`
	Ops       map[string]OpStats `json:"ops"`
	Requests  map[string]OpStats `json:"requests"`
	Errors    map[string]int64   `json:"errors"`
	Statuses  map[string]int64   `json:"statuses"`
	Counts    map[string]int64   `json:"counts,omitempty"`
	Dropped   int64              `json:"dropped,omitempty"`
	Notify    map[string]int64   `json:"notify_outcomes,omitempty"` // the target's own counters, during the run
	Check     CheckResult        `json:"check"`
	// ErrorRate is failed operations over all operations in the window.
	ErrorRate float64 `json:"error_rate"`
	// Failures says why the run failed (a threshold or the check); the
	// command exits 1 when it is not empty.
	Failures []string `json:"failures,omitempty"`
	// The service's CPU over the measured window (--cpu-pids, --cpu-user):
	// seconds, milliseconds per headline operation, and the load
	// generator's own seconds. LoadAvg is /proc/loadavg at its start and end.
	ServiceCPU float64 `json:"service_cpu_s,omitempty"`
	CPUPerOp   float64 `json:"service_cpu_ms_per_op,omitempty"`
	LoadGenCPU float64 `json:"loadgen_cpu_s,omitempty"`
	// The bytes the service allocated over the window (its /metrics'
	// go_memstats_alloc_bytes_total; absent when it serves none): MiB,
	// and KiB per headline operation.
	ServiceAlloc float64   `json:"service_alloc_mib,omitempty"`
	AllocPerOp   float64   `json:"service_alloc_kib_per_op,omitempty"`
	LoadAvg      [2]string `json:"loadavg"`
	Machine      Machine   `json:"machine"`
}

// OpStats summarizes one kind of operation or request. Latencies are
// milliseconds; PerSecond counts successes that ended in the measured
// window.
type OpStats struct {
	Count     int64   `json:"count"`
	Failed    int64   `json:"failed"`
	PerSecond float64 `json:"per_second"`
	P50       float64 `json:"p50_ms"`
	P95       float64 `json:"p95_ms"`
	P99       float64 `json:"p99_ms"`
	Max       float64 `json:"max_ms"`
}

// Machine describes where the load generator ran.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPU       string `json:"cpu"`
	GoVersion string `json:"go"`
	Time      string `json:"time"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Time: time.Now().UTC().Format(time.RFC3339)}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func (b *bench) report(window time.Duration) *Report {
	c := b.cfg
	r := b.rec
	r.mu.Lock()
	defer r.mu.Unlock()
	rep := &Report{
		Label: c.Label, Target: c.Target, Scenario: c.Scenario, Mode: "closed", Clients: c.Clients, RunID: c.RunID,
		Warmup: c.Warmup.Seconds(), Measured: window.Seconds(),
		Ops: map[string]OpStats{}, Requests: map[string]OpStats{}, Errors: map[string]int64{}, Statuses: map[string]int64{},
		Counts: map[string]int64{}, Dropped: r.dropped, Machine: machine(),
	}
	if c.Rate > 0 {
		rep.Mode, rep.Rate, rep.Clients = "open", c.Rate, 0
	}
	for k, s := range r.ops {
		rep.Ops[k] = s.stats(window)
	}
	for k, s := range r.reqs {
		rep.Requests[k] = s.stats(window)
	}
	for k, v := range r.errors {
		rep.Errors[k] = v
	}
	for k, v := range r.statuses {
		rep.Statuses[k] = v
	}
	for k, v := range r.counts {
		rep.Counts[k] = v
	}
	switch c.Scenario {
	case scenarioLifecycle:
		rep.Headline = "lifecycle"
	case scenarioClaims:
		rep.Headline = "claim"
	case scenarioNotifyStorm:
		rep.Headline = "notify"
	case scenarioMixed:
		rep.Headline = "all"
	}
	var ok, failed int64
	for _, s := range rep.Ops {
		ok, failed = ok+s.Count, failed+s.Failed
	}
	if ok+failed > 0 {
		rep.ErrorRate = float64(failed) / float64(ok+failed)
	}
	switch {
	case ok == 0:
		rep.Failures = append(rep.Failures, fmt.Sprintf("no operation succeeded (%d failed)", failed))
	case rep.ErrorRate > c.MaxErrorRate:
		rep.Failures = append(rep.Failures, fmt.Sprintf("%.2f%% of operations failed (%d of %d), above --max-error-rate %.2f%%",
			100*rep.ErrorRate, failed, ok+failed, 100*c.MaxErrorRate))
	}
	if rep.Headline == "all" {
		for _, s := range rep.Ops {
			rep.PerSecond += s.PerSecond
		}
	} else {
		rep.PerSecond = rep.Ops[rep.Headline].PerSecond
	}
	return rep
}

func (rep *Report) writeJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func (rep *Report) writeTable(w io.Writer) error {
	mode := fmt.Sprintf("closed loop, %d clients", rep.Clients)
	if rep.Mode == "open" {
		mode = fmt.Sprintf("open loop, %.0f/s", rep.Rate)
	}
	fmt.Fprintf(w, "refundbench %s against %s (%s), %.1fs measured after %.1fs warm-up, run %s\n",
		rep.Scenario, rep.Label, mode, rep.Measured, rep.Warmup, rep.RunID)
	fmt.Fprintf(w, "machine: %d CPUs, %s, %s\n\n", rep.Machine.CPUs, rep.Machine.CPU, rep.Machine.GoVersion)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tkind\tok\tfailed\tper s\tp50 ms\tp95 ms\tp99 ms\tmax ms\t")
	row := func(group, k string, s OpStats) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.0f\t%s\t%s\t%s\t%s\t\n", group, k, s.Count, s.Failed, s.PerSecond,
			fmtMS(s.P50), fmtMS(s.P95), fmtMS(s.P99), fmtMS(s.Max))
	}
	for _, k := range sortedKeys(rep.Ops) {
		row("op", k, rep.Ops[k])
	}
	for _, k := range sortedKeys(rep.Requests) {
		row("request", k, rep.Requests[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nthroughput: %.0f %s/s\n", rep.PerSecond, rep.Headline)
	if rep.ServiceCPU > 0 {
		fmt.Fprintf(w, "service CPU: %.1f s in the window, %.2f ms per %s; load generator %.1f s\n",
			rep.ServiceCPU, rep.CPUPerOp, rep.Headline, rep.LoadGenCPU)
	}
	if rep.ServiceAlloc > 0 {
		fmt.Fprintf(w, "service allocated: %.0f MiB in the window, %.1f KiB per %s\n", rep.ServiceAlloc, rep.AllocPerOp, rep.Headline)
	}
	fmt.Fprintf(w, "load average: %s at the start of the window, %s at its end\n", rep.LoadAvg[0], rep.LoadAvg[1])
	for _, k := range sortedKeys(rep.Counts) {
		fmt.Fprintf(w, "%s: %d\n", k, rep.Counts[k])
	}
	if rep.Dropped > 0 {
		fmt.Fprintf(w, "dropped (over --max-inflight): %d\n", rep.Dropped)
	}
	if len(rep.Errors) > 0 {
		fmt.Fprintln(w, "errors by code:")
		for _, k := range sortedKeys(rep.Errors) {
			fmt.Fprintf(w, "  %-50s %d\n", k, rep.Errors[k])
		}
	}
	if len(rep.Notify) > 0 {
		fmt.Fprintln(w, "target's notification outcomes during the run:")
		for _, k := range sortedKeys(rep.Notify) {
			fmt.Fprintf(w, "  %-20s %d\n", k, rep.Notify[k])
		}
	}
	ck := rep.Check
	switch {
	case ck.Skipped:
		fmt.Fprintln(w, "check: skipped (--check=false)")
	case ck.OK:
		fmt.Fprintf(w, "check: OK (%d of %d reservations, %d accepted refunds, %d not final)\n",
			ck.Reservations, ck.Total, ck.Refunds, ck.Unsettled)
	default:
		fmt.Fprintf(w, "check: FAILED, %d violations (%d of %d reservations, %d accepted refunds)\n",
			ck.Violations, ck.Reservations, ck.Total, ck.Refunds)
		for _, e := range ck.Examples {
			fmt.Fprintln(w, "  ", e)
		}
	}
	for _, f := range rep.Failures {
		fmt.Fprintln(w, "FAILED:", f)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
