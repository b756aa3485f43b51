package journal

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ArchivePlan is what ArchiveStreams moves and how it seals it.
type ArchivePlan struct {
	// Streams are the streams to archive, whole. Each must exist and have
	// no due entry.
	Streams []string
	// DropMarks are marks-index keys removed from the hot file with them
	// (the writer's list rows of those streams).
	DropMarks []string
	// Cutoff is the time the caller decided eligibility at; its UTC month
	// names the segment.
	Cutoff time.Time
	// Totals are written into the manifest as they are.
	Totals map[string]int64
	// SigningKey signs the manifest; nil leaves it unsigned.
	SigningKey ed25519.PrivateKey
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Progress, if set, is called with a stage name and the records done
	// so far, every few thousand records.
	Progress func(stage string, records uint64)
	// Timeout is how long to wait for the file lock; zero means 1s.
	Timeout time.Duration
	// AfterStep, if set, is called after each step of the crash-safe
	// order is durable, with its name (ArchiveStepSegment, ...): refundctl
	// crashes there on purpose in its crash tests.
	AfterStep func(step string)
}

// The steps of an archival, in order (docs/AUDIT.md "Crash safety"): the
// segment is durable; its manifest is; the new hot generation is written
// beside the old one; it replaced the old.
const (
	ArchiveStepSegment    = "archive-segment-written"
	ArchiveStepManifest   = "archive-manifest-written"
	ArchiveStepGeneration = "archive-generation-written"
	ArchiveStepSwapped    = "archive-swapped"
)

// ArchiveResult says what ArchiveStreams did.
type ArchiveResult struct {
	Manifest     Manifest
	ManifestPath string
	SegmentPath  string
	// Aside is the old hot file's second name, kept as evidence.
	Aside string
	// Removed are leftovers of an interrupted run that were deleted.
	Removed []string
}

// ArchiveStreams moves plan.Streams out of the journal file at path
// (offline: it takes the write lock for the whole run, so refundd must be
// stopped) into a new segment in dir, then replaces the hot file by a new
// generation without them, in the crash-safe order of docs/AUDIT.md
// ("Crash safety"): segment, manifest, new generation, rename.
func ArchiveStreams(ctx context.Context, path, dir string, plan ArchivePlan) (res ArchiveResult, err error) {
	fail := func(err error) (ArchiveResult, error) {
		return ArchiveResult{}, fmt.Errorf("journal: archive %s: %w", path, err)
	}
	if len(plan.Streams) == 0 {
		return fail(fmt.Errorf("%w: no streams to archive", ErrInvalid))
	}
	if plan.Now == nil {
		plan.Now = time.Now
	}
	if plan.AfterStep == nil {
		plan.AfterStep = func(string) {}
	}
	if plan.Timeout <= 0 {
		plan.Timeout = time.Second
	}
	progress := func(string, uint64) {}
	if plan.Progress != nil {
		progress = plan.Progress
	}
	// Open for writing once, so the whole index tail is flushed at Close
	// and the streams index is complete.
	db, err := Open(path, &Options{Timeout: plan.Timeout, CheckpointEvery: -1, CheckpointInterval: -1})
	if err != nil {
		return fail(err)
	}
	if err := db.Close(); err != nil {
		return fail(err)
	}
	old, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: plan.Timeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return fail(fmt.Errorf("%w: %w", ErrLocked, err))
	}
	if err != nil {
		return fail(err)
	}
	defer old.Close()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fail(err)
	}

	tx, err := old.Begin(false)
	if err != nil {
		return fail(err)
	}
	defer func() { _ = tx.Rollback() }()
	applied, err := appliedInTx(tx)
	if err != nil {
		return fail(err)
	}
	if res.Removed, err = removeLeftovers(dir, applied); err != nil {
		return fail(err)
	}
	_ = os.Remove(path + ".next")

	// The streams, whole: every one known, indexed to its head.
	heads := make(map[string]uint64, len(plan.Streams))
	// blocks are the blocks holding each stream's records, as its
	// archived entry keeps them.
	blocks := make(map[string][]int64, len(plan.Streams))
	hb := tx.Bucket(bucketHeads)
	for _, s := range plan.Streams {
		h, err := readHead(hb, s)
		if err != nil {
			return fail(err)
		}
		if h == 0 {
			return fail(fmt.Errorf("%w: stream %q has no records (or is archived already)", ErrInvalid, s))
		}
		heads[s] = h
	}
	if err := tx.Bucket(bucketDue).ForEach(func(k, _ []byte) error {
		if d, ok := parseDueKey(k); ok {
			if _, moving := heads[d.Stream]; moving {
				return fmt.Errorf("%w: stream %q has a due entry at %s: it is not finished", ErrInvalid, d.Stream, d.At.Format(time.RFC3339))
			}
		}
		return nil
	}); err != nil {
		return fail(err)
	}
	endTip, err := tipInTx(tx)
	if err != nil {
		return fail(err)
	}

	// 1. The segment.
	period := plan.Cutoff.UTC().Format("2006-01")
	name := period
	for n := 2; ; n++ {
		if _, err := os.Stat(filepath.Join(dir, name+segmentSuffix)); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s.%d", period, n)
	}
	m := Manifest{Version: 1, Segment: name + segmentSuffix, Period: period, Totals: plan.Totals,
		Cutoff: plan.Cutoff.UTC(), CreatedAt: plan.Now().UTC()}
	m.Head.Global, m.Head.Hash = endTip.global, endTip.hash
	if len(applied) > 0 {
		m.Previous = applied[len(applied)-1].ManifestSHA256
	}
	res.SegmentPath = filepath.Join(dir, m.Segment)
	err = WriteFileAtomic(res.SegmentPath, func(w io.Writer) error {
		h := sha256.New()
		cw := &countWriter{w: io.MultiWriter(w, h)}
		gz, err := gzip.NewWriterLevel(cw, gzip.BestSpeed)
		if err != nil {
			return err
		}
		// The header is a member of its own, so every block starts with a
		// frame.
		if _, err := io.WriteString(gz, segmentMagic); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		gz.Reset(cw)
		block, blockLen := cw.n, 0
		digest := sha256.New()
		seen := map[string]uint64{}
		var frame []byte
		c := tx.Bucket(bucketLog).Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if len(k) != 8 {
				return fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
			}
			g := binary.BigEndian.Uint64(k)
			r, err := decodeRecordData(g, v, false)
			if err != nil {
				return err
			}
			head, moving := heads[r.Stream]
			if !moving {
				continue
			}
			if r.Format < 2 {
				return fmt.Errorf("%w: stream %q has format %d records, which do not carry their chain hash", ErrInvalid, r.Stream, r.Format)
			}
			if want := seen[r.Stream] + 1; r.Seq != want {
				return fmt.Errorf("%w: stream %q seq %d at global %d, want %d", ErrCorrupt, r.Stream, r.Seq, g, want)
			}
			seen[r.Stream] = r.Seq
			var flags byte
			if r.Seq == head {
				flags = frameLast
			}
			frame = binary.AppendUvarint(frame[:0], uint64(len(v)))
			frame = append(frame, flags)
			frame = append(frame, v...)
			if blockLen >= segmentBlockBytes {
				if err := gz.Close(); err != nil {
					return err
				}
				gz.Reset(cw)
				block, blockLen = cw.n, 0
			}
			if bs := blocks[r.Stream]; len(bs) == 0 || bs[len(bs)-1] != block {
				blocks[r.Stream] = append(bs, block)
			}
			if _, err := gz.Write(frame); err != nil {
				return err
			}
			blockLen += len(frame)
			if m.Records == 0 {
				m.FirstGlobal = g
			}
			m.Records++
			m.LastGlobal = g
			digest.Write(r.Hash[:])
			if m.Records%8192 == 0 {
				progress("segment", m.Records)
				if err := ctx.Err(); err != nil {
					return err
				}
			}
		}
		for s, h := range heads {
			if seen[s] != h {
				return fmt.Errorf("%w: stream %q has %d records in the log, its head is %d", ErrCorrupt, s, seen[s], h)
			}
		}
		if _, err := gz.Write(binary.AppendUvarint(nil, 0)); err != nil {
			return err
		}
		if err := gz.Close(); err != nil {
			return err
		}
		m.Streams = uint64(len(heads))
		digest.Sum(m.RecordsDigest[:0])
		m.SegmentSHA256 = hex.EncodeToString(h.Sum(nil))
		m.SegmentBytes = cw.n
		return nil
	})
	if err != nil {
		return fail(fmt.Errorf("segment: %w", err))
	}
	_ = os.Chmod(res.SegmentPath, 0o400)
	progress("segment", m.Records)
	plan.AfterStep(ArchiveStepSegment)

	// 2. The manifest.
	if plan.SigningKey != nil {
		m.Sign(plan.SigningKey)
	}
	mb, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fail(err)
	}
	mb = append(mb, '\n')
	res.ManifestPath = filepath.Join(dir, name+manifestSuffix)
	if err := WriteFileAtomic(res.ManifestPath, func(w io.Writer) error { _, err := w.Write(mb); return err }); err != nil {
		return fail(fmt.Errorf("manifest: %w", err))
	}
	_ = os.Chmod(res.ManifestPath, 0o400)
	res.Manifest = m
	plan.AfterStep(ArchiveStepManifest)

	// 3. The new generation, beside the old file.
	sum := sha256.Sum256(mb)
	applied = append(applied, AppliedSegment{Manifest: name + manifestSuffix, ManifestSHA256: hex.EncodeToString(sum[:]),
		Segment: m.Segment, FirstGlobal: m.FirstGlobal, LastGlobal: m.LastGlobal, Records: m.Records})
	next := path + ".next"
	if err := writeGeneration(ctx, tx, next, heads, blocks, m.Segment, plan.DropMarks, applied, endTip, progress); err != nil {
		_ = os.Remove(next)
		return fail(fmt.Errorf("new generation: %w", err))
	}
	plan.AfterStep(ArchiveStepGeneration)

	// 4. The swap: the old file keeps a second name, the new one takes
	// its place in one rename.
	_ = tx.Rollback()
	if err := old.Close(); err != nil {
		return fail(err)
	}
	if res.Aside, err = linkAside(path, "pre-archive", plan.Now().UTC()); err != nil {
		return fail(err)
	}
	if err := os.Rename(next, path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fail(err)
	}
	plan.AfterStep(ArchiveStepSwapped)
	return res, nil
}

// removeLeftovers deletes the manifests (then segments) in dir that the
// hot file does not name: an interrupted run's, whose records are still
// hot.
func removeLeftovers(dir string, applied []AppliedSegment) ([]string, error) {
	keep := map[string]bool{}
	for _, a := range applied {
		keep[a.Manifest], keep[a.Segment] = true, true
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, suffix := range []string{manifestSuffix, segmentSuffix} {
		for _, e := range entries {
			n := e.Name()
			if !keep[n] && (strings.HasSuffix(n, suffix) || strings.HasPrefix(n, ".") && strings.Contains(n, suffix+".tmp-")) {
				if err := os.Remove(filepath.Join(dir, n)); err != nil {
					return removed, err
				}
				removed = append(removed, n)
			}
		}
	}
	if len(removed) > 0 {
		return removed, syncDir(dir)
	}
	return nil, nil
}

// linkAside gives the file at path a second name, path.WHAT-TIME (with
// -2, -3, ... when taken), by a hard link that never replaces a file.
func linkAside(path, what string, at time.Time) (string, error) {
	base := path + "." + what + "-" + at.Format("20060102T150405Z")
	name := base
	for n := 2; ; n++ {
		err := os.Link(path, name)
		if err == nil {
			return name, nil
		}
		if !errors.Is(err, fs.ErrExist) || n > 1000 {
			return "", fmt.Errorf("keep %s aside: %w", path, err)
		}
		name = fmt.Sprintf("%s-%d", base, n)
	}
}

// generationBatch is the most keys copied in one transaction of the new
// generation, so its dirty pages stay bounded.
const generationBatch = 50000

// writeGeneration writes to next (fsynced) the file tx reads, without the
// streams of heads, with them in the archived bucket, and with meta
// "archive" = applied.
func writeGeneration(ctx context.Context, tx *bolt.Tx, next string, heads map[string]uint64, blocks map[string][]int64, segment string, dropMarks []string, applied []AppliedSegment, end tip, progress func(string, uint64)) error {
	ndb, err := bolt.Open(next, 0o600, &bolt.Options{NoSync: true})
	if err != nil {
		return err
	}
	defer ndb.Close()
	drop := make(map[string]bool, len(dropMarks))
	for _, k := range dropMarks {
		drop[k] = true
	}
	moving := func(stream []byte) bool { _, ok := heads[string(stream)]; return ok }
	var names [][]byte
	if err := tx.ForEach(func(name []byte, _ *bolt.Bucket) error {
		names = append(names, slices.Clone(name))
		return nil
	}); err != nil {
		return err
	}
	var copied uint64
	for _, name := range names {
		src := tx.Bucket(name)
		keep := func(k, v []byte) bool { return true }
		switch {
		case bytes.Equal(name, bucketLog):
			keep = func(k, v []byte) bool {
				r, err := decodeRecordData(binary.BigEndian.Uint64(k), v, false)
				return err != nil || !moving([]byte(r.Stream))
			}
		case bytes.Equal(name, bucketHeads):
			keep = func(k, _ []byte) bool { return !moving(k) }
		case bytes.Equal(name, bucketStreams):
			keep = func(k, _ []byte) bool {
				s, _, ok := parseStreamKey(k)
				return !ok || !moving([]byte(s))
			}
		case bytes.Equal(name, bucketMarks):
			keep = func(k, _ []byte) bool { return !drop[string(k)] }
		}
		c := src.Cursor()
		k, v := c.First()
		for k != nil {
			err := ndb.Update(func(ntx *bolt.Tx) error {
				dst, err := ntx.CreateBucketIfNotExists(name)
				if err != nil {
					return err
				}
				if bytes.Equal(name, bucketLog) {
					dst.FillPercent = 1.0
				}
				for n := 0; k != nil && n < generationBatch; k, v = c.Next() {
					if v == nil {
						return fmt.Errorf("%w: nested bucket %q in %q", ErrCorrupt, k, name)
					}
					if !keep(k, v) {
						continue
					}
					if err := dst.Put(slices.Clone(k), slices.Clone(v)); err != nil {
						return err
					}
					n++
				}
				return nil
			})
			if err != nil {
				return err
			}
			copied += generationBatch
			progress("generation", copied)
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		err := ndb.Update(func(ntx *bolt.Tx) error {
			dst, err := ntx.CreateBucketIfNotExists(name)
			if err != nil {
				return err
			}
			return dst.SetSequence(src.Sequence())
		})
		if err != nil {
			return err
		}
	}
	// The archived streams go in in key order and in batches: bbolt keeps a
	// node's keys sorted in memory until the commit splits it, so keys in
	// a map's order made each Put shift the keys before it, quadratic in
	// the streams (500,000 of them took more than ten minutes).
	archived := slices.Sorted(maps.Keys(heads))
	for len(archived) > 0 {
		batch := archived[:min(len(archived), generationBatch)]
		archived = archived[len(batch):]
		err := ndb.Update(func(ntx *bolt.Tx) error {
			ab, err := ntx.CreateBucketIfNotExists(bucketArchived)
			if err != nil {
				return err
			}
			for _, s := range batch {
				if err := ab.Put([]byte(s), archivedValue(heads[s], segment, blocks[s])); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	err = ndb.Update(func(ntx *bolt.Tx) error {
		if _, err := ntx.CreateBucketIfNotExists(bucketArchived); err != nil {
			return err
		}
		meta := ntx.Bucket(bucketMeta)
		if meta == nil {
			return fmt.Errorf("%w: no meta bucket", ErrCorrupt)
		}
		v, err := json.Marshal(applied)
		if err != nil {
			return err
		}
		if err := meta.Put(metaArchiveKey, v); err != nil {
			return err
		}
		if err := meta.Put(metaArchiveTipKey, append(be64(end.global), end.hash[:]...)); err != nil {
			return err
		}
		f := make([]byte, 4)
		binary.BigEndian.PutUint32(f, archivedFileFormat)
		return meta.Put(metaFormatKey, f)
	})
	if err != nil {
		return err
	}
	if err := ndb.Sync(); err != nil {
		return err
	}
	if err := ndb.Close(); err != nil {
		return err
	}
	return syncDir(filepath.Dir(next))
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
