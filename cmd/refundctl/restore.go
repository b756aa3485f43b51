package main

import (
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

// restoreOutput is the --json shape of restore.
type restoreOutput struct {
	Journal string              `json:"journal"`
	Restore journal.RestoreInfo `json:"restore"`
	Prefix  string              `json:"refund_prefix,omitempty"`
	// LatestEvent is the time of the backup's last event: refunds after it
	// may have been lost.
	LatestEvent time.Time `json:"latest_event,omitzero"`
}

func restoreCommand() command {
	return command{
		name:    "restore",
		summary: "make a journal from a backup: a new refund-number epoch, and reconciliation before refunds resume",
		help: `Stop refundd first. The backup is checked (refused if it has problems,
unless --force) and copied; the copy gets an epoch above the backup's and
the replaced journal's, and is marked "reconcile before accepting
refunds". An existing journal is moved aside with --replace (never
deleted). When refundd starts on it, it uses the refund-number prefix
PREFIX+"E"+epoch, pauses new refunds (503), queries WeChat Pay about every
refund in flight and every number the lost epoch would have issued next,
then resumes. Refunds made after the backup are not in it: reconcile the
days since with "refundctl reconcile --bill". See docs/AUDIT.md.`,
		options: func() options { return &restoreOptions{} },
	}
}

// restoreOptions are restore's flags.
type restoreOptions struct {
	from        string
	data        string
	to          string
	replace     bool
	minEpoch    uint64
	force       bool
	prefix      string
	lockTimeout time.Duration
	asJSON      bool
}

func (o *restoreOptions) register(fs *flag.FlagSet, c *cli) {
	fs.StringVar(&o.from, "from", "", "the backup file to restore (required)")
	fs.StringVar(&o.data, "data", "", "the data directory to restore into (DIR/refundd.db)")
	fs.StringVar(&o.to, "to", "", "the journal file to restore into (instead of --data)")
	fs.BoolVar(&o.replace, "replace", false, "move an existing journal aside (to FILE.replaced-TIME) instead of refusing")
	fs.Uint64Var(&o.minEpoch, "min-epoch", 0, "the lowest epoch to use; set it above every epoch ever used when the old journal is lost")
	fs.BoolVar(&o.force, "force", false, "restore even a backup that fails its checks")
	fs.StringVar(&o.prefix, "prefix", "", "refundd's --refund-prefix, to print the refund numbers that will be used")
	fs.DurationVar(&o.lockTimeout, "lock-timeout", time.Second, "how long to wait for file locks")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
}

func (o *restoreOptions) run(c *cli, args []string) int {
	name := "restore"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	if o.from == "" || (o.data == "") == (o.to == "") {
		return c.usageError(name, "give --from and exactly one of --data and --to")
	}
	dst := o.to
	if o.data != "" {
		dst = filepath.Join(o.data, "refundd.db")
	}
	info, err := journal.Restore(c.ctx, o.from, dst, &journal.RestoreOptions{
		MinEpoch: o.minEpoch, Replace: o.replace, Force: o.force, Timeout: o.lockTimeout})
	if errors.Is(err, journal.ErrLocked) {
		return c.fail(name, fmt.Errorf("%s is held by a running refundd: stop it first: %w", dst, err))
	}
	if err != nil {
		return c.fail(name, err)
	}
	out := restoreOutput{Journal: dst, Restore: info}
	// The latest event of the backup dates the loss.
	if db, err := journal.Open(dst, &journal.Options{ReadOnly: true, Timeout: o.lockTimeout}); err == nil {
		if st, err := audit.ComputeStats(c.ctx, db, audit.StatsOptions{}); err == nil {
			out.LatestEvent = st.AsOf
		}
		db.Close()
	}
	if o.prefix != "" {
		if out.Prefix, err = audit.EpochPrefix(o.prefix, info.Epoch); err != nil {
			fmt.Fprintf(c.stderr, "refundctl %s: WARNING: %v\n", name, err)
		}
	}
	if o.asJSON {
		c.printJSON(out)
		return exitOK
	}
	fmt.Fprintf(c.stdout, "restored %s into %s\n", o.from, dst)
	fmt.Fprintf(c.stdout, "backup head   %d:%s (records after it are lost)\n", info.Backup.Global, info.Backup.Hash)
	fmt.Fprintf(c.stdout, "epoch         %d (backup %d, replaced %d)\n", info.Epoch, info.BackupEpoch, info.ReplacedEpoch)
	if info.Replaced != "" {
		fmt.Fprintf(c.stdout, "old journal   kept at %s\n", info.Replaced)
	}
	if out.Prefix != "" {
		fmt.Fprintf(c.stdout, "refund numbers from now on: %s-RESERVATION-N\n", out.Prefix)
	}
	fmt.Fprintln(c.stdout, "next: start refundd; it pauses refunds until it has reconciled every refund in flight.")
	fmt.Fprintf(c.stdout, "then: reconcile the bills of every day since %s with \"refundctl reconcile --bill\".\n", backupDay(out.LatestEvent))
	return exitOK
}

func backupDay(latest time.Time) string {
	if latest.IsZero() {
		return "the backup was taken"
	}
	return latest.In(beijing).Format(time.DateOnly) + " (the backup's latest event, Beijing date)"
}
