package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// headList is the repeatable --head GLOBAL:HASH flag.
type headList []journal.Checkpoint

func (h *headList) String() string { return "" }

func (h *headList) Set(v string) error {
	g, hash, ok := strings.Cut(v, ":")
	n, err := strconv.ParseUint(g, 10, 64)
	if !ok || err != nil {
		return fmt.Errorf("want GLOBAL:HASH")
	}
	hh, err := journal.ParseHash(hash)
	if err != nil {
		return err
	}
	*h = append(*h, journal.Checkpoint{Global: n, Hash: hh})
	return nil
}

// readCheckpointFile reads a recorded head: the JSON of "refundctl head
// --json", of GET /v1/audit/head (its "head" is used), or a bare
// checkpoint object.
func readCheckpointFile(path string) (journal.Checkpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return journal.Checkpoint{}, err
	}
	var wrapped struct {
		Head *journal.Checkpoint `json:"head"`
	}
	if err := json.Unmarshal(b, &wrapped); err == nil && wrapped.Head != nil {
		return *wrapped.Head, nil
	}
	var cp journal.Checkpoint
	if err := json.Unmarshal(b, &cp); err != nil {
		return cp, fmt.Errorf("%s: not a head or checkpoint JSON: %v", path, err)
	}
	if cp.Global == 0 && cp.Hash.IsZero() {
		return cp, fmt.Errorf("%s: no global and hash in it", path)
	}
	return cp, nil
}

// verifyOutput is the --json shape of journal verify.
type verifyOutput struct {
	OK     bool          `json:"ok"`
	Source string        `json:"source"`
	Report *audit.Report `json:"report"`
}

func verifyCommand() command {
	return command{
		name:    "journal verify",
		summary: "check checksums, the hash chain, sequences, every event's decoding and transitions, invariants and indexes",
		help: `Every problem found is listed (not just the first), each naming the
global sequence of the record concerned. A head recorded outside the
journal earlier (--head, or --checkpoint with the JSON saved from
"refundctl journal head --json" or GET /v1/audit/head) proves that
nothing up to it was changed since: the chain must pass through it.
--public-key checks the signatures of the journal's checkpoints and of a
signed recorded head. --since a head verified before checks only what was
appended after it (exit 1 if the head is not on the chain). See
docs/AUDIT.md.`,
		options: func() options { return &verifyOptions{} },
	}
}

// verifyOptions are journal verify's flags.
type verifyOptions struct {
	src         source
	asJSON      bool
	heads       headList
	cpFiles     stringList
	pubFile     string
	maxProblems int
	pgURL       string
	pgSchema    string
	since       string
}

func (o *verifyOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.BoolVar(&o.asJSON, "json", false, "print the report as JSON")
	fs.Var(&o.heads, "head", "a recorded head GLOBAL:HASH the chain must pass through; repeatable")
	fs.Var(&o.cpFiles, "checkpoint", "a file holding a recorded head or checkpoint (JSON); repeatable")
	fs.StringVar(&o.pubFile, "public-key", "", "PEM Ed25519 public key that signs checkpoints")
	fs.IntVar(&o.maxProblems, "max-problems", 1000, "list at most this many problems of each kind (the rest are counted)")
	fs.StringVar(&o.pgURL, "journal", "", "cluster mode: the PostgreSQL journal's URL (postgres://...; password in PGPASSWORD), instead of a file")
	fs.StringVar(&o.pgSchema, "journal-schema", "", "with --journal: the journal's schema; empty: public")
	fs.StringVar(&o.since, "since", "", "check only what was appended after this recorded head: GLOBAL:HASH, or a file as for --checkpoint")
}

func (o *verifyOptions) run(c *cli, args []string) int {
	name := "journal verify"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	if o.pgURL != "" {
		if o.src.file != "" || o.src.data != "" || o.src.server != "" || len(o.heads) > 0 || len(o.cpFiles) > 0 || o.pubFile != "" || o.since != "" {
			return c.usageError(name, "--journal goes alone: recorded heads, checkpoints and signatures are for the file journal")
		}
		return verifyPostgres(c, name, o.pgURL, o.pgSchema, o.maxProblems, o.asJSON)
	}
	opts := audit.VerifyOptions{MaxProblems: o.maxProblems}
	opts.Check.MaxProblems = o.maxProblems
	opts.Check.Heads = o.heads
	for _, f := range o.cpFiles {
		cp, err := readCheckpointFile(f)
		if err != nil {
			return c.usageError(name, "--checkpoint: %v", err)
		}
		opts.Check.Heads = append(opts.Check.Heads, cp)
	}
	if o.pubFile != "" {
		b, err := os.ReadFile(o.pubFile)
		if err != nil {
			return c.usageError(name, "--public-key: %v", err)
		}
		if opts.Check.PublicKey, err = audit.ParsePublicKey(b); err != nil {
			return c.usageError(name, "--public-key %s: %v", o.pubFile, err)
		}
	}
	if o.since != "" {
		var h headList
		if err := h.Set(o.since); err == nil {
			opts.Check.Since = &h[0]
		} else if cp, ferr := readCheckpointFile(o.since); ferr == nil {
			opts.Check.Since = &cp
		} else {
			return c.usageError(name, "--since: want GLOBAL:HASH or a head file: %v", ferr)
		}
	}
	db, done, code := c.openOrExit(name, &o.src)
	if db == nil {
		return code
	}
	defer done()
	// Archive and hot journal are one chain: checked together.
	arch, err := openArchive(db)
	if err != nil {
		return c.fail(name, err)
	}
	opts.Check.Archive = arch
	p := c.progress("records checked")
	opts.Check.Progress = p.report
	rep, err := audit.Verify(c.ctx, db, opts)
	p.done()
	if errors.Is(err, journal.ErrNotOnChain) {
		// A head that is not on the chain is forged, or the journal was
		// changed up to it: either way nothing after it can be trusted.
		fmt.Fprintf(c.stderr, "refundctl %s: --since %d:%s: %v\n", name, opts.Check.Since.Global, opts.Check.Since.Hash, err)
		return exitProblems
	}
	if err != nil {
		return c.fail(name, err)
	}
	if o.asJSON {
		c.printJSON(verifyOutput{OK: rep.OK(), Source: db.Path(), Report: rep})
	} else {
		printVerify(c, db.Path(), rep)
		if arch != nil {
			fmt.Fprintf(c.stdout, "  archive      %s: %d segments, %d records archived\n", arch.Dir, rep.Journal.Segments, rep.Journal.Archived)
			for _, m := range arch.Pending {
				fmt.Fprintf(c.stdout, "  archive      %s is left over from an interrupted run and not part of the journal (the next journal archive removes it)\n", m)
			}
		}
	}
	if !rep.OK() {
		return exitProblems
	}
	return exitOK
}

// verifyPostgres checks a cluster's PostgreSQL journal: the journal's own
// Verify (gap-free globals, the hash chain, contiguous streams, claims, and
// every event within its epoch's activation), then every event's decoding,
// transitions and invariants (audit.ReplayCheck).
func verifyPostgres(c *cli, name, url, schema string, maxProblems int, asJSON bool) int {
	schema = cmp.Or(schema, "public")
	// pgjournal.Open creates a missing journal: an audit must not.
	conn, err := pgx.Connect(c.ctx, url)
	if err != nil {
		return c.fail(name, err)
	}
	var exists bool
	err = conn.QueryRow(c.ctx, "SELECT EXISTS (SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'log_head')", schema).Scan(&exists)
	_ = conn.Close(c.ctx)
	if err != nil {
		return c.fail(name, err)
	}
	if !exists {
		return c.fail(name, fmt.Errorf("no refundd journal in schema %q of that database", schema))
	}
	db, err := pgjournal.Open(c.ctx, url, &pgjournal.Options{Schema: schema, NodeID: "refundctl"})
	if err != nil {
		return c.fail(name, err)
	}
	defer db.Close()
	storage := db.Verify(c.ctx)
	if storage != nil && !errors.Is(storage, journal.ErrCorrupt) {
		return c.fail(name, storage)
	}
	p := c.progress("records replayed")
	rep, err := audit.ReplayCheck(c.ctx, db, maxProblems, p.report)
	p.done()
	if err != nil {
		return c.fail(name, err)
	}
	ok := storage == nil && rep.OK()
	source := "postgres schema " + schema
	if asJSON {
		out := struct {
			verifyOutput
			Storage string `json:"storage_problem,omitempty"`
		}{verifyOutput{OK: ok, Source: source, Report: rep}, ""}
		if storage != nil {
			out.Storage = storage.Error()
		}
		c.printJSON(out)
	} else {
		fmt.Fprintf(c.stdout, "journal %s\n", source)
		fmt.Fprintf(c.stdout, "  records      %d (last global %d)\n", rep.Journal.Records, rep.Journal.LastGlobal)
		fmt.Fprintf(c.stdout, "  reservations %d, refunds %d\n", rep.Reservations, rep.Refunds)
		if rep.Counters != "" {
			fmt.Fprintf(c.stdout, "  counters     %s\n", rep.Counters)
		}
		if rep.Lists != "" {
			fmt.Fprintf(c.stdout, "  list index   %s\n", rep.Lists)
		}
		if storage != nil {
			fmt.Fprintf(c.stdout, "PROBLEM [storage] %v\n", storage)
		}
		for _, p := range rep.Problems {
			fmt.Fprintf(c.stdout, "PROBLEM %s\n", p)
		}
		if ok {
			fmt.Fprintln(c.stdout, "OK: no problems found")
		} else {
			fmt.Fprintf(c.stdout, "FAILED: %d problems\n", len(rep.Problems)+rep.Dropped+boolInt(storage != nil))
		}
	}
	if !ok {
		return exitProblems
	}
	return exitOK
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func printVerify(c *cli, path string, rep *audit.Report) {
	w := c.stdout
	j := rep.Journal
	var formats []string
	for f := uint8(1); f <= 255 && len(formats) < len(j.Formats); f++ {
		if n, ok := j.Formats[f]; ok {
			formats = append(formats, fmt.Sprintf("format %d: %d", f, n))
		}
	}
	fmt.Fprintf(w, "journal %s\n", path)
	if j.Since != nil {
		fmt.Fprintf(w, "  since        %d:%s (on the chain; nothing before it was read)\n", j.Since.Global, j.Since.Hash)
		fmt.Fprintf(w, "  verified     globals %d..%d: %d records, %d reservations; epoch %d\n", rep.Range.From+1, rep.Range.To, rep.Range.Records, rep.Range.Streams, j.Epoch)
	} else {
		fmt.Fprintf(w, "  records      %d (last global %d; %s), %d streams, epoch %d\n", j.Records, j.LastGlobal, strings.Join(formats, ", "), j.Streams, j.Epoch)
		fmt.Fprintf(w, "  verified     globals 1..%d\n", rep.Range.To)
	}
	fmt.Fprintf(w, "  chain head   %d:%s\n", j.Head.Global, j.Head.Hash)
	if j.LastCheckpoint != nil {
		fmt.Fprintf(w, "  checkpoints  %d (%d signed), last at global %d, %s\n", j.Checkpoints, j.SignedCheckpoints,
			j.LastCheckpoint.Global, j.LastCheckpoint.Time.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintf(w, "  checkpoints  none\n")
	}
	if j.HeadsMatched > 0 {
		fmt.Fprintf(w, "  recorded heads matched: %d\n", j.HeadsMatched)
	}
	fmt.Fprintf(w, "  reservations %d, refunds %d\n", rep.Reservations, rep.Refunds)
	if rep.Counters != "" {
		fmt.Fprintf(w, "  counters     %s\n", rep.Counters)
	}
	if rep.Lists != "" {
		fmt.Fprintf(w, "  list rows    %s\n", rep.Lists)
	}
	for _, p := range j.Problems {
		if p.Global != 0 {
			fmt.Fprintf(w, "PROBLEM global %d [%s] %s\n", p.Global, p.Kind, p.Message)
		} else {
			fmt.Fprintf(w, "PROBLEM [%s] %s\n", p.Kind, p.Message)
		}
	}
	for _, p := range rep.Problems {
		fmt.Fprintf(w, "PROBLEM %s\n", p)
	}
	if rep.OK() {
		fmt.Fprintln(w, "OK: no problems found")
		return
	}
	fmt.Fprintf(w, "FAILED: %d problems in the file, %d in the events and indexes\n",
		len(j.Problems)+j.Dropped, len(rep.Problems)+rep.Dropped)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
