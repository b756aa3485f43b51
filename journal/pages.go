package journal

// The page check. bbolt's tx.Check keeps a map of every reachable page
// (about 40 bytes a page): ~50 MiB at 10.8M events, past 512 MiB at 100M.
// checkPages checks the same properties of the file (docs/AUDIT.md) with
// two bitmaps of one bit per page (64 KiB per GiB of file at 4 KiB
// pages) and a stack as deep as the trees.
// It reads the file itself, page by page, at the committed meta: Check
// runs in bbolt's write transaction on a writable DB and on a read-only
// one nothing writes, so the file holds exactly what the transaction sees.
//
// The layout read here is bbolt's file format (version 2), which bbolt
// documents in its source and keeps stable across releases: a 16-byte page
// header (id, flags, count, overflow), two meta pages, a freelist page,
// branch elements (pos, ksize, pgid) and leaf elements (flags, pos, ksize,
// vsize) of 16 bytes each, and a bucket value of (root, sequence) followed,
// when root is 0, by an inline page.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/bits"
	"os"
)

const (
	pageHeaderSize = 16
	pageElemSize   = 16
	bucketHdrSize  = 16

	pageBranch   = 0x01
	pageLeaf     = 0x02
	pageMeta     = 0x04
	pageFreelist = 0x10

	leafBucket = 0x01

	boltMagic   = 0xED0CDAED
	boltVersion = 2
	noFreelist  = math.MaxUint64

	// maxTreeDepth bounds the descent: a B+tree of 4 KiB pages is a few
	// levels deep, and a corrupt file must not recurse without end.
	maxTreeDepth = 64
)

// bitmap is a set of page ids below the high-water mark.
type bitmap []uint64

func newBitmap(n uint64) bitmap { return make(bitmap, (n+63)/64) }

func (b bitmap) has(id uint64) bool { return b[id/64]&(1<<(id%64)) != 0 }
func (b bitmap) set(id uint64)      { b[id/64] |= 1 << (id % 64) }

// boltMeta is the part of a meta page the check needs.
type boltMeta struct {
	pageSize uint32
	root     uint64 // the root bucket's root page
	freelist uint64
	hwm      uint64 // pages below it belong to the file
	txid     uint64
}

// readMeta reads meta page n (0 or 1), which sits at n*pageSize; the
// page size is only known from page 0's meta, so page 1 is looked for at
// the size page 0 gives, or at 4096.
func readMeta(f io.ReaderAt, off int64) (boltMeta, error) {
	var buf [pageHeaderSize + 64]byte
	if _, err := f.ReadAt(buf[:], off); err != nil {
		return boltMeta{}, err
	}
	if flags := binary.LittleEndian.Uint16(buf[8:]); flags != pageMeta {
		return boltMeta{}, fmt.Errorf("flags %#x, not a meta page", flags)
	}
	m := buf[pageHeaderSize:]
	le := binary.LittleEndian
	if le.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, fmt.Errorf("bad magic")
	}
	if v := le.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("version %d, want %d", v, boltVersion)
	}
	h := fnv.New64a()
	h.Write(m[:56])
	if le.Uint64(m[56:]) != h.Sum64() {
		return boltMeta{}, fmt.Errorf("checksum mismatch")
	}
	return boltMeta{pageSize: le.Uint32(m[8:]), root: le.Uint64(m[16:]), freelist: le.Uint64(m[32:]),
		hwm: le.Uint64(m[40:]), txid: le.Uint64(m[48:])}, nil
}

// committedMeta returns the valid meta with the highest txid, as bbolt
// picks it when it opens the file.
func committedMeta(f io.ReaderAt) (boltMeta, error) {
	m0, err0 := readMeta(f, 0)
	size := int64(4096)
	if err0 == nil {
		size = int64(m0.pageSize)
	}
	m1, err1 := readMeta(f, size)
	switch {
	case err0 != nil && err1 != nil:
		return boltMeta{}, fmt.Errorf("meta pages: %v; %v", err0, err1)
	case err0 != nil:
		return m1, nil
	case err1 != nil || m0.txid > m1.txid:
		return m0, nil
	default:
		return m1, nil
	}
}

// pageChecker walks the trees from the root bucket, marking each page it
// reaches; report is called for each problem.
type pageChecker struct {
	f        io.ReaderAt
	meta     boltMeta
	reached  bitmap
	freed    bitmap
	report   func(msg string)
	mapped   []byte   // the file's pages below the high-water mark, if mapped
	bufs     [][]byte // without a mapping: one page buffer per depth of the walk
	maxKeys  [][]byte // per depth: the largest key of the subtree walked last
	path     []uint64 // the pages from the root to the one walked
	pages    uint64   // pages read
	problems int
}

func (c *pageChecker) add(format string, args ...any) {
	c.problems++
	c.report(fmt.Sprintf(format, args...))
}

// checkPages checks the page structure of the bbolt file at path, whose
// committed transaction is txid (see Check): every page below the
// high-water mark is reached from the root exactly once or is free, never
// both; pages are branches and leaves where the trees need them; keys
// ascend within each page and within the bounds their parents give.
func checkPages(path string, txid uint64, report func(msg string)) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	meta, err := committedMeta(f)
	if err != nil {
		report(err.Error())
		return nil
	}
	if meta.txid != txid {
		// The file moved on under the transaction: this cannot happen in the
		// write transaction or read-only, which is where Check calls it.
		return fmt.Errorf("journal: page check: the file's meta is at transaction %d, the check's at %d", meta.txid, txid)
	}
	if meta.pageSize < 1024 || meta.pageSize > 1<<20 || bits.OnesCount32(meta.pageSize) != 1 {
		report(fmt.Sprintf("meta: page size %d", meta.pageSize))
		return nil
	}
	if st, err := f.Stat(); err != nil {
		return err
	} else if max := uint64(st.Size()) / uint64(meta.pageSize); meta.hwm > max {
		report(fmt.Sprintf("meta: high-water mark %d is past the file's %d pages", meta.hwm, max))
		return nil
	}
	c := &pageChecker{f: f, meta: meta, reached: newBitmap(meta.hwm), freed: newBitmap(meta.hwm), report: report}
	// Read through a mapping where there is one: a read per page doubled
	// the check's time (BenchmarkCheckPages).
	m, unmap, err := mapFile(f, int64(meta.hwm)*int64(meta.pageSize))
	if err != nil {
		return fmt.Errorf("journal: page check: %w", err)
	}
	if unmap != nil {
		defer unmap()
		c.mapped = m
	}
	for _, id := range []uint64{0, 1} {
		c.reach(id, 0, nil)
	}
	if err := c.readFreelist(); err != nil {
		return err
	}
	if _, err := c.subtree(meta.root, nil, nil, 0); err != nil {
		return err
	}
	for id := uint64(0); id < meta.hwm && meta.freelist != noFreelist; id++ {
		// Without a synced freelist, bbolt takes every page it cannot
		// reach for free.
		if !c.reached.has(id) && !c.freed.has(id) {
			c.add("page %d: unreachable unfreed", id)
		}
	}
	return nil
}

// reach marks page id and its overflow pages reached, and reports
// pages past the high-water mark, reached twice, or free.
func (c *pageChecker) reach(id uint64, overflow uint32, stack []uint64) bool {
	if id >= c.meta.hwm || uint64(overflow) >= c.meta.hwm-id {
		c.add("page %d: out of bounds: %d (stack: %v)", id, c.meta.hwm, stack)
		return false
	}
	ok := true
	for i := uint64(0); i <= uint64(overflow); i++ {
		p := id + i
		if c.reached.has(p) {
			c.add("page %d: multiple references (stack: %v)", p, stack)
			ok = false
		}
		c.reached.set(p)
	}
	if c.freed.has(id) {
		c.add("page %d: reachable freed", id)
	}
	return ok
}

// read returns page id with its overflow, in the buffer of depth.
func (c *pageChecker) read(id uint64, depth int) ([]byte, error) {
	if c.mapped != nil {
		size := uint64(c.meta.pageSize)
		n := uint64(1)
		if of := binary.LittleEndian.Uint32(c.mapped[id*size+12:]); uint64(of) < c.meta.hwm-id {
			n += uint64(of)
		}
		c.pages++
		return c.mapped[id*size : (id+n)*size : (id+n)*size], nil
	}
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	size := int(c.meta.pageSize)
	buf := c.bufs[depth]
	if cap(buf) < size {
		buf = make([]byte, size)
	}
	buf = buf[:size]
	if _, err := c.f.ReadAt(buf, int64(id)*int64(size)); err != nil {
		return nil, fmt.Errorf("journal: page check: read page %d: %w", id, err)
	}
	if of := binary.LittleEndian.Uint32(buf[12:]); of > 0 && uint64(of) < c.meta.hwm-id {
		n := size * (int(of) + 1)
		if cap(buf) < n {
			buf = append(buf[:size:size], make([]byte, n-size)...)
		}
		buf = buf[:n]
		if _, err := c.f.ReadAt(buf[size:], int64(id+1)*int64(size)); err != nil {
			return nil, fmt.Errorf("journal: page check: read page %d: %w", id, err)
		}
	}
	c.bufs[depth] = buf
	c.pages++
	return buf, nil
}

func (c *pageChecker) readFreelist() error {
	id := c.meta.freelist
	if id == noFreelist {
		return nil // not synced: bbolt rebuilds it from the pages it cannot reach
	}
	if id >= c.meta.hwm {
		c.add("freelist page %d: out of bounds: %d", id, c.meta.hwm)
		return nil
	}
	p, err := c.read(id, 0)
	if err != nil {
		return err
	}
	hdr := pageHeader(p)
	c.reach(id, hdr.overflow, nil)
	if hdr.flags != pageFreelist {
		c.add("freelist page %d: flags %#x", id, hdr.flags)
		return nil
	}
	n, at := uint64(hdr.count), pageHeaderSize
	if n == 0xFFFF {
		n, at = binary.LittleEndian.Uint64(p[pageHeaderSize:]), pageHeaderSize+8
	}
	if n > uint64(len(p)-at)/8 {
		c.add("freelist page %d: %d ids do not fit", id, n)
		return nil
	}
	for i := range n {
		f := binary.LittleEndian.Uint64(p[at+8*int(i):])
		switch {
		case f >= c.meta.hwm:
			c.add("page %d: freed, out of bounds: %d", f, c.meta.hwm)
		case c.freed.has(f):
			c.add("page %d: already freed", f)
		default:
			c.freed.set(f)
		}
	}
	// The meta and freelist pages are reached before the free ids are
	// known: check them now.
	for _, r := range []uint64{0, 1, id} {
		if r < c.meta.hwm && c.freed.has(r) {
			c.add("page %d: reachable freed", r)
		}
	}
	return nil
}

type pageHdr struct {
	id       uint64
	flags    uint16
	count    uint16
	overflow uint32
}

func pageHeader(p []byte) pageHdr {
	le := binary.LittleEndian
	return pageHdr{id: le.Uint64(p), flags: le.Uint16(p[8:]), count: le.Uint16(p[10:]), overflow: le.Uint32(p[12:])}
}

// elem is one branch or leaf element, its key and value in the page.
type elem struct {
	flags      uint32
	key, value []byte
	child      uint64
}

// element decodes element i of page p (a branch or a leaf); ok is false
// when its key or value lies outside the page.
func element(p []byte, flags uint16, i int) (elem, bool) {
	le := binary.LittleEndian
	at := pageHeaderSize + i*pageElemSize
	e := p[at : at+pageElemSize]
	var pos, ksize, vsize uint64
	var out elem
	if flags == pageBranch {
		pos, ksize, out.child = uint64(le.Uint32(e)), uint64(le.Uint32(e[4:])), le.Uint64(e[8:])
	} else {
		out.flags, pos, ksize, vsize = le.Uint32(e), uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
	}
	start := uint64(at) + pos
	if start+ksize+vsize > uint64(len(p)) {
		return elem{}, false
	}
	out.key = p[start : start+ksize]
	out.value = p[start+ksize : start+ksize+vsize]
	return out, true
}

// subtree checks the B+tree rooted at page id: keys within [lo, hi)
// (nil: unbounded), and the buckets its leaves hold. It returns the
// largest key it holds, which bounds the next sibling's keys from below;
// the slice is valid until the next subtree at this depth ends.
func (c *pageChecker) subtree(id uint64, lo, hi []byte, depth int) ([]byte, error) {
	stack := c.path[:min(depth, len(c.path))]
	if depth >= maxTreeDepth {
		c.add("page %d: trees nested deeper than %d (stack: %v)", id, maxTreeDepth, stack)
		return nil, nil
	}
	if id >= c.meta.hwm {
		c.add("page %d: out of bounds: %d (stack: %v)", id, c.meta.hwm, stack)
		return nil, nil
	}
	p, err := c.read(id, depth)
	if err != nil {
		return nil, err
	}
	hdr := pageHeader(p)
	c.path = append(stack, id)
	stack = c.path
	if hdr.id != id {
		c.add("page %d: its header says page %d (stack: %v)", id, hdr.id, stack)
	}
	if !c.reach(id, hdr.overflow, stack) {
		return nil, nil // already walked, or outside the file: do not loop
	}
	if hdr.flags != pageBranch && hdr.flags != pageLeaf {
		c.add("page %d: invalid type: flags %#x (stack: %v)", id, hdr.flags, stack)
		return nil, nil
	}
	n := int(hdr.count)
	if pageHeaderSize+n*pageElemSize > len(p) {
		c.add("page %d: %d elements do not fit (stack: %v)", id, n, stack)
		return nil, nil
	}
	kind := "leaf"
	if hdr.flags == pageBranch {
		kind = "branch"
	}
	// Children and buckets are read at depth+1, so this page's buffer
	// stays valid while they are walked; only the key returned outlives it.
	prev := lo
	var last []byte
	for i := range n {
		e, ok := element(p, hdr.flags, i)
		if !ok {
			c.add("page %d: %s element %d lies outside the page (stack: %v)", id, kind, i, stack)
			return nil, nil
		}
		c.keyOrder(id, kind, i, e.key, prev, hi, stack)
		switch hdr.flags {
		case pageBranch:
			next := hi
			if i+1 < n {
				if ne, ok := element(p, hdr.flags, i+1); ok {
					next = ne.key
				}
			}
			max, err := c.subtree(e.child, e.key, next, depth+1)
			if err != nil {
				return nil, err
			}
			prev, last = max, max
		default:
			prev, last = e.key, e.key
			if e.flags&leafBucket != 0 {
				if err := c.bucket(id, i, e.value, depth+1); err != nil {
					return nil, err
				}
			}
		}
	}
	for len(c.maxKeys) <= depth {
		c.maxKeys = append(c.maxKeys, nil)
	}
	c.maxKeys[depth] = append(c.maxKeys[depth][:0], last...)
	return c.maxKeys[depth], nil
}

// keyOrder checks key i of a page against the key before it (for i = 0:
// the lower bound from the parent) and the parent's upper bound.
func (c *pageChecker) keyOrder(id uint64, kind string, i int, key, prev, hi []byte, stack []uint64) {
	switch cmp := bytes.Compare(prev, key); {
	case i == 0 && prev != nil && cmp > 0:
		c.add("page %d: the first key[0]=(hex)%x on the %s page is below its ancestor's key (hex)%x (stack: %v)", id, key, kind, prev, stack)
	case i > 0 && cmp >= 0:
		c.add("page %d: key[%d]=(hex)%x on the %s page is not above the key before it (hex)%x (stack: %v)", id, i, key, kind, prev, stack)
	}
	if hi != nil && bytes.Compare(key, hi) >= 0 {
		c.add("page %d: key[%d]=(hex)%x on the %s page is not below the next key in its ancestor (hex)%x (stack: %v)", id, i, key, kind, hi, stack)
	}
}

// bucket checks the bucket whose value is v: a root page, or an inline
// page (which bbolt does not check and holds no pages).
func (c *pageChecker) bucket(id uint64, i int, v []byte, depth int) error {
	if len(v) < bucketHdrSize {
		c.add("page %d: bucket value %d is %d bytes (stack: %v)", id, i, len(v), c.path[:depth])
		return nil
	}
	root := binary.LittleEndian.Uint64(v)
	if root == 0 {
		return nil
	}
	_, err := c.subtree(root, nil, nil, depth)
	return err
}
