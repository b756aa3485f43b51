package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/audit"
)

func showCommand() command {
	return command{
		name:    "journal show",
		args:    "RESERVATION",
		summary: "a reservation's timeline: each event with time, sequence, what it did and the resulting state",
		options: func() options { return &showOptions{} },
	}
}

// showOptions are show's flags.
type showOptions struct {
	src    source
	asJSON bool
	merch  string
}

func (o *showOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the timeline as JSON")
	fs.StringVar(&o.merch, "merchant", "", "answer only for a reservation of this merchant; another's reads as not in the journal")
}

func (o *showOptions) run(c *cli, args []string) int {
	name := "journal show"
	if len(args) != 1 {
		return c.usageError(name, "give one reservation id")
	}
	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	tl, err := audit.Timeline(c.ctx, db, args[0])
	if err == nil && o.merch != "" && (len(tl) == 0 || tl[len(tl)-1].State.Merchant != o.merch) {
		err = audit.ErrNotFound
	}
	if errors.Is(err, audit.ErrNotFound) {
		fmt.Fprintf(c.stderr, "refundctl %s: reservation %q is not in %s\n", name, args[0], db.Path())
		return exitProblems
	}
	if err != nil {
		return c.fail(name, err)
	}
	if o.asJSON {
		c.printJSON(struct {
			ReservationID string        `json:"reservation_id"`
			Events        []audit.Entry `json:"events"`
		}{args[0], tl})
		return exitOK
	}
	problems := 0
	for _, e := range tl {
		fmt.Fprintf(c.stdout, "#%-3d global %-6d %s  %-10s %s v%d\n", e.Seq, e.Global, e.At.UTC().Format("2006-01-02 15:04:05.000Z"), e.By, e.Type, e.Version)
		fmt.Fprintf(c.stdout, "     %s\n", e.Summary)
		for _, p := range e.Problems {
			problems++
			fmt.Fprintf(c.stdout, "     PROBLEM %s\n", p)
		}
		fmt.Fprintf(c.stdout, "     -> %s\n", stateLine(e.State))
	}
	if problems > 0 {
		fmt.Fprintf(c.stdout, "FAILED: %d problems; run \"refundctl journal verify\" for the whole journal\n", problems)
		return exitProblems
	}
	return exitOK
}

// stateLine sums a state up in one line.
func stateLine(v audit.StateView) string {
	s := fmt.Sprintf("%s paid %s refunded %s in flight %s refundable %s", v.Status, v.AmountYuan, v.RefundedYuan, v.InFlightYuan, v.RefundableYuan)
	var rs []string
	for _, r := range v.Refunds {
		rs = append(rs, r.No+" "+r.State+" "+r.AmountYuan)
	}
	if len(rs) > 0 {
		s += "; " + strings.Join(rs, ", ")
	}
	return s
}

// printState writes a state in full.
func printState(w io.Writer, v audit.StateView) {
	fmt.Fprintf(w, "reservation %s  user %s  order %s", v.ID, v.UserID, v.OutTradeNo)
	if v.TransactionID != "" {
		fmt.Fprintf(w, "  transaction %s", v.TransactionID)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "  status %s, %d events\n", v.Status, v.Version)
	fmt.Fprintf(w, "  paid %s %s, refunded %s, in flight %s, refundable %s\n", v.AmountYuan, v.Currency, v.RefundedYuan, v.InFlightYuan, v.RefundableYuan)
	for _, r := range v.Refunds {
		fmt.Fprintf(w, "  refund %-24s %-10s %10s  attempts %d queries %d", r.No, r.State, r.AmountYuan, r.Attempts, r.Queries)
		if r.Code != "" {
			fmt.Fprintf(w, "  code %s", r.Code)
		}
		if !r.DueAt.IsZero() {
			fmt.Fprintf(w, "  due %s", r.DueAt.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
	}
}
