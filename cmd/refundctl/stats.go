package main

import (
	"flag"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/audit"
)

func statsCommand() command {
	return command{
		name:    "journal stats",
		summary: "counts by event type and refund state, totals by merchant, size, oldest refund in flight",
		help: `--merchant limits the counts and totals to one merchant's reservations
(size, epoch and checkpoints stay the journal's).`,
		options: func() options { return &statsOptions{} },
	}
}

// statsOptions are journal stats' flags.
type statsOptions struct {
	src    source
	asJSON bool
	merch  string
}

func (o *statsOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the figures as JSON")
	fs.StringVar(&o.merch, "merchant", "", merchantUsage)
}

func (o *statsOptions) run(c *cli, args []string) int {
	name := "journal stats"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	p := c.progress("records read")
	st, err := audit.ComputeStats(c.ctx, db, audit.StatsOptions{Merchant: o.merch, Progress: p.report})
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

func printStats(c *cli, path string, st *audit.Stats) {
	w := c.stdout
	fmt.Fprintf(w, "journal %s: %d bytes, %d records, epoch %d, head %d:%s\n", path, st.FileSize, st.Records, st.Epoch, st.Head.Global, st.Head.Hash)
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
	} else {
		fmt.Fprintln(w, "oldest in flight  none")
	}
	if st.LastCheckpoint != nil {
		fmt.Fprintf(w, "last checkpoint   global %d at %s (signed: %v)\n", st.LastCheckpoint.Global, st.LastCheckpoint.Time.UTC().Format(time.RFC3339), st.LastCheckpoint.Signed())
	}
}
