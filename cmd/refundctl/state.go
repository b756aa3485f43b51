package main

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

// stateOutput is the --json shape of journal state.
type stateOutput struct {
	ReservationID string          `json:"reservation_id"`
	At            *time.Time      `json:"at,omitempty"`
	Seq           uint64          `json:"seq,omitempty"`
	Exists        bool            `json:"exists"`
	LastEvent     *eventRef       `json:"last_event,omitempty"`
	State         audit.StateView `json:"state"`
}

type eventRef struct {
	Seq    uint64    `json:"seq"`
	Global uint64    `json:"global"`
	At     time.Time `json:"at"`
	Type   string    `json:"type"`
}

func stateCommand() command {
	return command{
		name:    "journal state",
		args:    "RESERVATION",
		summary: "a reservation's state as it was at a past time (--at) or after a sequence number (--seq)",
		help: `The state is the fold of the reservation's events in order, up to the
last one decided at or before --at (or with sequence <= --seq): exactly
the state refundd held at that moment. Times are RFC 3339, yyyy-MM-dd or
"yyyy-MM-dd HH:mm:ss" (Beijing time, as in WeChat Pay's bills).`,
		options: func() options { return &stateOptions{} },
	}
}

// stateOptions are state's flags.
type stateOptions struct {
	src    source
	asJSON bool
	atFlag string
	seq    uint64
	merch  string
}

func (o *stateOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the state as JSON")
	fs.StringVar(&o.atFlag, "at", "", "the moment: RFC 3339, yyyy-MM-dd or \"yyyy-MM-dd HH:mm:ss\" (Beijing)")
	fs.Uint64Var(&o.seq, "seq", 0, "the state after this per-reservation sequence number")
	fs.StringVar(&o.merch, "merchant", "", "answer only for a reservation of this merchant; another's reads as not in the journal")
}

func (o *stateOptions) run(c *cli, args []string) int {
	name := "journal state"
	if len(args) != 1 {
		return c.usageError(name, "give one reservation id")
	}
	if (o.atFlag == "") == (o.seq == 0) {
		return c.usageError(name, "give exactly one of --at and --seq")
	}
	var at audit.At
	out := stateOutput{ReservationID: args[0], Seq: o.seq}
	if o.atFlag != "" {
		t, err := parseTime(o.atFlag)
		if err != nil {
			return c.usageError(name, "--at: %v", err)
		}
		at.Time, out.At = t, &t
	}
	at.Seq = o.seq
	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	v, last, err := audit.StateAt(c.ctx, db, args[0], at)
	if err == nil && o.merch != "" && !ofMerchant(c, db, args[0], o.merch) {
		err = audit.ErrNotFound
	}
	if errors.Is(err, audit.ErrNotFound) {
		fmt.Fprintf(c.stderr, "refundctl %s: reservation %q is not in %s\n", name, args[0], db.Path())
		return exitProblems
	}
	if err != nil {
		return c.fail(name, err)
	}
	out.State, out.Exists = v, last != nil
	if last != nil {
		out.LastEvent = &eventRef{Seq: last.Seq, Global: last.Global, At: last.At, Type: last.Type}
	}
	if o.asJSON {
		c.printJSON(out)
		return exitOK
	}
	if last == nil {
		fmt.Fprintf(c.stdout, "reservation %s did not exist yet at that moment\n", args[0])
		return exitOK
	}
	fmt.Fprintf(c.stdout, "as of event #%d (global %d, %s, %s)\n", last.Seq, last.Global, last.At.UTC().Format(time.RFC3339Nano), last.Type)
	printState(c.stdout, v)
	return exitOK
}

// ofMerchant says whether reservation id belongs to merchant (which never
// changes once registered: its latest state tells).
func ofMerchant(c *cli, db *journal.DB, id, merchant string) bool {
	tl, err := audit.Timeline(c.ctx, db, id)
	return err == nil && len(tl) > 0 && tl[len(tl)-1].State.Merchant == merchant
}
