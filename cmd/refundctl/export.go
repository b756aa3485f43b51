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
global, reservation_id, seq, at, type, version, by, refund_no, amount_fen,
amount_yuan, refund_state, status, summary, data (the event as JSON).`,
		flags: func(fs *flag.FlagSet, c *cli) func([]string) int {
			var src source
			src.register(fs, c)
			format := fs.String("format", "jsonl", "jsonl or csv")
			from := fs.String("from", "", "first moment included")
			to := fs.String("to", "", "first moment excluded")
			out := fs.String("out", "", "write to this file (atomically) instead of stdout")
			return func(args []string) int {
				name := "journal export"
				if len(args) > 0 {
					return c.usageError(name, "unexpected argument %q", args[0])
				}
				if *format != "jsonl" && *format != "csv" {
					return c.usageError(name, "--format must be jsonl or csv")
				}
				var opts audit.ExportOptions
				var err error
				if *from != "" {
					if opts.From, err = parseTime(*from); err != nil {
						return c.usageError(name, "--from: %v", err)
					}
				}
				if *to != "" {
					if opts.To, err = parseTime(*to); err != nil {
						return c.usageError(name, "--to: %v", err)
					}
				}
				db, done, code := c.openOrExit(name, &src)
				if db == nil {
					return code
				}
				defer done()
				p := c.progress("records exported")
				opts.Progress = p.report
				write := func(w io.Writer) error { return export(c, db, opts, *format, w) }
				if *out != "" {
					err = journal.WriteFileAtomic(*out, write)
				} else {
					err = write(c.stdout)
				}
				p.done()
				if err != nil {
					return c.fail(name, err)
				}
				return exitOK
			}
		},
	}
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
