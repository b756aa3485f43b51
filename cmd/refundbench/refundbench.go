package main

import (
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"os"
	"strconv"
	"strings"
	"time"
)

var errHelp = errors.New("help requested")

// Scenario names.
const (
	scenarioLifecycle   = "lifecycle"
	scenarioClaims      = "claims"
	scenarioNotifyStorm = "notify-storm"
	scenarioMixed       = "mixed"
)

// Config is one run's settings.
type Config struct {
	Target   string        // base URL of the service under test
	Label    string        // name of the target in the report; empty means Target
	Scenario string        // lifecycle, claims, notify-storm or mixed
	Clients  int           // closed loop: concurrent workers
	Rate     float64       // open loop: operations per second; 0 means closed loop
	MaxOpen  int           // open loop: most operations in flight; more are counted as dropped
	Duration time.Duration // measured phase
	Warmup   time.Duration // unmeasured load before it
	Timeout  time.Duration // one HTTP request
	Wait     time.Duration // ?wait= on refund requests and reads
	Token    string        // bearer token; empty sends none
	Output   string        // table or json
	RunID    string        // prefix of every id this run creates; empty picks a random one

	Amount       int64  // paid amount of each reservation, fen
	RefundAmount int64  // amount of each refund, fen
	Shared       int    // claims: reservations raced on at once
	Duplicates   int    // notify-storm: copies of each notification
	Refunds      int    // notify-storm: refunds prepared; 0 means 20 per client
	SandboxKeys  string // notify-storm: directory of the sandbox keys (data/sandbox)
	Mix          string // mixed: weights "lifecycle=6,claims=2,read=2"
	// Merchants registers reservations round-robin for this many merchants
	// (benchMerchant's names; refundbench merchants-file writes them for
	// the target); 0 names none.
	Merchants int
	Check     bool    // read back and check every reservation at the end
	CheckMax  int     // check at most this many reservations (0 = all), chosen at random
	Settle    float64 // seconds to wait for accepted refunds to become final before the check
	CPUPids   string  // processes of the service whose CPU time is measured, comma-separated
	CPUUser   string  // every process of this user counts too (postgres)
	// MaxErrorRate is the share of failed operations (0.01 = 1%) above
	// which the run fails, as a load tool's threshold would: a benchmark
	// of a service that refused everything measured nothing.
	MaxErrorRate float64
}

// Main is the program, split so tests can run it in-process.
type Main struct {
	Config Config
	Stdout io.Writer
	Stderr io.Writer
	log    *slog.Logger
}

// NewMain returns a Main with the defaults.
func NewMain() *Main {
	return &Main{
		Config: Config{
			Target: "http://127.0.0.1:8080", Scenario: scenarioLifecycle, Clients: 16, MaxOpen: 4096,
			Duration: 10 * time.Second, Warmup: 2 * time.Second, Timeout: 10 * time.Second, Wait: 5 * time.Second,
			Output: "table", Amount: 10000, RefundAmount: 700, Shared: 8, Duplicates: 5,
			Mix: "lifecycle=6,claims=2,read=2", Check: true, Settle: 10, MaxErrorRate: 0.01,
		},
		Stdout: os.Stdout, Stderr: os.Stderr,
	}
}

// ParseFlags reads flags, falling back to REFUNDBENCH_* variables (and
// REFUNDD_TOKEN for the token).
func (m *Main) ParseFlags(args []string, getenv func(string) string) error {
	fs := flag.NewFlagSet("refundbench", flag.ContinueOnError)
	fs.SetOutput(m.Stderr)
	c := &m.Config
	var envErrs []error
	env := func(name, envName string) {
		if v := getenv(envName); v != "" {
			if err := fs.Set(name, v); err != nil {
				envErrs = append(envErrs, fmt.Errorf("%s=%q: %w", envName, v, err))
			}
		}
	}
	type def struct{ name, env string }
	var defs []def
	str := func(p *string, name, usage string) {
		e := "REFUNDBENCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fs.StringVar(p, name, *p, usage+" (env "+e+")")
		defs = append(defs, def{name, e})
	}
	dur := func(p *time.Duration, name, usage string) {
		e := "REFUNDBENCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fs.DurationVar(p, name, *p, usage+" (env "+e+")")
		defs = append(defs, def{name, e})
	}
	num := func(p *int, name, usage string) {
		e := "REFUNDBENCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fs.IntVar(p, name, *p, usage+" (env "+e+")")
		defs = append(defs, def{name, e})
	}
	fen := func(p *int64, name, usage string) {
		e := "REFUNDBENCH_" + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
		fs.Int64Var(p, name, *p, usage+" (env "+e+")")
		defs = append(defs, def{name, e})
	}
	str(&c.Target, "target", "base URL of the service under test")
	str(&c.Label, "label", "name of the target in the report (default: the URL)")
	str(&c.Scenario, "scenario", "lifecycle, claims, notify-storm or mixed")
	num(&c.Clients, "clients", "closed loop: concurrent clients")
	fs.Float64Var(&c.Rate, "rate", 0, "open loop: operations per second (0: closed loop with --clients) (env REFUNDBENCH_RATE)")
	defs = append(defs, def{"rate", "REFUNDBENCH_RATE"})
	num(&c.MaxOpen, "max-inflight", "open loop: most operations in flight; the rest are counted as dropped")
	dur(&c.Duration, "duration", "measured phase")
	dur(&c.Warmup, "warmup", "unmeasured load before the measured phase")
	dur(&c.Timeout, "timeout", "timeout of one HTTP request")
	dur(&c.Wait, "wait", "?wait= sent with refund requests and refund reads")
	str(&c.Token, "token", "bearer token sent as Authorization (env REFUNDD_TOKEN also works)")
	str(&c.Output, "output", "table or json")
	str(&c.RunID, "run-id", "prefix of every id this run creates (default: random)")
	fen(&c.Amount, "amount", "paid amount of each reservation, fen")
	fen(&c.RefundAmount, "refund-amount", "amount of each refund, fen")
	num(&c.Shared, "shared", "claims: reservations raced on at once")
	num(&c.Duplicates, "duplicates", "notify-storm: copies of each notification")
	num(&c.Refunds, "refunds", "notify-storm: refunds prepared (default 20 per client, or rate x duration)")
	str(&c.SandboxKeys, "sandbox-keys", "notify-storm: sandbox key directory (refundd's DATA/sandbox)")
	str(&c.Mix, "mix", "mixed: weights of lifecycle, claims and read operations")
	num(&c.Merchants, "merchants", "register reservations round-robin for this many merchants, as \"refundbench merchants-file\" names them (0: name none)")
	fs.BoolVar(&c.Check, "check", c.Check, "read back every reservation used and check the invariants (env REFUNDBENCH_CHECK)")
	defs = append(defs, def{"check", "REFUNDBENCH_CHECK"})
	num(&c.CheckMax, "check-max", "check at most this many reservations, chosen at random (0: all)")
	fs.Float64Var(&c.Settle, "settle", c.Settle, "seconds to wait for accepted refunds to become final before checking (env REFUNDBENCH_SETTLE)")
	defs = append(defs, def{"settle", "REFUNDBENCH_SETTLE"})
	fs.Float64Var(&c.MaxErrorRate, "max-error-rate", c.MaxErrorRate,
		"fail the run (exit 1) when more than this share of operations failed, 0.01 = 1% (env REFUNDBENCH_MAX_ERROR_RATE)")
	defs = append(defs, def{"max-error-rate", "REFUNDBENCH_MAX_ERROR_RATE"})
	str(&c.CPUPids, "cpu-pids", "process ids of the service; their CPU time over the window is reported per operation")
	str(&c.CPUUser, "cpu-user", "count the CPU time of every process of this user too (e.g. postgres)")
	if v := getenv("REFUNDD_TOKEN"); v != "" {
		c.Token = v
	}
	for _, d := range defs {
		env(d.name, d.env)
	}
	fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return errHelp
		}
		return err
	}
	if err := errors.Join(envErrs...); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	return c.validate()
}

func (c *Config) validate() error {
	switch c.Scenario {
	case scenarioLifecycle, scenarioClaims, scenarioMixed:
	case scenarioNotifyStorm:
		if c.SandboxKeys == "" {
			return errors.New("--scenario notify-storm needs --sandbox-keys (refundd's DATA/sandbox directory)")
		}
		if c.Warmup+c.Duration > 4*time.Minute {
			// WeChat Pay signatures are accepted for 5 minutes; the
			// notifications are signed before the run starts.
			return errors.New("notify-storm: --warmup + --duration must stay under 4m (signed timestamps expire after 5m)")
		}
	default:
		return fmt.Errorf("--scenario must be lifecycle, claims, notify-storm or mixed, not %q", c.Scenario)
	}
	if c.Rate < 0 || (c.Rate == 0 && c.Clients < 1) {
		return errors.New("--clients must be at least 1 (or set --rate)")
	}
	if c.Rate > 0 && c.MaxOpen < 1 {
		return errors.New("--max-inflight must be at least 1")
	}
	if c.Duration <= 0 || c.Warmup < 0 || c.Timeout <= 0 || c.Wait < 0 {
		return errors.New("--duration and --timeout must be positive, --warmup and --wait not negative")
	}
	if c.Amount < 1 || c.RefundAmount < 1 || c.RefundAmount > c.Amount {
		return errors.New("--amount and --refund-amount must be positive, with --refund-amount <= --amount")
	}
	if c.Shared < 1 || c.Duplicates < 1 || c.Refunds < 0 || c.CheckMax < 0 || c.Settle < 0 {
		return errors.New("--shared and --duplicates must be at least 1; --refunds, --check-max and --settle not negative")
	}
	if c.Merchants < 0 || c.Merchants > maxBenchMerchants {
		return fmt.Errorf("--merchants must be 0..%d", maxBenchMerchants)
	}
	if c.MaxErrorRate < 0 || c.MaxErrorRate > 1 {
		return errors.New("--max-error-rate must be between 0 and 1 (0.01 = 1%)")
	}
	if c.Output != "table" && c.Output != "json" {
		return errors.New("--output must be table or json")
	}
	if _, err := parseMix(c.Mix); err != nil {
		return err
	}
	if c.RunID != "" && !validID(c.RunID, 12) {
		return errors.New("--run-id must be 1..12 characters of [0-9A-Za-z]")
	}
	return nil
}

func validID(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}

// mix is the weight of each operation kind in the mixed scenario.
type mix struct{ lifecycle, claims, read int }

func parseMix(s string) (mix, error) {
	var m mix
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil || n < 0 {
			return m, fmt.Errorf("--mix: %q is not name=weight", part)
		}
		switch k {
		case "lifecycle":
			m.lifecycle = n
		case "claims":
			m.claims = n
		case "read":
			m.read = n
		default:
			return m, fmt.Errorf("--mix: unknown operation %q (lifecycle, claims, read)", k)
		}
	}
	if m.lifecycle+m.claims+m.read == 0 {
		return m, errors.New("--mix: all weights are zero")
	}
	return m, nil
}

// randomRunID returns 6 random base-36 characters.
func randomRunID() string {
	n, err := rand.Int(rand.Reader, big.NewInt(36*36*36*36*36*36))
	if err != nil {
		return strconv.FormatInt(time.Now().UnixNano()%2176782336, 36)
	}
	s := strconv.FormatInt(n.Int64(), 36)
	return strings.Repeat("0", 6-len(s)) + s
}

// Run sets the scenario up, drives the load, checks the result and prints
// the report. An error means the run could not be made at all; a failed
// correctness check or threshold is in the report (Report.Failures).
func (m *Main) Run(ctx context.Context) (*Report, error) {
	c := m.Config
	m.log = slog.New(slog.NewTextHandler(m.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if c.RunID == "" {
		c.RunID = randomRunID()
	}
	if c.Label == "" {
		c.Label = c.Target
	}
	b := newBench(c, m.log)
	defer b.client.close()
	rep, err := b.run(ctx)
	if err != nil {
		return nil, err
	}
	if c.Output == "json" {
		err = rep.writeJSON(m.Stdout)
	} else {
		err = rep.writeTable(m.Stdout)
	}
	return rep, err
}
