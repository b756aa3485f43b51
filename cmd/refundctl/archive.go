package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

func archiveCommand() command {
	return command{
		name:    "journal archive",
		summary: "move reservations that can never change again into a sealed, signed archive segment (refundd stopped)",
		help: `Offline: refundd must be stopped (the journal's write lock is taken for
the whole run). Selects the reservations that are paid, have every refund
SUCCEEDED or FAILED, no due time and no attention mark, whose refund
window has closed and which were paid longer ago than --retention; writes
them, byte for byte, into a gzip segment in the archive directory
(DIR/archive) with a manifest signed by --checkpoint-key; then writes a new
generation of the hot file without them and swaps it in. The old file is
kept as refundd.db.pre-archive-TIME: delete it once the new one verifies
and the archive is copied. A crash at any step leaves the old or the new
state, both verifiable; run the command again. See docs/AUDIT.md,
"Archival".`,
		options: func() options { return &archiveOptions{} },
	}
}

// archiveOptions are journal archive's flags.
type archiveOptions struct {
	file, data, archive string
	keyFile             string
	retention, window   time.Duration
	now                 string
	dryRun, asJSON      bool
	lockTimeout         time.Duration
}

func (o *archiveOptions) register(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&o.file, "file", "", "journal file nobody is writing")
	fs.StringVar(&o.data, "data", "", "data directory of a stopped refundd (DIR/refundd.db)")
	fs.StringVar(&o.archive, "archive", "", "archive directory; default DIR/archive (FILE.archive for another file name)")
	fs.StringVar(&o.keyFile, "checkpoint-key", "", "PEM Ed25519 private key that signs the manifest (refundd's --checkpoint-key); without it the manifest is unsigned")
	fs.DurationVar(&o.retention, "retention", reservation.DefaultArchiveRetention, "keep reservations paid less than this long ago")
	fs.DurationVar(&o.window, "refund-window", 365*24*time.Hour, "refundd's refund window (policy)")
	fs.StringVar(&o.now, "now", "", "decide eligibility at this time (RFC 3339 or a date); default now")
	fs.BoolVar(&o.dryRun, "dry-run", false, "only say what would be archived")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", time.Second, "how long to wait for the file lock")
}

// archiveOutput is the --json shape of journal archive.
type archiveOutput struct {
	Journal  string            `json:"journal"`
	Archived int               `json:"archived"`
	Kept     map[string]int    `json:"kept"`
	Totals   map[string]int64  `json:"totals,omitempty"`
	Manifest *journal.Manifest `json:"manifest,omitempty"`
	Segment  string            `json:"segment,omitempty"`
	Aside    string            `json:"aside,omitempty"`
	Removed  []string          `json:"removed_leftovers,omitempty"`
	DryRun   bool              `json:"dry_run,omitempty"`
}

func (o *archiveOptions) run(c *cli, args []string) int {
	name := "journal archive"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	if (o.file == "") == (o.data == "") {
		return c.usageError(name, "give exactly one of --file and --data (a running refundd's journal cannot be archived)")
	}
	path := o.file
	if o.data != "" {
		path = filepath.Join(o.data, "refundd.db")
	}
	if _, err := os.Stat(path); err != nil {
		return c.fail(name, err)
	}
	dir := o.archive
	if dir == "" {
		dir = journal.ArchiveDir(path)
	}
	now := time.Now()
	if o.now != "" {
		t, err := parseTime(o.now)
		if err != nil {
			return c.usageError(name, "--now: %v", err)
		}
		now = t
	}
	if o.retention < o.window {
		return c.usageError(name, "--retention %s is shorter than the refund window %s: a reservation could still be refunded", o.retention, o.window)
	}
	var key []byte
	if o.keyFile != "" {
		b, err := os.ReadFile(o.keyFile)
		if err != nil {
			return c.usageError(name, "--checkpoint-key: %v", err)
		}
		key = b
	}
	plan := journal.ArchivePlan{Cutoff: now, Timeout: o.lockTimeout, AfterStep: crashpoint.Hit}
	if key != nil {
		k, err := audit.ParseSigningKey(key)
		if err != nil {
			return c.usageError(name, "--checkpoint-key %s: %v", o.keyFile, err)
		}
		plan.SigningKey = k
	}

	// Select, read-only; the write lock is taken by the move itself.
	db, err := journal.Open(path, &journal.Options{ReadOnly: true, Timeout: o.lockTimeout})
	if errors.Is(err, journal.ErrLocked) {
		return c.fail(name, fmt.Errorf("%s is held by a running refundd: stop it first (archival is offline)", path))
	}
	if err != nil {
		return c.fail(name, err)
	}
	p := c.progress("records read")
	sel, err := audit.PlanArchive(c.ctx, db, audit.ArchiveOptions{Now: now, RefundWindow: o.window, Retention: o.retention, Progress: p.report})
	p.done()
	db.Close()
	if err != nil {
		return c.fail(name, err)
	}
	out := archiveOutput{Journal: path, Archived: len(sel.Streams), Kept: sel.Kept, Totals: sel.Totals, DryRun: o.dryRun}
	if len(sel.Streams) > 0 && !o.dryRun {
		plan.Streams, plan.DropMarks, plan.Totals = sel.Streams, sel.ListRows, sel.Totals
		stage := map[string]*progress{}
		plan.Progress = func(s string, n uint64) {
			if stage[s] == nil {
				for _, q := range stage {
					q.done()
				}
				stage[s] = c.progress(s + ": records")
			}
			stage[s].report(n)
		}
		res, err := journal.ArchiveStreams(c.ctx, path, dir, plan)
		for _, q := range stage {
			q.done()
		}
		if err != nil {
			return c.fail(name, err)
		}
		out.Manifest, out.Segment, out.Aside, out.Removed = &res.Manifest, res.SegmentPath, res.Aside, res.Removed
	}
	if o.asJSON {
		c.printJSON(out)
		return exitOK
	}
	w := c.stdout
	fmt.Fprintf(w, "journal %s\n", path)
	for _, r := range out.Removed {
		fmt.Fprintf(w, "  removed      %s (left over from an interrupted run)\n", r)
	}
	verb := "archived"
	if o.dryRun {
		verb = "would archive"
	}
	fmt.Fprintf(w, "  %-12s %d reservations (%d refunds)\n", verb, len(sel.Streams), sel.Totals["refunds"])
	for _, k := range sortedKeys(sel.Kept) {
		fmt.Fprintf(w, "  kept         %d: %s\n", sel.Kept[k], k)
	}
	if out.Manifest != nil {
		m := out.Manifest
		signed := "unsigned"
		if m.KeyID != "" {
			signed = "signed by key " + m.KeyID
		}
		fmt.Fprintf(w, "  segment      %s: %d records, globals %d..%d, %d bytes, sha256 %s\n", out.Segment, m.Records, m.FirstGlobal, m.LastGlobal, m.SegmentBytes, m.SegmentSHA256)
		fmt.Fprintf(w, "  manifest     %s\n", signed)
		fmt.Fprintf(w, "  old file     %s (delete it once journal verify passes and the archive is copied)\n", out.Aside)
	}
	return exitOK
}

// openArchive opens the archive of db, nil when db never archived and no
// interrupted run left anything.
func openArchive(db *journal.DB) (*journal.Archive, error) {
	a, err := journal.OpenArchive(db, db.ArchiveDir())
	if err != nil {
		return nil, fmt.Errorf("%w (give the archive's directory with --archive)", err)
	}
	if len(a.Applied) == 0 && len(a.Pending) == 0 {
		return nil, nil
	}
	return a, nil
}
