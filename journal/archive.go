package journal

import (
	"bufio"
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
	"hash"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Archival (docs/AUDIT.md, "Archival") moves whole streams that can never
// change again out of the hot file into sealed segments, keeping their
// records byte for byte, so that archive and hot file form one chain.
//
// A hot file that archived streams (file format 6) holds:
//
//	archived  stream -> be64(last seq) || segment file name
//	                    [ || 0x00 || blocks ]
//	meta      "archive" -> JSON []AppliedSegment, in the order applied
//
// and its log has gaps where the archived records were. blocks are the
// file offsets of the segment blocks that hold the stream's records, as
// uvarint deltas in increasing order: a read of the stream decompresses
// those blocks, not the segment up to it. An entry without them (written
// before blocks) is read by walking the segment.

// archivedFileFormat is the file format of a hot file with archived
// streams: a build that reads up to format 5 (fileFormat) would take the
// log's gaps for lost records and append to archived streams, so it must
// refuse it.
const archivedFileFormat = fileFormat + 1

var (
	bucketArchived = []byte("archived")
	metaArchiveKey = []byte("archive")
	// metaArchiveTipKey holds be64(global) || hash: the chain's end when
	// the generation was written, for a log whose last records left.
	metaArchiveTipKey = []byte("archive-tip")
)

// segmentMagic starts every segment's decompressed bytes.
const segmentMagic = "refundd archive segment 1\n"

// manifestDomain starts every signed manifest message.
const manifestDomain = "refundd archive manifest v1\n"

// frameLast flags the last record of its stream in a segment frame.
const frameLast = 1

// segmentBlockBytes is the decompressed size after which a segment's
// writer ends a block (a gzip member) at the next frame. A read of one
// archived stream decompresses one block per record at most, so smaller
// blocks read faster; each block restarts deflate's dictionary, so
// smaller blocks compress worse. docs/BENCHMARKS.md, "Reading an archived
// reservation", measured the choice.
const segmentBlockBytes = 64 << 10

// ErrArchived is returned by Append for a stream that was archived: it can
// never change again. The error is an *ArchivedError.
var ErrArchived = errors.New("journal: stream archived")

// ArchivedError says the stream was moved to an archive segment.
type ArchivedError struct {
	Stream  string
	Segment string
}

func (e *ArchivedError) Error() string {
	return fmt.Sprintf("journal: stream %q is archived (segment %s): it can no longer change", e.Stream, e.Segment)
}

// Unwrap lets errors.Is(err, ErrArchived) succeed.
func (e *ArchivedError) Unwrap() error { return ErrArchived }

// Manifest describes one archive segment. It is written beside the segment
// and signed with the checkpoint key.
type Manifest struct {
	Version       int    `json:"version"`
	Segment       string `json:"segment"`
	SegmentSHA256 string `json:"segment_sha256"`
	SegmentBytes  int64  `json:"segment_bytes"`
	// Period is the UTC month of the run's cut-off, YYYY-MM.
	Period      string `json:"period"`
	FirstGlobal uint64 `json:"first_global"`
	LastGlobal  uint64 `json:"last_global"`
	Records     uint64 `json:"records"`
	Streams     uint64 `json:"reservations"`
	// RecordsDigest is SHA-256 over the chain hashes of the records, in
	// order.
	RecordsDigest Hash `json:"records_digest"`
	// Head is the journal's chain head when the segment was cut.
	Head struct {
		Global uint64 `json:"global"`
		Hash   Hash   `json:"hash"`
	} `json:"head"`
	// Totals are the caller's counts and sums of what was archived (the
	// journal does not know what the events mean).
	Totals    map[string]int64 `json:"totals,omitempty"`
	Previous  string           `json:"previous,omitempty"`
	Cutoff    time.Time        `json:"cutoff"`
	CreatedAt time.Time        `json:"created_at"`
	KeyID     string           `json:"key_id,omitempty"`
	Signature []byte           `json:"signature,omitempty"`
}

// Message returns the bytes signed: the domain line, then the manifest's
// JSON without KeyID and Signature.
func (m Manifest) Message() []byte {
	m.KeyID, m.Signature = "", nil
	b, _ := json.Marshal(m) // a struct of plain fields always marshals
	return append([]byte(manifestDomain), b...)
}

// Sign signs the manifest with key.
func (m *Manifest) Sign(key ed25519.PrivateKey) {
	m.KeyID = KeyID(key.Public().(ed25519.PublicKey))
	m.Signature = ed25519.Sign(key, m.Message())
}

// VerifySignature checks the manifest's signature against pub.
func (m Manifest) VerifySignature(pub ed25519.PublicKey) error {
	switch {
	case len(m.Signature) == 0:
		return fmt.Errorf("%w: manifest of %s is not signed", ErrSignature, m.Segment)
	case m.KeyID != KeyID(pub):
		return fmt.Errorf("%w: manifest of %s is signed by key %s, not %s", ErrSignature, m.Segment, m.KeyID, KeyID(pub))
	case !ed25519.Verify(pub, m.Message(), m.Signature):
		return fmt.Errorf("%w: manifest of %s: signature does not verify", ErrSignature, m.Segment)
	}
	return nil
}

// AppliedSegment is one segment a hot file takes into account (meta
// "archive"): its manifest's file name and the SHA-256 of its bytes.
type AppliedSegment struct {
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
	Segment        string `json:"segment"`
	FirstGlobal    uint64 `json:"first_global"`
	LastGlobal     uint64 `json:"last_global"`
	Records        uint64 `json:"records"`
}

func appliedInTx(tx *bolt.Tx) ([]AppliedSegment, error) {
	v := tx.Bucket(bucketMeta).Get(metaArchiveKey)
	if v == nil {
		return nil, nil
	}
	var out []AppliedSegment
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("%w: meta archive: %v", ErrCorrupt, err)
	}
	return out, nil
}

// ArchivedSegments returns the segments the journal takes into account,
// in the order they were applied; none for a journal never archived.
func (db *DB) ArchivedSegments() ([]AppliedSegment, error) {
	var out []AppliedSegment
	err := db.bolt.View(func(tx *bolt.Tx) (err error) {
		out, err = appliedInTx(tx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("journal: archived segments: %w", err)
	}
	return out, nil
}

// ArchivedAt is where an archived stream's records are.
type ArchivedAt struct {
	Segment string
	// Head is the stream's last seq.
	Head uint64
	// Blocks are the file offsets of the segment's blocks that hold the
	// stream's records, increasing; none in an entry written before
	// blocks, whose stream is read by walking the segment.
	Blocks []int64
}

// ArchivedStream reports whether stream was archived, and where.
func (db *DB) ArchivedStream(stream string) (at ArchivedAt, ok bool, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		at, ok = archivedEntry(tx.Bucket(bucketArchived), stream)
		return nil
	})
	if err != nil {
		return ArchivedAt{}, false, fmt.Errorf("journal: archived stream: %w", err)
	}
	return at, ok, nil
}

// archivedEntry reads stream's entry in the archived bucket b. A block
// list that does not decode is left out (the stream is then read by
// walking its segment); verify reports it (decodeArchived).
func archivedEntry(b *bolt.Bucket, stream string) (at ArchivedAt, ok bool) {
	if b == nil {
		return ArchivedAt{}, false
	}
	v := b.Get([]byte(stream))
	if len(v) < 8 {
		return ArchivedAt{}, false
	}
	at, _ = decodeArchived(v)
	return at, true
}

// decodeArchived decodes an archived entry of at least 8 bytes; on an
// error in its block list, at has no Blocks.
func decodeArchived(v []byte) (at ArchivedAt, err error) {
	at.Head = binary.BigEndian.Uint64(v[:8])
	name, list, hasBlocks := bytes.Cut(v[8:], []byte{0})
	at.Segment = string(name)
	if !hasBlocks {
		return at, nil
	}
	var prev int64
	for len(list) > 0 {
		d, n := binary.Uvarint(list)
		if n <= 0 || d == 0 && len(at.Blocks) > 0 || d > math.MaxInt64-uint64(prev) {
			return ArchivedAt{Segment: at.Segment, Head: at.Head}, fmt.Errorf("%w: archived entry's block list does not decode", ErrCorrupt)
		}
		prev += int64(d)
		at.Blocks = append(at.Blocks, prev)
		list = list[n:]
	}
	return at, nil
}

// archivedValue encodes an archived entry.
func archivedValue(head uint64, segment string, blocks []int64) []byte {
	v := append(be64(head), segment...)
	if len(blocks) == 0 {
		return v
	}
	v = append(v, 0)
	var prev int64
	for _, b := range blocks {
		v = binary.AppendUvarint(v, uint64(b-prev))
		prev = b
	}
	return v
}

// LoadArchived returns the records of stream from its archive segment
// (in DB.ArchiveDir) when it was archived; archived is false, and nothing
// is read, for a stream that was not. It decompresses the blocks that
// hold the stream's records (the whole segment up to them for an entry
// without blocks).
func (db *DB) LoadArchived(ctx context.Context, stream string) (recs []Record, archived bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	at, ok, err := db.ArchivedStream(stream)
	if err != nil || !ok {
		return nil, false, err
	}
	recs, err = (&Archive{Dir: db.ArchiveDir()}).Load(stream, at)
	if err != nil {
		return nil, true, err
	}
	return recs, true, nil
}

// ForEachArchived calls fn with every archived stream, its last seq and
// its segment, in stream order.
func (db *DB) ForEachArchived(fn func(stream, segment string, head uint64) error) error {
	return db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketArchived)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(v) < 8 {
				return fmt.Errorf("%w: archived entry of %q is %d bytes", ErrCorrupt, k, len(v))
			}
			at, _ := decodeArchived(v)
			return fn(string(k), at.Segment, at.Head)
		})
	})
}

// SegmentReader reads one segment's records in global order.
//
// A segment is a sequence of gzip members ("blocks", see segmentBlockBytes):
// the header alone, then frames, a block ending only between two frames.
// The reader reads the members one at a time and knows the file offset
// where each starts (countingFile): Block says which one the
// last record came from, the offset the hot file's archived entry keeps.
// A segment written as one member (before blocks) reads the same way, all
// of it block 0.
type SegmentReader struct {
	file *countingFile
	src  *bufio.Reader
	gz   *gzip.Reader
	// member is the file offset of the gzip member gz reads; one is true
	// for a read of one block (openBlock), which ends with that member.
	member int64
	one    bool
	// buf[r:w] are decompressed bytes of the member at bufMember: a fill
	// never mixes two members, so a frame's first byte tells its block.
	buf       []byte
	r, w      int
	bufMember int64
	block     int64
	err       error
}

// countingFile counts the bytes read from the file. gzip reads through
// a bufio.Reader (an io.ByteReader, so it takes no byte past a member's
// end): the bytes consumed are those read less those buffered. Counting
// at the file rather than at each byte gzip takes keeps the walk as fast
// as without offsets (BenchmarkSegmentWalk).
type countingFile struct {
	f *os.File
	n int64
}

func (c *countingFile) Read(p []byte) (int, error) {
	n, err := c.f.Read(p)
	c.n += int64(n)
	return n, err
}

// OpenSegment opens the segment file at path and checks its header.
func OpenSegment(path string) (*SegmentReader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("journal: segment: %w", err)
	}
	cf := &countingFile{f: f}
	s := &SegmentReader{file: cf, src: bufio.NewReaderSize(cf, 1<<16), buf: make([]byte, 1<<16)}
	if s.gz, err = gzip.NewReader(s.src); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: segment %s: %w: %v", path, ErrCorrupt, err)
	}
	s.gz.Multistream(false)
	magic := make([]byte, len(segmentMagic))
	if err := s.readFull(magic); err != nil || string(magic) != segmentMagic {
		s.Close()
		return nil, fmt.Errorf("journal: segment %s: %w: not a segment (bad header)", path, ErrCorrupt)
	}
	return s, nil
}

// openBlock positions s at the block starting at file offset off: Next
// then returns that block's records and ends with it.
func (s *SegmentReader) openBlock(off int64) error {
	if _, err := s.file.f.Seek(off, io.SeekStart); err != nil {
		return err
	}
	s.src.Reset(s.file)
	s.file.n = off
	s.member, s.one, s.r, s.w, s.err = off, true, 0, 0, nil
	if err := s.gz.Reset(s.src); err != nil {
		return fmt.Errorf("%w: no block at offset %d: %v", ErrCorrupt, off, err)
	}
	s.gz.Multistream(false)
	return nil
}

// fill refills buf from the current member, or from the next one when it
// is done; io.EOF at the segment's (or the block's) end.
func (s *SegmentReader) fill() error {
	s.r, s.w = 0, 0
	for {
		n, err := s.gz.Read(s.buf)
		if n > 0 {
			// An io.EOF with bytes comes again on the next Read.
			s.w, s.bufMember = n, s.member
			return nil
		}
		if err != io.EOF {
			if err == nil {
				continue
			}
			return err
		}
		if s.one {
			return io.EOF
		}
		at := s.file.n - int64(s.src.Buffered())
		if err := s.gz.Reset(s.src); err != nil {
			return err // io.EOF: no member after this one
		}
		s.gz.Multistream(false)
		s.member = at
	}
}

func (s *SegmentReader) readByte() (byte, error) {
	if s.r == s.w {
		if err := s.fill(); err != nil {
			return 0, err
		}
	}
	b := s.buf[s.r]
	s.r++
	return b, nil
}

func (s *SegmentReader) readFull(p []byte) error {
	for len(p) > 0 {
		if s.r == s.w {
			if err := s.fill(); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return err
			}
		}
		n := copy(p, s.buf[s.r:s.w])
		s.r += n
		p = p[n:]
	}
	return nil
}

// Next returns the next record and whether it is its stream's last in the
// segment; ok is false at the end (Err says whether the end was clean).
func (s *SegmentReader) Next() (r Record, last, ok bool) {
	if s.err != nil {
		return Record{}, false, false
	}
	first, err := s.readByte()
	if err == io.EOF && s.one {
		s.err = io.EOF // a block ends between two frames
		return Record{}, false, false
	}
	if err != nil {
		s.err = fmt.Errorf("%w: segment truncated: %v", ErrCorrupt, err)
		return Record{}, false, false
	}
	s.block = s.bufMember
	n := uint64(first)
	if first >= 0x80 {
		s.r-- // let ReadUvarint read it again
		n, err = binary.ReadUvarint(byteReader{s})
		if err != nil {
			s.err = fmt.Errorf("%w: segment truncated: %v", ErrCorrupt, err)
			return Record{}, false, false
		}
	}
	if n == 0 {
		s.err = io.EOF
		return Record{}, false, false
	}
	if n > maxDataLen+4096 {
		s.err = fmt.Errorf("%w: segment frame of %d bytes", ErrCorrupt, n)
		return Record{}, false, false
	}
	buf := make([]byte, n+1)
	if err := s.readFull(buf); err != nil {
		s.err = fmt.Errorf("%w: segment truncated: %v", ErrCorrupt, err)
		return Record{}, false, false
	}
	flags, v := buf[0], buf[1:]
	// The global is the record's first field after its format byte.
	g, k := binary.Uvarint(v[min(1, len(v)):])
	if k <= 0 {
		s.err = fmt.Errorf("%w: segment record without a global", ErrCorrupt)
		return Record{}, false, false
	}
	r, err = decodeRecordData(g, v, false)
	if err != nil {
		s.err = err
		return Record{}, false, false
	}
	return r, flags&frameLast != 0, true
}

// Block returns the file offset of the block the last record Next
// returned came from.
func (s *SegmentReader) Block() int64 { return s.block }

type byteReader struct{ s *SegmentReader }

func (b byteReader) ReadByte() (byte, error) { return b.s.readByte() }

// Err returns nil after a clean end, else why reading stopped.
func (s *SegmentReader) Err() error {
	if s.err == io.EOF {
		return nil
	}
	return s.err
}

// Close closes the file.
func (s *SegmentReader) Close() error {
	s.gz.Close()
	return s.file.f.Close()
}

// Archive is the set of segments a hot file takes into account, read from
// its archive directory.
type Archive struct {
	Dir       string
	Applied   []AppliedSegment
	Manifests []Manifest
	// Pending are manifest files in Dir that the hot file does not name:
	// left over from an interrupted run (their records are still hot).
	Pending []string
}

// OpenArchive reads the manifests db names from dir, checking each file's
// SHA-256 against the one recorded in db. A journal never archived yields
// an empty Archive.
func OpenArchive(db *DB, dir string) (*Archive, error) {
	applied, err := db.ArchivedSegments()
	if err != nil {
		return nil, err
	}
	a := &Archive{Dir: dir, Applied: applied}
	named := map[string]bool{}
	for _, ap := range applied {
		named[ap.Manifest] = true
		b, err := os.ReadFile(filepath.Join(dir, ap.Manifest))
		if err != nil {
			return nil, fmt.Errorf("journal: archive: %w", err)
		}
		if sum := sha256.Sum256(b); hex.EncodeToString(sum[:]) != ap.ManifestSHA256 {
			return nil, fmt.Errorf("journal: archive: %w: manifest %s is not the one the journal applied (SHA-256 %x, recorded %s)",
				ErrCorrupt, ap.Manifest, sum, ap.ManifestSHA256)
		}
		var m Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, fmt.Errorf("journal: archive: %w: manifest %s: %v", ErrCorrupt, ap.Manifest, err)
		}
		a.Manifests = append(a.Manifests, m)
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("journal: archive: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), manifestSuffix) && !named[e.Name()] {
			a.Pending = append(a.Pending, e.Name())
		}
	}
	return a, nil
}

const (
	segmentSuffix  = ".seg"
	manifestSuffix = ".manifest.json"
)

// ArchiveDir is where the archive of the journal at path lives: DIR/archive
// for DIR/refundd.db, else path + ".archive".
func ArchiveDir(path string) string {
	if filepath.Base(path) == "refundd.db" {
		return filepath.Join(filepath.Dir(path), "archive")
	}
	return path + ".archive"
}

// ArchiveDir returns where the journal's archive segments are:
// Options.ArchiveDir, or beside the file (the package's ArchiveDir).
func (db *DB) ArchiveDir() string {
	if db.opts.ArchiveDir != "" {
		return db.opts.ArchiveDir
	}
	return ArchiveDir(db.path)
}

// merged reads every segment of the archive in global order.
type merged struct {
	readers []*SegmentReader
	heads   []Record
	lasts   []bool
	live    []bool
	names   []string
	blocks  []int64 // the block of each head
	// lastBlock is the block of the record next returned last.
	lastBlock int64
	// With tally set (Check from the start), next keeps what it returned
	// of each segment in tallies, for tallyProblems to compare with its
	// manifest once the walk has read everything; other readers skip it.
	tally     bool
	manifests []Manifest
	tallies   []segmentTally
}

// segmentTally is what a walk read of one segment: its records, the
// streams that ended in it, its first and last globals and the digest of
// its records' chain hashes, as its manifest states them.
type segmentTally struct {
	recs, streams, first, last uint64
	digest                     hash.Hash
}

func (t *segmentTally) add(r Record, end bool) {
	if t.digest == nil {
		t.digest = sha256.New()
	}
	if t.recs == 0 {
		t.first = r.Global
	}
	t.recs++
	t.last = r.Global
	if end {
		t.streams++
	}
	t.digest.Write(r.Hash[:])
}

// problem says how the tally differs from m, or "" when it does not.
func (t *segmentTally) problem(m Manifest) string {
	if t.digest == nil {
		t.digest = sha256.New()
	}
	var d Hash
	t.digest.Sum(d[:0])
	if t.recs != m.Records || t.streams != m.Streams || t.first != m.FirstGlobal || t.last != m.LastGlobal || d != m.RecordsDigest {
		return fmt.Sprintf("segment %s holds %d records of %d reservations, globals %d..%d, digest %s; its manifest says %d, %d, %d..%d, %s",
			m.Segment, t.recs, t.streams, t.first, t.last, d, m.Records, m.Streams, m.FirstGlobal, m.LastGlobal, m.RecordsDigest)
	}
	return ""
}

// tallyProblems compares what next returned of each segment with its
// manifest. Only a walk that read every record from the start (openAfter
// 0, to the end) may ask.
func (m *merged) tallyProblems() []string {
	var out []string
	for i := range m.readers {
		if p := m.tallies[i].problem(m.manifests[i]); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func (a *Archive) open() (*merged, error) { return a.openAfter(0) }

// openAfter is open without the segments whose records all come at or
// before global after (Check with Since skips them).
func (a *Archive) openAfter(after uint64) (*merged, error) {
	m := &merged{}
	for _, man := range a.Manifests {
		if after > 0 && man.LastGlobal <= after {
			continue
		}
		r, err := OpenSegment(filepath.Join(a.Dir, man.Segment))
		if err != nil {
			m.Close()
			return nil, err
		}
		m.readers = append(m.readers, r)
		m.names = append(m.names, man.Segment)
		m.manifests = append(m.manifests, man)
		m.tallies = append(m.tallies, segmentTally{})
		rec, last, ok := r.Next()
		m.heads = append(m.heads, rec)
		m.lasts = append(m.lasts, last)
		m.live = append(m.live, ok)
		m.blocks = append(m.blocks, r.Block())
	}
	return m, nil
}

// peek returns the index of the reader whose next record has the lowest
// global, -1 when all are done.
func (m *merged) peek() int {
	best := -1
	for i, ok := range m.live {
		if ok && (best < 0 || m.heads[i].Global < m.heads[best].Global) {
			best = i
		}
	}
	return best
}

// next returns the lowest record and advances its reader.
func (m *merged) next() (Record, bool, string, bool) {
	i := m.peek()
	if i < 0 {
		return Record{}, false, "", false
	}
	r, last := m.heads[i], m.lasts[i]
	if m.tally {
		m.tallies[i].add(r, last)
	}
	m.lastBlock = m.blocks[i]
	m.heads[i], m.lasts[i], m.live[i] = m.readers[i].Next()
	m.blocks[i] = m.readers[i].Block()
	return r, last, m.names[i], true
}

func (m *merged) err() error {
	for i, r := range m.readers {
		if err := r.Err(); err != nil {
			return fmt.Errorf("segment %s: %w", m.names[i], err)
		}
	}
	return nil
}

func (m *merged) Close() {
	for _, r := range m.readers {
		r.Close()
	}
}

// ArchiveIter reads every archived record in global order, one at a time.
type ArchiveIter struct{ m *merged }

// Iter starts reading the archive; Close the iterator.
func (a *Archive) Iter() (*ArchiveIter, error) {
	m, err := a.open()
	if err != nil {
		return nil, err
	}
	return &ArchiveIter{m: m}, nil
}

// Peek returns the global of the next record, ok false at the end.
func (it *ArchiveIter) Peek() (uint64, bool) {
	i := it.m.peek()
	if i < 0 {
		return 0, false
	}
	return it.m.heads[i].Global, true
}

// Next returns the next record (its Data valid until the next call) and
// whether it is its stream's last; ok is false at the end.
func (it *ArchiveIter) Next() (r Record, last, ok bool) {
	r, last, _, ok = it.m.next()
	return r, last, ok
}

// Err says why the iteration ended early, nil after a clean end.
func (it *ArchiveIter) Err() error {
	if err := it.m.err(); err != nil {
		return fmt.Errorf("journal: archive: %w", err)
	}
	return nil
}

// Close closes the segments.
func (it *ArchiveIter) Close() { it.m.Close() }

// Records calls fn with every archived record in global order, with
// whether it is its stream's last. fn's Record's Data is only valid during
// the call.
func (a *Archive) Records(fn func(r Record, last bool) error) error {
	m, err := a.open()
	if err != nil {
		return err
	}
	defer m.Close()
	for {
		r, last, _, ok := m.next()
		if !ok {
			break
		}
		if err := fn(r, last); err != nil {
			return err
		}
	}
	if err := m.err(); err != nil {
		return fmt.Errorf("journal: archive: %w", err)
	}
	return nil
}

// ForEachStream calls fn with every archived stream's records, whole, in
// the order their last records come. Memory is the streams begun and not
// ended in global order.
func (a *Archive) ForEachStream(fn func(StreamRecords) error) error {
	open := map[string][]Record{}
	err := a.Records(func(r Record, last bool) error {
		r.Data = append([]byte(nil), r.Data...)
		recs := append(open[r.Stream], r)
		if !last {
			open[r.Stream] = recs
			return nil
		}
		delete(open, r.Stream)
		return fn(StreamRecords{Stream: r.Stream, Records: recs, Archived: true})
	})
	if err != nil {
		return err
	}
	for s, recs := range open { // a stream without its last frame: Check reports it
		if err := fn(StreamRecords{Stream: s, Records: recs, Archived: true, Unreadable: 1}); err != nil {
			return err
		}
	}
	return nil
}

// Load returns stream's records from the segment at names
// (ArchivedStream). With at.Blocks it decompresses only those blocks;
// without, the segment from its start to the stream's last record. The
// records must run from seq 1 to at.Head, else the error is ErrCorrupt.
func (a *Archive) Load(stream string, at ArchivedAt) ([]Record, error) {
	r, err := OpenSegment(filepath.Join(a.Dir, at.Segment))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	recs := []Record{}
	collect := func() (done bool) {
		for {
			rec, last, ok := r.Next()
			if !ok {
				return false
			}
			if rec.Stream != stream {
				continue
			}
			rec.Data = append([]byte(nil), rec.Data...)
			recs = append(recs, rec)
			if last {
				return true
			}
		}
	}
	done := false
	if len(at.Blocks) == 0 {
		done = collect()
	}
	for i, off := range at.Blocks {
		if i > 0 && off <= at.Blocks[i-1] {
			return nil, fmt.Errorf("journal: archive %s: %w: blocks of stream %q out of order", at.Segment, ErrCorrupt, stream)
		}
		if err := r.openBlock(off); err != nil {
			return nil, fmt.Errorf("journal: archive %s: %w", at.Segment, err)
		}
		if done = collect(); done {
			break
		}
		if r.Err() != nil {
			break
		}
	}
	if err := r.Err(); err != nil {
		return nil, fmt.Errorf("journal: archive %s: %w", at.Segment, err)
	}
	for i, rec := range recs {
		if rec.Seq != uint64(i)+1 {
			return nil, fmt.Errorf("journal: archive %s: %w: stream %q has seq %d where %d belongs", at.Segment, ErrCorrupt, stream, rec.Seq, i+1)
		}
	}
	if !done || uint64(len(recs)) != at.Head {
		return nil, fmt.Errorf("journal: archive %s: %w: stream %q not found whole (%d of %d records)", at.Segment, ErrCorrupt, stream, len(recs), at.Head)
	}
	return recs, nil
}

// recordAt returns the archived record at global g; ok is false when no
// segment holds it. It reads the segment whose range covers g up to it.
func (a *Archive) recordAt(g uint64) (rec Record, ok bool, err error) {
	for _, man := range a.Manifests {
		if g < man.FirstGlobal || g > man.LastGlobal {
			continue
		}
		r, err := OpenSegment(filepath.Join(a.Dir, man.Segment))
		if err != nil {
			return Record{}, false, err
		}
		for {
			rec, _, more := r.Next()
			if !more || rec.Global > g {
				break
			}
			if rec.Global == g {
				rec.Data = append([]byte(nil), rec.Data...)
				r.Close()
				return rec, true, nil
			}
		}
		err = r.Err()
		r.Close()
		if err != nil {
			return Record{}, false, fmt.Errorf("journal: archive %s: %w", man.Segment, err)
		}
	}
	return Record{}, false, nil
}

// CheckManifests checks each applied manifest: its signature (with pub),
// its segment's bytes against its SHA-256, the records against its counts,
// range and digest, and the manifests' own chain. It reads every segment.
func (a *Archive) CheckManifests(pub ed25519.PublicKey) []Problem {
	return a.checkManifests(pub, 0, true)
}

// checkManifests is CheckManifests reading only the segments cut after
// global since (their manifest's head is later): those cut before were
// checked whole by the verification that reached since. Signatures and
// the manifests' chain are checked for all. Without records it leaves the
// counts, range and digest to the caller's walk of every record
// (merged.tallyProblems): Check's walk from the start reads them anyway,
// and one gzip pass less over the segments was a third of what they cost
// verify.
func (a *Archive) checkManifests(pub ed25519.PublicKey, since uint64, records bool) []Problem {
	var probs []Problem
	add := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		probs = append(probs, Problem{Kind: "archive", Message: msg, err: fmt.Errorf("%w: %s", ErrCorrupt, msg)})
	}
	prev := ""
	for i, m := range a.Manifests {
		ap := a.Applied[i]
		if pub != nil {
			if err := m.VerifySignature(pub); err != nil {
				msg := strings.TrimPrefix(err.Error(), ErrSignature.Error()+": ")
				probs = append(probs, Problem{Kind: "archive", Message: msg, err: fmt.Errorf("%w: %s", ErrSignature, msg)})
			}
		}
		if m.Previous != prev {
			add("manifest %s names previous manifest %q, the one applied before it is %q", ap.Manifest, m.Previous, prev)
		}
		prev = ap.ManifestSHA256
		if m.Segment != ap.Segment || m.FirstGlobal != ap.FirstGlobal || m.LastGlobal != ap.LastGlobal || m.Records != ap.Records {
			add("manifest %s does not say what the journal recorded when applying it", ap.Manifest)
		}
		if since > 0 && m.Head.Global <= since {
			continue
		}
		path := filepath.Join(a.Dir, m.Segment)
		f, err := os.Open(path)
		if err != nil {
			add("segment %s: %v", m.Segment, err)
			continue
		}
		h := sha256.New()
		n, err := io.Copy(h, f)
		f.Close()
		if err != nil {
			add("segment %s: %v", m.Segment, err)
			continue
		}
		if got := hex.EncodeToString(h.Sum(nil)); got != m.SegmentSHA256 || n != m.SegmentBytes {
			add("segment %s has SHA-256 %s and %d bytes, its manifest says %s and %d bytes", m.Segment, got, n, m.SegmentSHA256, m.SegmentBytes)
			continue
		}
		if !records {
			continue
		}
		r, err := OpenSegment(path)
		if err != nil {
			add("%v", err)
			continue
		}
		var t segmentTally
		for {
			rec, end, ok := r.Next()
			if !ok {
				break
			}
			t.add(rec, end)
		}
		if err := r.Err(); err != nil {
			add("segment %s: %v", m.Segment, err)
		}
		r.Close()
		if p := t.problem(m); p != "" {
			add("%s", p)
		}
	}
	return probs
}
