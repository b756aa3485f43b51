package main

import (
	"encoding/csv"
	"encoding/json"
	"flag"
	"io"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

func exportCommand() command {
	return command{
		name:    "journal export",
		summary: "every event, flattened, as JSON lines or CSV, amounts in fen and yuan",
		help: `--from and --to bound the events' decision times (from <= time < to):
RFC 3339, yyyy-MM-dd or "yyyy-MM-dd HH:mm:ss" (Beijing time). CSV columns:
global, reservation_id, merchant, seq, at, type, version, by, refund_no, amount_fen,
amount_yuan, refund_state, status, summary, data (the event as JSON),
reason_code, metadata (the refund's, as a JSON object; empty when none).
--merchant keeps one merchant's reservations (events that do not decode
name no merchant and are then left out; "journal verify" reports them).`,
		options: func() options { return &exportOptions{} },
	}
}

// exportOptions are export's flags.
type exportOptions struct {
	src    source
	format string
	from   string
	to     string
	out    string
	merch  string
}

func (o *exportOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.StringVar(&o.format, "format", "jsonl", "jsonl or csv")
	fs.StringVar(&o.from, "from", "", "first moment included")
	fs.StringVar(&o.to, "to", "", "first moment excluded")
	fs.StringVar(&o.out, "out", "", "write to this file (atomically) instead of stdout")
	fs.StringVar(&o.merch, "merchant", "", merchantUsage)
}

func (o *exportOptions) run(c *cli, args []string) int {
	name := "journal export"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	if o.format != "jsonl" && o.format != "csv" {
		return c.usageError(name, "--format must be jsonl or csv")
	}
	opts := audit.ExportOptions{Merchant: o.merch}
	var err error
	if o.from != "" {
		if opts.From, err = parseTime(o.from); err != nil {
			return c.usageError(name, "--from: %v", err)
		}
	}
	if o.to != "" {
		if opts.To, err = parseTime(o.to); err != nil {
			return c.usageError(name, "--to: %v", err)
		}
	}
	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	if opts.Archive, err = openArchive(db); err != nil {
		return c.fail(name, err)
	}
	p := c.progress("records exported")
	opts.Progress = p.report
	write := func(w io.Writer) error { return export(c, db, opts, o.format, w) }
	if o.out != "" {
		err = journal.WriteFileAtomic(o.out, write)
	} else {
		err = write(c.stdout)
	}
	p.done()
	if err != nil {
		return c.fail(name, err)
	}
	return exitOK
}

func export(c *cli, db *journal.DB, opts audit.ExportOptions, format string, w io.Writer) error {
	if format == "csv" {
		cw := csv.NewWriter(w)
		if err := cw.Write(audit.RowHeader); err != nil {
			return err
		}
		err := audit.Export(c.ctx, db, opts, func(r audit.Row) error { return cw.Write(r.CSV()) })
		cw.Flush()
		if err == nil {
			err = cw.Error()
		}
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return audit.Export(c.ctx, db, opts, func(r audit.Row) error { return enc.Encode(r) })
}
