// Command refundbench is an HTTP load generator for refundd and for any
// service with the same JSON API (bench/pgrefund, the PostgreSQL baseline).
//
//	go run ./cmd/refundbench --target http://127.0.0.1:8080 --scenario lifecycle --clients 64 --duration 20s
//
// Scenarios:
//
//   - lifecycle: register a reservation, request a refund with ?wait=, and
//     follow it until SUCCEEDED; one operation is the whole lifecycle.
//   - claims: many clients race partial refunds on a few shared
//     reservations; 409s are counted, and a reservation is replaced by a
//     fresh one when it has nothing left.
//   - notify-storm: signed, encrypted WeChat Pay v3 SUCCESS notifications,
//     each repeated --duplicates times in shuffled order, prepared (and
//     signed) before the timed phase from the sandbox keys in --sandbox-keys.
//     The target's refunds must stay PROCESSING until notified (refundd
//     --provider sandbox --sandbox-delay 1h).
//   - mixed: lifecycle, claims and reads interleaved by --mix weights.
//
// Closed loop (--clients N workers, each starting its next operation when
// the last one ends) or open loop (--rate R operations per second,
// latency measured from each operation's scheduled start). Statistics
// cover the --duration after --warmup. At the end every reservation used
// is read back and checked: refunded + in flight <= paid, every accepted
// refund present with its amount, accepted amounts never above paid. A
// failed check exits with status 1, and so does a run in which more than
// --max-error-rate of the operations failed (default 1%) or none
// succeeded: like a load tool's thresholds, so that a script cannot
// mistake a run against a service that refused everything for a result.
//
// Every flag has a REFUNDBENCH_* variable; --token falls back to
// REFUNDD_TOKEN and is sent as "Authorization: Bearer".
//
// Two helpers:
//
//	refundbench compare A1.json B1.json A2.json B2.json   # Markdown table of A/B ratios
//	refundbench protocol [--sandbox-keys DIR] [--duration 2s]  # RSA and AES-GCM cost per core
//	refundbench merchants-file --merchants 100 --out m.toml  # a merchants file for refundd --provider memory
//
// --merchants N registers reservations round-robin for N merchants named
// as merchants-file names them (bench-001 .. with prefixes B001 ..), and
// the check verifies each reservation's merchant and its refund numbers'
// prefix.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/refundd/refundd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.Get().String("refundbench"))
		return
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "compare":
			if err := compare(os.Stdout, os.Args[2:]); err != nil {
				fmt.Fprintln(os.Stderr, "refundbench:", err)
				os.Exit(1)
			}
			return
		case "merchants-file":
			if err := merchantsFileCommand(os.Args[2:], os.Stdout, os.Stderr); err != nil {
				fmt.Fprintln(os.Stderr, "refundbench:", err)
				os.Exit(2)
			}
			return
		case "protocol":
			fs := flag.NewFlagSet("refundbench protocol", flag.ExitOnError)
			keys := fs.String("sandbox-keys", "", "sandbox key directory (default: fresh keys)")
			d := fs.Duration("duration", 2*time.Second, "time spent on each measurement")
			_ = fs.Parse(os.Args[2:])
			if err := protocolCost(os.Stdout, *keys, *d); err != nil {
				fmt.Fprintln(os.Stderr, "refundbench:", err)
				os.Exit(1)
			}
			return
		}
	}
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, errHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "refundbench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := m.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refundbench:", err)
		os.Exit(1)
	}
	if len(rep.Failures) > 0 {
		fmt.Fprintln(os.Stderr, "refundbench: FAILED:", strings.Join(rep.Failures, "; "))
		os.Exit(1)
	}
}
