package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/journal"
)

// backupOutput is the --json shape of backup.
type backupOutput struct {
	OK    bool                `json:"ok"`
	File  string              `json:"file"`
	Bytes int64               `json:"bytes"`
	Head  journal.Checkpoint  `json:"head"`
	Check journal.CheckResult `json:"check"`
}

func backupCommand() command {
	return command{
		name:    "backup",
		summary: "take a consistent backup: hot from a running refundd (--server), or a copy of a stopped journal (--data, --file)",
		help: `A hot backup streams GET /v1/admin/backup (operator token in --token or
REFUNDCTL_TOKEN): a consistent copy of the live file as of one moment.
The copy is written to a temporary file, checked (complete length, a
journal that passes its own checks, and the chain head the server
announced), then renamed to --out: --out never holds a partial backup.
A journal that archived reservations comes with its archive: every
segment and manifest it names is fetched (GET /v1/admin/archive/{file})
into the archive directory beside --out, checked against its SHA-256,
and the copy is checked with it as one chain.`,
		options: func() options { return &backupOptions{} },
	}
}

// backupOptions are backup's flags.
type backupOptions struct {
	src    source
	out    string
	asJSON bool
}

func (o *backupOptions) register(fs *flag.FlagSet, c *cli) {
	o.src.register(fs, c)
	fs.StringVar(&o.out, "out", "", "the backup file to write (required)")
	fs.BoolVar(&o.asJSON, "json", false, "print the result as JSON")
}

func (o *backupOptions) run(c *cli, args []string) int {
	name := "backup"
	if len(args) > 0 {
		return c.usageError(name, "unexpected argument %q", args[0])
	}
	if o.out == "" {
		return c.usageError(name, "--out is required")
	}
	if o.src.server != "" && (o.src.file != "" || o.src.data != "") {
		return c.usageError(name, "give exactly one of --file, --data and --server")
	}
	var (
		err     error
		res     journal.CheckResult
		checked bool // a hot backup is checked as it is received
	)
	if o.src.server != "" {
		_, res, err = c.fetchBackup(o.src.server, o.src.tokenOr(c), o.out)
		checked = true
	} else {
		db, done, code := c.openOrExit(name, &o.src)
		if db == nil {
			return code
		}
		_, err = db.BackupFile(c.ctx, o.out)
		if err == nil {
			// A journal that archived streams is whole only with its
			// archive: the backup gets a copy beside it.
			var arch *journal.Archive
			if arch, err = openArchive(db); err == nil && arch != nil {
				err = arch.CopyTo(journal.ArchiveDir(o.out))
			}
		}
		done()
	}
	if err != nil {
		return c.fail(name, err)
	}
	if !checked {
		if res, err = checkBackup(c, o.out); err != nil {
			return c.fail(name, err)
		}
	}
	st, _ := os.Stat(o.out)
	bo := backupOutput{OK: res.OK(), File: o.out, Head: journal.Checkpoint{Global: res.Head.Global, Hash: res.Head.Hash}, Check: res}
	if st != nil {
		bo.Bytes = st.Size()
	}
	if o.asJSON {
		c.printJSON(bo)
	} else {
		fmt.Fprintf(c.stdout, "backup %s: %d bytes, %d records, epoch %d\n", o.out, bo.Bytes, res.Records, res.Epoch)
		fmt.Fprintf(c.stdout, "head   %d:%s\n", res.Head.Global, res.Head.Hash)
		for _, p := range res.Problems {
			fmt.Fprintf(c.stdout, "PROBLEM %s\n", p.Error())
		}
	}
	if !res.OK() {
		return exitProblems
	}
	return exitOK
}

// checkBackup checks the backup at path with the archive beside it.
func checkBackup(c *cli, path string) (journal.CheckResult, error) {
	b, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		return journal.CheckResult{}, err
	}
	defer b.Close()
	var check journal.CheckOptions
	if check.Archive, err = openArchive(b); err != nil {
		// Both kinds of backup put it there: it was removed or changed since.
		return journal.CheckResult{}, fmt.Errorf("the backup's journal archived reservations, and its archive is not beside it as the journal names it: copy the data directory's archive/ to %s and run journal verify: %w", journal.ArchiveDir(path), err)
	}
	return b.Check(c.ctx, &check)
}

// fetchBackup downloads a hot backup from server into out and returns the
// head the server announced and the check of the copy (with the archive
// files it names, fetched beside it), which holds that head.
func (c *cli) fetchBackup(server, token, out string) (journal.Checkpoint, journal.CheckResult, error) {
	var head journal.Checkpoint
	var res journal.CheckResult
	start := time.Now()
	resp, err := c.getOK(server, token, "/v1/admin/backup")
	if err != nil {
		return head, res, err
	}
	defer resp.Body.Close()
	if head.Global, err = strconv.ParseUint(resp.Header.Get(api.HeaderHeadGlobal), 10, 64); err != nil {
		return head, res, fmt.Errorf("GET /v1/admin/backup: no %s header", api.HeaderHeadGlobal)
	}
	if head.Hash, err = journal.ParseHash(resp.Header.Get(api.HeaderHeadHash)); err != nil {
		return head, res, fmt.Errorf("GET /v1/admin/backup: %s: %v", api.HeaderHeadHash, err)
	}
	p := c.progress("bytes received")
	err = journal.WriteFileAtomic(out, func(w io.Writer) error {
		n, err := io.Copy(w, &progressReader{r: resp.Body, p: p})
		if err != nil {
			return err
		}
		if resp.ContentLength >= 0 && n != resp.ContentLength {
			return fmt.Errorf("received %d of %d bytes", n, resp.ContentLength)
		}
		return nil
	})
	p.done()
	if err != nil {
		return head, res, fmt.Errorf("backup from %s: %w", server, err)
	}
	b, err := journal.Open(out, &journal.Options{ReadOnly: true})
	if err == nil {
		// An archived journal is whole only with the segments it names:
		// they come from the server too, and the copy is checked with them
		// as one chain.
		check := journal.CheckOptions{Heads: []journal.Checkpoint{head}}
		var segs []journal.AppliedSegment
		if segs, err = b.ArchivedSegments(); err == nil && len(segs) > 0 {
			if err = c.fetchArchive(server, token, segs, b.ArchiveDir()); err == nil {
				check.Archive, err = openArchive(b)
			}
		}
		if err == nil {
			res, err = b.Check(c.ctx, &check)
		}
		b.Close()
		if err == nil && res.Head.Global != head.Global {
			err = fmt.Errorf("the copy ends at global %d, the server announced %d", res.Head.Global, head.Global)
		} else if err == nil && res.HeadsMatched != 1 {
			err = errors.New("the copy's chain does not hold the head the server announced")
		}
	}
	if err != nil {
		os.Remove(out)
		return head, res, fmt.Errorf("backup from %s is not usable: %w", server, err)
	}
	if c.progressOK {
		fmt.Fprintf(c.stderr, "backup received in %s\n", time.Since(start).Round(time.Millisecond))
	}
	return head, res, nil
}

type progressReader struct {
	r io.Reader
	p *progress
	n uint64
}

func (r *progressReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.n += uint64(n)
	r.p.report(r.n)
	return n, err
}

// fetchArchive fetches the archive files segs name (GET
// /v1/admin/archive/{file}) into dir, each checked against its SHA-256:
// the manifest's as the journal recorded it, the segment's as its manifest
// says. A file already in dir with the right digest is kept (segments never
// change), so a second backup to the same place fetches only new ones.
func (c *cli) fetchArchive(server, token string, segs []journal.AppliedSegment, dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	for _, ap := range segs {
		if err := c.fetchArchiveFile(server, token, dir, ap.Manifest, ap.ManifestSHA256); err != nil {
			return err
		}
		b, err := os.ReadFile(filepath.Join(dir, ap.Manifest))
		if err != nil {
			return err
		}
		var m journal.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("archive manifest %s: %w", ap.Manifest, err)
		}
		if m.Segment != ap.Segment {
			return fmt.Errorf("archive manifest %s names segment %q, the journal %q", ap.Manifest, m.Segment, ap.Segment)
		}
		if err := c.fetchArchiveFile(server, token, dir, ap.Segment, m.SegmentSHA256); err != nil {
			return err
		}
	}
	return nil
}

// fetchArchiveFile fetches one archive file into dir unless it is there
// with digest sum (hex SHA-256), and checks what it received against sum.
func (c *cli) fetchArchiveFile(server, token, dir, name, sum string) error {
	path := filepath.Join(dir, name)
	if got, err := journal.FileSHA256(path); err == nil && got == sum {
		return nil
	}
	resp, err := c.getOK(server, token, "/v1/admin/archive/"+url.PathEscape(name))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	err = journal.WriteFileAtomic(path, func(w io.Writer) error {
		h := sha256.New()
		if _, err := io.Copy(io.MultiWriter(w, h), resp.Body); err != nil {
			return err
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != sum {
			return fmt.Errorf("received %s with SHA-256 %s, want %s", name, got, sum)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive file %s: %w", name, err)
	}
	return os.Chmod(path, 0o400) // as the archive's own copies: never changed
}
