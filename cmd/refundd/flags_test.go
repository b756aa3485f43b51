package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/config"
	"github.com/refundd/refundd/internal/merchant"
)

func TestParseFlags_Runtime(t *testing.T) {
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Runtime != (RuntimeConfig{Percent: 1600, MemoryLimit: "auto", MinProcs: 2}) {
		t.Fatalf("runtime defaults: %+v", m.Config.Runtime)
	}
	m = NewMain()
	m.Stderr = io.Discard
	env := map[string]string{"REFUNDD_GC_PERCENT": "200", "REFUNDD_MEMORY_LIMIT": "2GiB", "REFUNDD_MIN_PROCS": "0"}
	if err := m.ParseFlags(nil, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Runtime != (RuntimeConfig{Percent: 200, MemoryLimit: "2GiB"}) {
		t.Fatalf("runtime from env: %+v", m.Config.Runtime)
	}
	for _, args := range [][]string{{"--gc-percent", "10"}, {"--memory-limit", "12"}, {"--memory-limit", "much"},
		{"--min-procs", "-1"}, {"--min-procs", "65"}} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(args, func(string) string { return "" }); err == nil {
			t.Errorf("ParseFlags(%v) = nil, want an error", args)
		}
	}
}

// --max-active-actors: 20,000 by default, 0 for no bound (the engine's
// -1), never negative.
func TestParseFlags_MaxActiveActors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int // actors.Config.MaxActive
	}{
		{nil, 20000},
		{[]string{"--max-active-actors", "500"}, 500},
		{[]string{"--max-active-actors", "0"}, -1},
	} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(tc.args, func(string) string { return "" }); err != nil {
			t.Fatalf("ParseFlags(%v): %v", tc.args, err)
		}
		if got := m.Config.maxActive(); got != tc.want {
			t.Errorf("ParseFlags(%v): MaxActive %d, want %d", tc.args, got, tc.want)
		}
	}
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--max-active-actors", "-1"}, func(string) string { return "" }); err == nil ||
		!strings.Contains(err.Error(), "--max-active-actors") {
		t.Fatalf("--max-active-actors -1: %v, want an error naming the flag", err)
	}
}

// --help lists every flag once, under the sections in order, each with
// its REFUNDD_* variable named by the rule.
func TestHelp_SectionsAndVariables(t *testing.T) {
	var out bytes.Buffer
	m := NewMain()
	m.Stderr = &out
	if err := m.ParseFlags([]string{"--help"}, func(string) string { return "" }); !errors.Is(err, errHelp) {
		t.Fatalf("--help: %v, want errHelp", err)
	}
	help := out.String()
	// --version is answered before the flags are parsed (main.go), so it
	// is not in the flag set; the help must still name it.
	if !strings.Contains(help, "--version") {
		t.Errorf("--help does not mention --version:\n%s", help)
	}
	at := -1
	for _, s := range sections {
		i := strings.Index(help, "\n"+s+":\n")
		if i <= at {
			t.Fatalf("section %q at %d, after %d: want every section, in order:\n%s", s, i, at, help)
		}
		at = i
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	tbl := &flagTable{config.NewTable(fs, envOptions)}
	var certs stringList
	NewMain().defineFlags(tbl, &certs)
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if c := strings.Count(help, "\n  -"+f.Name+" "); c+strings.Count(help, "\n  -"+f.Name+"\n") != 1 {
			t.Errorf("--%s listed %d times", f.Name, c)
		}
		if !slices.Contains(sections, tbl.Section(f.Name)) {
			t.Errorf("--%s is in no section", f.Name)
		}
		want := "REFUNDD_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if !strings.Contains(f.Usage, "(env "+want) {
			t.Errorf("--%s usage %q does not name %s", f.Name, f.Usage, want)
		}
	})
	if n < 50 {
		t.Errorf("only %d flags defined", n)
	}
}

// Every kind of flag is read from its variable; a bad value names the
// variable.
func TestParseFlags_FromVariables(t *testing.T) {
	env := map[string]string{"REFUNDD_DATA": "/srv/refundd", "REFUNDD_IDLE_TIMEOUT": "7m", "REFUNDD_CHECKPOINT_EVERY": "77",
		"REFUNDD_SANDBOX_TIME_FACTOR": "0.5", "REFUNDD_METRICS_PUBLIC": "true", "REFUNDD_NODE_ID": "n1",
		"REFUNDD_WECHATPAY_PLATFORM_CERT": "a.pem,b.pem"}
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags([]string{"--wechatpay-platform-cert", "c.pem"}, func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	c := m.Config
	if c.DataDir != "/srv/refundd" || c.IdleTimeout != 7*time.Minute || c.CheckpointEvery != 77 || c.SandboxTimeFactor != 0.5 ||
		!c.MetricsPublic || c.Cluster.NodeID != "n1" || !slices.Equal(c.Wechatpay.PlatformCerts, []string{"a.pem", "b.pem", "c.pem"}) {
		t.Fatalf("config from variables: %+v", c)
	}
	if len(m.notes) != 0 {
		t.Errorf("notes %v; want none", m.notes)
	}
	for _, k := range []string{"REFUNDD_IDLE_TIMEOUT", "REFUNDD_CHECKPOINT_EVERY", "REFUNDD_METRICS_PUBLIC", "REFUNDD_SANDBOX_TIME_FACTOR"} {
		m := NewMain()
		m.Stderr = io.Discard
		err := m.ParseFlags(nil, func(v string) string {
			if v == k {
				return "soon"
			}
			return ""
		})
		if err == nil || !strings.Contains(err.Error(), k+`="soon"`) {
			t.Errorf("%s=soon: %v; want an error naming the variable", k, err)
		}
	}
}

// REFUNDD_WECHATPAY_PLATFORM_CERTS, the name before the rule, still works,
// with a warning; the rule's name wins when both are set.
func TestParseFlags_DeprecatedPlatformCerts(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
		note bool
	}{
		{"old", map[string]string{"REFUNDD_WECHATPAY_PLATFORM_CERTS": "a.pem,b.pem"}, []string{"a.pem", "b.pem"}, true},
		{"new", map[string]string{"REFUNDD_WECHATPAY_PLATFORM_CERT": "c.pem"}, []string{"c.pem"}, false},
		{"both", map[string]string{"REFUNDD_WECHATPAY_PLATFORM_CERTS": "a.pem", "REFUNDD_WECHATPAY_PLATFORM_CERT": "c.pem"}, []string{"c.pem"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMain()
			m.Stderr = io.Discard
			if err := m.ParseFlags(nil, func(k string) string { return tc.env[k] }); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(m.Config.Wechatpay.PlatformCerts, tc.want) {
				t.Errorf("platform certs %v, want %v", m.Config.Wechatpay.PlatformCerts, tc.want)
			}
			noted := len(m.notes) == 1 && strings.Contains(m.notes[0], "REFUNDD_WECHATPAY_PLATFORM_CERTS is deprecated")
			if noted != tc.note || (!tc.note && len(m.notes) > 0) {
				t.Errorf("notes %q; want a deprecation note: %v", m.notes, tc.note)
			}
		})
	}
}

// The warning about a deprecated variable reaches the start-up log.
func TestRun_LogsDeprecatedVariables(t *testing.T) {
	var logs bytes.Buffer
	m := NewMain()
	m.Stdout, m.Stderr = io.Discard, &logs
	env := func(k string) string {
		if k == "REFUNDD_WECHATPAY_PLATFORM_CERTS" {
			return "unused.pem"
		}
		return testEnv(k)
	}
	if err := m.ParseFlags([]string{"--listen", "127.0.0.1:0", "--data", t.TempDir(), "--provider", "memory", "--log-format", "text"}, env); err != nil {
		t.Fatal(err)
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "level=WARN msg=\"REFUNDD_WECHATPAY_PLATFORM_CERTS is deprecated: set REFUNDD_WECHATPAY_PLATFORM_CERT instead\"") {
		t.Errorf("no deprecation warning in the log:\n%s", logs.String())
	}
}

// The approval flags reach the default merchant's policy; none set keeps
// every refund going out at once.
func TestParseFlags_Approval(t *testing.T) {
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if p, err := m.Config.policy(); err != nil || p.RequiresApproval() {
		t.Fatalf("default policy %+v %v asks for approval", p, err)
	}
	m = NewMain()
	m.Stderr = io.Discard
	args := []string{"--approve-above", "50000", "--approve-above-percent", "30", "--approve-non-service", "--approval-timeout", "2h"}
	if err := m.ParseFlags(args, func(k string) string { return map[string]string{"REFUNDD_APPROVE_ALL": "true"}[k] }); err != nil {
		t.Fatal(err)
	}
	p, err := m.Config.policy()
	if err != nil || !p.ApproveAll || p.ApproveAbove != 50000 || p.ApproveAbovePercent != 30 || !p.ApproveNonService || p.ApprovalTimeout != 2*time.Hour {
		t.Fatalf("policy %+v %v", p, err)
	}
	for _, args := range [][]string{{"--approve-above", "-1"}, {"--approve-above-percent", "101"}, {"--approval-timeout", "0s"}} {
		m := NewMain()
		m.Stderr = io.Discard
		err := m.ParseFlags(args, func(string) string { return "" })
		if err == nil || !strings.Contains(err.Error(), args[0]) {
			t.Errorf("ParseFlags(%v) = %v, want an error naming the flag", args, err)
		}
	}
}

func TestParseFlags_RateLimits(t *testing.T) {
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if m.Config.RateLimit != (RateLimitConfig{Notify: 2400}) {
		t.Fatalf("defaults: %+v, want only the notification bound, at one account's worst storm", m.Config.RateLimit)
	}
	m = NewMain()
	m.Stderr = io.Discard
	env := map[string]string{"REFUNDD_RATE_LIMIT_READER": "5", "REFUNDD_NOTIFY_RATE_LIMIT": "0"}
	if err := m.ParseFlags([]string{"--rate-limit-service", "50", "--rate-limit-operator=2.5", "--rate-limit-auditor", "1", "--rate-limit-approver", "3"},
		func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	want := RateLimitConfig{Service: 50, Reader: 5, Auditor: 1, Operator: 2.5, Approver: 3}
	if m.Config.RateLimit != want {
		t.Fatalf("parsed %+v, want %+v", m.Config.RateLimit, want)
	}
	lim := m.Config.RateLimit.api(nil)
	if lim.Notify != 0 || lim.PerRole["service"] != 50 || lim.PerRole["reader"] != 5 || lim.PerRole["auditor"] != 1 || lim.PerRole["operator"] != 2.5 || lim.PerRole["approver"] != 3 {
		t.Fatalf("api limits %+v", lim)
	}
	for _, args := range [][]string{{"--rate-limit-reader", "-1"}, {"--notify-rate-limit", "-5"}, {"--rate-limit-service", "x"}} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(args, func(string) string { return "" }); err == nil {
			t.Errorf("ParseFlags(%v) = nil, want an error", args)
		}
	}
}

func TestParseFlags_Pacing(t *testing.T) {
	m := NewMain()
	m.Stderr = io.Discard
	if err := m.ParseFlags(nil, func(string) string { return "" }); err != nil {
		t.Fatal(err)
	}
	if m.Config.Pacing != (merchant.Pacing{Creates: 150, FailedCreates: 6, Queries: 300}) || m.Config.SandboxMaxCreates != 0 {
		t.Fatalf("defaults: pacing %+v, sandbox limit %d; want WeChat Pay's documented limits and no sandbox limit",
			m.Config.Pacing, m.Config.SandboxMaxCreates)
	}
	m = NewMain()
	m.Stderr = io.Discard
	env := map[string]string{"REFUNDD_WECHATPAY_PACE_QUERIES": "0"}
	if err := m.ParseFlags([]string{"--wechatpay-pace-creates", "100", "--wechatpay-pace-failed-creates=0.5", "--sandbox-max-creates", "120"},
		func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if want := (merchant.Pacing{Creates: 100, FailedCreates: 0.5}); m.Config.Pacing != want || m.Config.SandboxMaxCreates != 120 {
		t.Fatalf("parsed %+v, %d; want %+v, 120", m.Config.Pacing, m.Config.SandboxMaxCreates, want)
	}
	for _, args := range [][]string{{"--wechatpay-pace-creates", "-1"}, {"--wechatpay-pace-queries", "1e7"},
		{"--wechatpay-pace-failed-creates", "NaN"}, {"--sandbox-max-creates", "-1"}, {"--provider-timeout", "0s"}} {
		m := NewMain()
		m.Stderr = io.Discard
		if err := m.ParseFlags(args, func(string) string { return "" }); err == nil {
			t.Errorf("ParseFlags(%v) = nil, want an error", args)
		}
	}
}
