package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

func statsCommand() command {
	return command{
		name:    "journal stats",
		summary: "counts by event type and refund state, totals by merchant, size, oldest refund in flight",
		help: `The figures come from the counters the journal keeps with every append,
in one read, whatever its size. A journal written before refundd kept them
has none: stats then replays every reservation (slower; it says
"from a fold"), and --build-counters, with refundd stopped, stores them once
for good. --fold replays even when counters are kept, and also finds the
oldest refund in flight, which no counter keeps. "refundctl journal verify"
recomputes the counters from the events and reports a difference.
--merchant limits the counts and totals to one merchant's reservations
(size, epoch and checkpoints stay the journal's); it folds.`,
		options: func() options { return &statsOptions{} },
	}
}

// statsOptions are journal stats' flags.
type statsOptions struct {
	src    source
	asJSON bool
	merch  string
	fold   bool
	build  bool
}

func (o *statsOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the figures as JSON")
	fs.StringVar(&o.merch, "merchant", "", merchantUsage)
	fs.BoolVar(&o.fold, "fold", false, "replay every reservation instead of reading the counters (finds the oldest refund in flight)")
	fs.BoolVar(&o.build, "build-counters", false, "replay every reservation and store the counters, for a journal written before they were kept (writes: --file or --data of a stopped refundd)")
}

func (o *statsOptions) run(c *cli, args []string) int {
	name := "journal stats"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	var db *journal.DB
	if o.build {
		var err error
		db, err = o.buildCounters(c)
		var ue usageErr
		if errors.As(err, &ue) {
			return c.usageError(name, "%s", ue.msg)
		}
		if err != nil {
			return c.fail(name, err)
		}
		defer db.Close()
	} else {
		var done func()
		var code int
		if db, done, code = c.openOrExit(name, &o.src); db == nil {
			return code
		}
		defer done()
	}
	p := c.progress("records read")
	st, err := audit.ComputeStats(c.ctx, db, audit.StatsOptions{Merchant: o.merch, Fold: o.fold, Progress: p.report})
	p.done()
	if err != nil {
		return c.fail(name, err)
	}
	if o.asJSON {
		c.printJSON(st)
	} else {
		printStats(c, db.Path(), st)
	}
	if st.Undecoded > 0 {
		fmt.Fprintf(c.stderr, "refundctl %s: %d records could not be decoded; run \"refundctl journal verify\"\n", name, st.Undecoded)
		return exitProblems
	}
	return exitOK
}

// buildCounters opens the journal for writing (it must be a file nobody
// writes) and stores its counters; the DB stays open for the figures.
func (o *statsOptions) buildCounters(c *cli) (*journal.DB, error) {
	path := o.src.file
	switch {
	case o.src.server != "" || (o.src.file == "") == (o.src.data == ""):
		return nil, errUsage("--build-counters writes the journal: give exactly one of --file and --data")
	case o.src.data != "":
		path = filepath.Join(o.src.data, "refundd.db")
	}
	if _, err := os.Stat(path); err != nil {
		return nil, err
	}
	db, err := journal.Open(path, &journal.Options{Timeout: o.src.lockTimeout})
	if errors.Is(err, journal.ErrLocked) {
		return nil, fmt.Errorf("%s is held by a running refundd: stop it first: %w", path, err)
	}
	if err != nil {
		return nil, err
	}
	p := c.progress("records counted")
	_, at, err := audit.BuildCounters(c.ctx, db, p.report)
	p.done()
	if err != nil {
		db.Close()
		return nil, err
	}
	fmt.Fprintf(c.stderr, "refundctl journal stats: counters stored, counting records 1..%d\n", at)
	return db, nil
}

func printStats(c *cli, path string, st *audit.Stats) {
	w := c.stdout
	fmt.Fprintf(w, "journal %s: %d bytes, %d records, epoch %d, head %d:%s\n", path, st.FileSize, st.Records, st.Epoch, st.Head.Global, st.Head.Hash)
	if st.Source == "fold" {
		fmt.Fprintln(w, "figures       from a fold of every reservation (the journal keeps no counters, or --fold)")
	} else {
		fmt.Fprintln(w, "figures       from the journal's counters")
	}
	if !st.AsOf.IsZero() {
		fmt.Fprintf(w, "latest event  %s\n", st.AsOf.UTC().Format(time.RFC3339))
	}
	if st.Merchant != "" {
		fmt.Fprintf(w, "merchant      %s (the figures below are its reservations' only)\n", st.Merchant)
	}
	fmt.Fprintf(w, "reservations  %d (%d canceled)\n", st.Reservations, st.Canceled)
	fmt.Fprintf(w, "paid          %s\n", audit.Yuan(st.Paid))
	fmt.Fprintf(w, "refunded      %s\n", audit.Yuan(st.Refunded))
	fmt.Fprintf(w, "in flight     %s\n", audit.Yuan(st.InFlight))
	fmt.Fprintf(w, "released      %s (failed refunds)\n", audit.Yuan(st.Released))
	fmt.Fprintf(w, "refunds       %d\n", st.Refunds)
	for _, k := range sortedKeys(st.RefundStates) {
		fmt.Fprintf(w, "  %-12s %d\n", k, st.RefundStates[k])
	}
	fmt.Fprintln(w, "by merchant")
	for _, k := range sortedKeys(st.Merchants) {
		m := st.Merchants[k]
		fmt.Fprintf(w, "  %-20s %d reservations (%d canceled), %d refunds, paid %s, refunded %s, in flight %s, released %s\n",
			k, m.Reservations, m.Canceled, m.Refunds, audit.Yuan(m.Paid), audit.Yuan(m.Refunded), audit.Yuan(m.InFlight), audit.Yuan(m.Released))
	}
	fmt.Fprintln(w, "events")
	for _, k := range sortedKeys(st.EventTypes) {
		fmt.Fprintf(w, "  %-28s %d\n", k, st.EventTypes[k])
	}
	if o := st.OldestInFlight; o != nil {
		fmt.Fprintf(w, "oldest in flight  %s (reservation %s) %s %s, requested %s, %s before the latest event\n",
			o.RefundNo, o.ReservationID, o.State, audit.Yuan(o.Amount), o.CreatedAt.UTC().Format(time.RFC3339), o.Age.Round(time.Second))
	} else if st.Source == "fold" {
		fmt.Fprintln(w, "oldest in flight  none")
	} else {
		fmt.Fprintln(w, "oldest in flight  not counted (--fold finds it)")
	}
	if st.LastCheckpoint != nil {
		fmt.Fprintf(w, "last checkpoint   global %d at %s (signed: %v)\n", st.LastCheckpoint.Global, st.LastCheckpoint.Time.UTC().Format(time.RFC3339), st.LastCheckpoint.Signed())
	}
}
