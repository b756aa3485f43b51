package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

const testToken = "bench-test-token-0123456789abcdef0123"

// server is an in-process refundd: journal (fsync on), actors, the
// in-memory provider and the HTTP API with bearer tokens.
type server struct {
	url     string
	keysDir string // notification keys, when enabled
}

func startServer(t *testing.T, sim simprovider.Options, notify bool) server {
	return startServerTB(t, sim, notify, nil)
}

func startServerTB(t testing.TB, sim simprovider.Options, notify bool, jopts *journal.Options) server {
	t.Helper()
	discard := slog.New(slog.DiscardHandler)
	db := journaltest.OpenWith(t, jopts)
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: simprovider.New(sim), Encode: simprovider.Encode, Logger: discard,
		Policy: reservation.Policy{RefundNoPrefix: "T"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	tokens := &auth.Tokens{}
	if err := tokens.Add(auth.RoleService, "bench", testToken); err != nil {
		t.Fatal(err)
	}
	opts := api.Options{Logger: discard, Auth: tokens}
	var s server
	if notify {
		keys, err := sandbox.GenerateKeys("1900000001")
		if err != nil {
			t.Fatal(err)
		}
		s.keysDir = t.TempDir()
		if _, err := keys.WriteDir(s.keysDir, ""); err != nil {
			t.Fatal(err)
		}
		verifier, err := keys.Verifier()
		if err != nil {
			t.Fatal(err)
		}
		opts.Notify = &api.NotifyConfig{Accounts: []api.NotifyAccount{{Name: "default", MchID: keys.MchID, Verifier: verifier, APIv3Key: keys.APIv3Key}}}
	}
	srv := httptest.NewServer(api.New(engine, opts))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// runBench runs refundbench in-process with a short load and returns its
// report and printed output.
func runBench(t *testing.T, args ...string) (*Report, string) {
	t.Helper()
	m := NewMain()
	var out bytes.Buffer
	m.Stdout, m.Stderr = &out, io.Discard
	env := map[string]string{"REFUNDD_TOKEN": testToken}
	if err := m.ParseFlags(args, func(k string) string { return env[k] }); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := m.Run(ctx)
	if err != nil {
		t.Fatalf("run %v: %v", args, err)
	}
	return rep, out.String()
}

func TestRun_LifecycleSmoke(t *testing.T) {
	s := startServer(t, simprovider.Options{}, false)
	rep, out := runBench(t, "--target", s.url, "--scenario", "lifecycle", "--clients", "8",
		"--duration", "1500ms", "--warmup", "300ms")
	if !rep.Check.OK || rep.Check.Reservations == 0 || rep.Check.Unsettled != 0 {
		t.Fatalf("check %+v\n%s", rep.Check, out)
	}
	lc := rep.Ops["lifecycle"]
	if lc.Count == 0 || lc.Failed != 0 || rep.PerSecond <= 0 || len(rep.Errors) != 0 {
		t.Fatalf("lifecycle %+v errors %v\n%s", lc, rep.Errors, out)
	}
	if lc.P50 <= 0 || lc.P50 > lc.P99 || lc.P99 > lc.Max {
		t.Fatalf("latencies out of order: %+v", lc)
	}
	for _, want := range []string{"lifecycle", "check: OK", "throughput:"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
	if rep.ServiceAlloc != 0 || rep.AllocPerOp != 0 || strings.Contains(out, "service allocated") {
		t.Fatalf("a target without /metrics reported allocations: %v MiB, %v KiB/op\n%s", rep.ServiceAlloc, rep.AllocPerOp, out)
	}
}

// TestRun_ReportsServiceAllocations: a target whose /metrics has the Go
// collector's allocation count gets its bytes allocated over the window
// reported, per operation.
func TestRun_ReportsServiceAllocations(t *testing.T) {
	s := startServer(t, simprovider.Options{}, false)
	target, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.Handle("/", httputil.NewSingleHostReverseProxy(target))
	front := httptest.NewServer(mux)
	defer front.Close()
	rep, out := runBench(t, "--target", front.URL, "--scenario", "lifecycle", "--clients", "4",
		"--duration", "1s", "--warmup", "200ms", "--check=false")
	if rep.ServiceAlloc <= 0 || rep.AllocPerOp <= 0 {
		t.Fatalf("allocations %v MiB, %v KiB/op; want both above 0\n%s", rep.ServiceAlloc, rep.AllocPerOp, out)
	}
	ops := rep.PerSecond * time.Second.Seconds()
	if got := rep.ServiceAlloc * 1024 / ops; got < rep.AllocPerOp*0.999 || got > rep.AllocPerOp*1.001 {
		t.Fatalf("%v MiB over %v operations is %v KiB each, report says %v", rep.ServiceAlloc, ops, got, rep.AllocPerOp)
	}
	if !strings.Contains(out, "service allocated:") {
		t.Fatalf("output lacks the allocations:\n%s", out)
	}
}

func TestAllocatedTotal(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		want float64
		ok   bool
	}{
		{"counter", "# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 1.5e+09\n", 1.5e9, true},
		{"untyped", "go_memstats_alloc_bytes_total 42\n", 42, true},
		{"among others", "# TYPE up gauge\nup 1\ngo_memstats_alloc_bytes_total 7\n", 7, true},
		{"absent", "# TYPE up gauge\nup 1\n", 0, false},
		{"not the text format", `{"error":"x"}`, 0, false},
		{"empty", "", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := allocatedTotal([]byte(tt.in))
			if got != tt.want || ok != tt.ok {
				t.Fatalf("allocatedTotal = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestRun_ClaimsSmoke(t *testing.T) {
	s := startServer(t, simprovider.Options{}, false)
	// 3 refunds of 3000 fit in 10000: racing clients must see 409s.
	rep, out := runBench(t, "--target", s.url, "--scenario", "claims", "--clients", "16", "--shared", "2",
		"--amount", "10000", "--refund-amount", "3000", "--duration", "1500ms", "--warmup", "200ms", "--output", "json")
	if !rep.Check.OK || rep.Check.Refunds == 0 {
		t.Fatalf("check %+v\n%s", rep.Check, out)
	}
	if rep.Counts["claims accepted"] == 0 || rep.Counts["claims refused (409)"] == 0 {
		t.Fatalf("counts %v, want both accepted claims and 409s", rep.Counts)
	}
	var decoded Report
	if err := json.Unmarshal([]byte(out), &decoded); err != nil || decoded.Scenario != "claims" {
		t.Fatalf("JSON output: %v\n%s", err, out)
	}
}

func TestRun_OpenLoopMixedSmoke(t *testing.T) {
	s := startServer(t, simprovider.Options{}, false)
	rep, out := runBench(t, "--target", s.url, "--scenario", "mixed", "--rate", "300",
		"--duration", "1500ms", "--warmup", "200ms", "--shared", "2")
	if !rep.Check.OK || rep.Mode != "open" {
		t.Fatalf("mode %s check %+v\n%s", rep.Mode, rep.Check, out)
	}
	var total int64
	for _, s := range rep.Ops {
		total += s.Count
	}
	// 300/s for 1.5 s, minus what is still in flight at the end.
	if total < 300 || total > 500 {
		t.Fatalf("open loop ran %d operations in 1.5 s at 300/s\n%s", total, out)
	}
}

func TestRun_NotifyStormSmoke(t *testing.T) {
	// Refunds stay PROCESSING until a notification says otherwise.
	s := startServer(t, simprovider.Options{Delay: time.Hour}, true)
	rep, out := runBench(t, "--target", s.url, "--scenario", "notify-storm", "--sandbox-keys", s.keysDir,
		"--clients", "8", "--refunds", "40", "--duplicates", "3", "--duration", "5s", "--warmup", "0s")
	if !rep.Check.OK || rep.Check.Refunds != 40 || rep.Check.Unsettled != 0 {
		t.Fatalf("check %+v\n%s", rep.Check, out)
	}
	if n := rep.Ops["notify"]; n.Count != 120 || n.Failed != 0 {
		t.Fatalf("notify %+v, want 120 acks\n%s", n, out)
	}
	if rep.Notify["applied"] != 40 || rep.Notify["duplicate"] != 80 {
		t.Fatalf("target counted %v, want 40 applied and 80 duplicates", rep.Notify)
	}
}

// lyingServer accepts refunds but forgets some of them, and reports more
// refunded than paid: the check must catch both.
func lyingServer(t *testing.T) string {
	var mu sync.Mutex
	paid := map[string]int64{}
	n := 0
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/reservations", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			ID     string `json:"id"`
			Amount int64  `json:"amount"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		paid[req.ID] = req.Amount
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("POST /v1/reservations/{id}/refunds", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Amount int64 `json:"amount"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		mu.Lock()
		n++
		no := "LIE-" + r.PathValue("id") + "-" + r.Header.Get("Idempotency-Key")
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(refundView{RefundNo: no, Amount: req.Amount, State: "SUCCEEDED"})
	})
	mux.HandleFunc("GET /v1/reservations/{id}", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		p := paid[r.PathValue("id")]
		mu.Unlock()
		_ = json.NewEncoder(w).Encode(reservationView{ID: r.PathValue("id"), Amount: p, Refunded: p + 1})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestRun_CheckCatchesALyingService(t *testing.T) {
	rep, out := runBench(t, "--target", lyingServer(t), "--scenario", "lifecycle", "--clients", "2",
		"--duration", "300ms", "--warmup", "0s")
	if rep.Check.OK || rep.Check.Violations == 0 {
		t.Fatalf("check passed against a service that loses refunds:\n%s", out)
	}
	for _, want := range []string{"is missing", "> paid"} {
		if !strings.Contains(out, want) {
			t.Fatalf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestVerify_Cases(t *testing.T) {
	ok := reservationView{ID: "r", Amount: 1000, Refunded: 300, InFlight: 200, Refunds: []refundView{
		{RefundNo: "a", Amount: 300, State: "SUCCEEDED"}, {RefundNo: "b", Amount: 200, State: "PROCESSING"},
		{RefundNo: "c", Amount: 900, State: "FAILED"},
	}}
	tests := []struct {
		name     string
		accepted map[string]int64
		view     func(v reservationView) reservationView
		problems int
		open     int
	}{
		{"consistent", map[string]int64{"a": 300, "b": 200, "c": 900}, nil, 0, 1},
		{"missing refund", map[string]int64{"a": 300, "z": 10}, nil, 1, 0},
		{"amount changed", map[string]int64{"a": 301}, nil, 1, 0},
		{"over refunded", map[string]int64{"a": 300}, func(v reservationView) reservationView { v.Refunded = 900; return v }, 2, 0},
		{"totals disagree with refunds", nil, func(v reservationView) reservationView { v.InFlight = 100; return v }, 1, 0},
		{"paid changed", nil, func(v reservationView) reservationView { v.Amount = 999; return v }, 1, 0},
		{"accepted beyond paid", map[string]int64{"a": 300, "b": 200, "x": 600}, func(v reservationView) reservationView {
			v.Refunds = append(v.Refunds, refundView{RefundNo: "x", Amount: 600, State: "SUCCEEDED"})
			v.Refunded = 900
			return v
		}, 2, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := ok
			v.Refunds = append([]refundView(nil), ok.Refunds...)
			if tc.view != nil {
				v = tc.view(v)
			}
			problems, open := verify("r", 1000, tc.accepted, v, false)
			if len(problems) != tc.problems || open != tc.open {
				t.Fatalf("problems %q open %d, want %d problems and %d open", problems, open, tc.problems, tc.open)
			}
		})
	}
}

func TestParseFlags_Errors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"unknown scenario", []string{"--scenario", "nope"}, nil, "--scenario"},
		{"notify without keys", []string{"--scenario", "notify-storm"}, nil, "--sandbox-keys"},
		{"refund above paid", []string{"--amount", "10", "--refund-amount", "11"}, nil, "--refund-amount"},
		{"bad mix", []string{"--mix", "lifecycle=x"}, nil, "--mix"},
		{"bad env duration", nil, map[string]string{"REFUNDBENCH_DURATION": "soon"}, "REFUNDBENCH_DURATION"},
		{"no clients", []string{"--clients", "0"}, nil, "--clients"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = io.Discard
			err := m.ParseFlags(tc.args, func(k string) string { return tc.env[k] })
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestParseFlags_TokenAndEnv(t *testing.T) {
	m := NewMain()
	env := map[string]string{"REFUNDD_TOKEN": "from-refundd", "REFUNDBENCH_CLIENTS": "7", "REFUNDBENCH_SCENARIO": "claims"}
	if err := m.ParseFlags([]string{"--clients", "9"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Token != "from-refundd" || m.Config.Clients != 9 || m.Config.Scenario != "claims" {
		t.Fatalf("config %+v: want token from REFUNDD_TOKEN, --clients over the env, scenario from the env", m.Config)
	}
	env["REFUNDBENCH_TOKEN"] = "from-bench"
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Token != "from-bench" {
		t.Fatalf("token %q, want REFUNDBENCH_TOKEN to win over REFUNDD_TOKEN", m.Config.Token)
	}
}

// BenchmarkLifecycleInProcess runs the lifecycle scenario against an
// in-process refundd (journal fsync on, in-memory provider), so that one
// -cpuprofile covers the API, the actors, the journal and the client:
//
//	go test -run='^$' -bench=LifecycleInProcess -benchtime=1x -cpuprofile cpu.out ./cmd/refundbench/
//
// The fsync=off case is not a configuration refundd offers: it shows how
// much of the time is the journal's commits.
func BenchmarkLifecycleInProcess(b *testing.B) {
	for _, noSync := range []bool{false, true} {
		name := "fsync=on"
		if noSync {
			name = "fsync=off"
		}
		b.Run(name, func(b *testing.B) { benchLifecycleInProcess(b, &journal.Options{NoSync: noSync}) })
	}
}

func benchLifecycleInProcess(b *testing.B, jopts *journal.Options) {
	for b.Loop() {
		s := startServerTB(b, simprovider.Options{}, false, jopts)
		m := NewMain()
		m.Stdout, m.Stderr = io.Discard, io.Discard
		env := map[string]string{"REFUNDD_TOKEN": testToken}
		if err := m.ParseFlags([]string{"--target", s.url, "--clients", "64", "--duration", "5s", "--warmup", "1s", "--check=false"},
			func(k string) string { return env[k] }); err != nil {
			b.Fatal(err)
		}
		rep, err := m.Run(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(rep.PerSecond, "lifecycles/s")
		b.ReportMetric(rep.Ops["lifecycle"].P99, "p99-ms")
	}
}

func TestCompare_Ratios(t *testing.T) {
	dir := t.TempDir()
	write := func(name, label string, perSecond, p99 float64) string {
		rep := Report{Label: label, Headline: "lifecycle", PerSecond: perSecond,
			Ops: map[string]OpStats{"lifecycle": {P50: 1, P99: p99}}, Check: CheckResult{OK: true}, AllocPerOp: 10000 / perSecond}
		raw, _ := json.Marshal(rep)
		path := dir + "/" + name
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	files := []string{write("1a", "refundd", 3000, 10), write("1b", "pg", 1000, 20),
		write("2a", "refundd", 4000, 10), write("2b", "pg", 1000, 10)}
	var out bytes.Buffer
	if err := compare(&out, files); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| 1 | 3000 |", "3.00x", "4.00x", "median throughput ratio refundd/pg: 3.50x", "median p99 ratio: 0.75",
		"KiB allocated per lifecycle by round: refundd 3.3 2.5; pg 10.0 10.0; median pg/refundd: 3.43x"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("output lacks %q:\n%s", want, out.String())
		}
	}
	if err := compare(&out, files[:1]); err == nil {
		t.Fatal("compare of one report succeeded")
	}
}

func TestCPUWatch_CountsBusyProcess(t *testing.T) {
	w, err := newCPUWatch(strconv.Itoa(os.Getpid()), "")
	if err != nil {
		t.Fatal(err)
	}
	before, _ := w.sample()
	deadline := time.Now().Add(5 * time.Second)
	x := 0
	for {
		for i := range 1_000_000 {
			x += i
		}
		if after, _ := w.sample(); after > before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no CPU time counted for a busy process (x=%d)", x)
		}
	}
	if _, err := newCPUWatch("12,abc", ""); err == nil {
		t.Fatal("a bad pid list was accepted")
	}
}

// TestExit_Thresholds runs the built command: a run in which operations
// fail beyond --max-error-rate exits 1 even when the correctness check has
// nothing to object to, like a load tool's thresholds; a healthy run
// exits 0.
func TestExit_Thresholds(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "refundbench")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"error":{"code":"internal","message":"down"}}`, http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	healthy := startServer(t, simprovider.Options{}, false)
	tests := []struct {
		name   string
		target string
		extra  []string
		code   int
		text   string
	}{
		{"every request fails", broken.URL, nil, 1, "FAILED"},
		{"every request fails, threshold 100%", broken.URL, []string{"--max-error-rate", "1"}, 1, "no operation succeeded"},
		{"healthy", healthy.url, nil, 0, "check: OK"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"--target", tt.target, "--scenario", "lifecycle", "--clients", "2",
				"--duration", "300ms", "--warmup", "0s", "--settle", "2"}, tt.extra...)
			cmd := exec.Command(bin, args...)
			cmd.Env = append(os.Environ(), "REFUNDD_TOKEN="+testToken)
			out, err := cmd.CombinedOutput()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || !strings.Contains(string(out), tt.text) {
				t.Errorf("refundbench %v: exit %d, want %d and %q in:\n%s", args, code, tt.code, tt.text, out)
			}
		})
	}
}

// FuzzAllocatedTotal: whatever a target answers on /metrics, reading it
// neither panics nor reports a count that is not in the answer.
func FuzzAllocatedTotal(f *testing.F) {
	f.Add("# TYPE go_memstats_alloc_bytes_total counter\ngo_memstats_alloc_bytes_total 1.5e+09\n")
	f.Add("go_memstats_alloc_bytes_total{a=\"b\"} 3\ngo_memstats_alloc_bytes_total{a=\"c\"} 4\n")
	f.Add("# HELP x\n# TYPE x histogram\nx_bucket{le=\"+Inf\"} 1\nx_sum 1\nx_count 1\n")
	f.Fuzz(func(t *testing.T, in string) {
		if v, ok := allocatedTotal([]byte(in)); ok && !strings.Contains(in, allocatedMetric) {
			t.Fatalf("read %v from an answer without %s", v, allocatedMetric)
		}
	})
}
