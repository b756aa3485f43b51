package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"time"
)

// formatVersion is the version of the record encoding (first byte of every
// log value) that this build writes; files up to format 2 also used it as
// their layout version (fileFormat). It reads every version from format1
// up to it:
//
//	1  fields and CRC-32C
//	2  fields, the record's SHA-256 chain hash, CRC-32C
const formatVersion = 2

// fileFormat is the file layout version in meta "format". Format 3 added
// the index tail (index.go): the streams index and heads may lag the log
// up to meta "indexed", which a build reading only format 2 would take for
// the whole truth, so such a build must refuse the file. Format 4 added the
// counters (counters.go), which a build that does not keep them would leave
// behind the log. Format 5 added the mark tail (marktail.go): marks and
// counter changes may wait in the pending bucket, which a build of format 4
// would not see.
const fileFormat = 5

// format1 is the first record format, without a stored chain hash. Its
// records are still read, and their chain hash is computed.
const format1 = 1

// Limits checked before a request reaches the committer, so nothing inside
// the write transaction can fail on a bbolt size limit half way through a
// request.
const (
	maxStreamLen    = 128
	maxTypeLen      = 64
	maxNamespaceLen = 64
	maxKeyLen       = 1024
	maxDataLen      = 16 << 20

	// maxQueue caps the append queue's buffer (and the committer's
	// preallocation) so a huge Options.MaxBatch does not allocate up front.
	maxQueue = 4096
)

var (
	bucketMeta    = []byte("meta")
	bucketLog     = []byte("log")
	bucketHeads   = []byte("heads")
	bucketStreams = []byte("streams")
	bucketClaims  = []byte("claims")
	bucketDue     = []byte("due")
	bucketMarks   = []byte("marks")
	// bucketCheckpoints holds be64(global) -> JSON Checkpoint (checkpoint.go).
	bucketCheckpoints = []byte("checkpoints")

	metaFormatKey = []byte("format")
	// metaEpochKey holds be64(epoch): the refund-number epoch, raised by
	// each restore (restore.go). Absent means 0.
	metaEpochKey = []byte("epoch")
	// metaReconcileKey holds the JSON RestoreInfo of a restore whose
	// reconciliation has not been confirmed yet. Absent means none needed.
	metaReconcileKey = []byte("reconcile")
	// metaRestoreKey holds the JSON RestoreInfo of the last restore.
	metaRestoreKey = []byte("restore")
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func be64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// streamKey is the streams-bucket key: stream 0x00 be64(seq). The NUL
// separator (streams may not contain NUL) keeps one stream's keys
// contiguous and ordered by seq.
func streamKey(stream string, seq uint64) []byte {
	k := make([]byte, 0, len(stream)+9)
	k = append(k, stream...)
	k = append(k, 0)
	return binary.BigEndian.AppendUint64(k, seq)
}

// streamPrefix is the common prefix of every streams-bucket key of stream.
func streamPrefix(stream string) []byte {
	k := make([]byte, 0, len(stream)+1)
	k = append(k, stream...)
	return append(k, 0)
}

func parseStreamKey(k []byte) (stream string, seq uint64, ok bool) {
	if len(k) < 10 || k[len(k)-9] != 0 {
		return "", 0, false
	}
	return string(k[:len(k)-9]), binary.BigEndian.Uint64(k[len(k)-8:]), true
}

func claimKey(namespace, key string) []byte {
	k := make([]byte, 0, len(namespace)+1+len(key))
	k = append(k, namespace...)
	k = append(k, 0)
	return append(k, key...)
}

// dueNanos converts t to the due index's unsigned nanosecond clock. Only
// 1970..2262 is representable; big-endian order of negative values would
// be wrong, so they are refused rather than misordered.
func dueNanos(t time.Time) (uint64, bool) {
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, false
	}
	return uint64(t.UnixNano()), true
}

func dueKey(nanos uint64, stream, key string) []byte {
	k := make([]byte, 0, 8+len(stream)+1+len(key))
	k = binary.BigEndian.AppendUint64(k, nanos)
	k = append(k, stream...)
	k = append(k, 0)
	return append(k, key...)
}

func parseDueKey(k []byte) (Due, bool) {
	if len(k) < 10 {
		return Due{}, false
	}
	nanos := binary.BigEndian.Uint64(k[:8])
	if nanos > math.MaxInt64 {
		return Due{}, false
	}
	rest := k[8:]
	for i, c := range rest {
		if c == 0 {
			if i == 0 {
				return Due{}, false
			}
			return Due{
				At:     time.Unix(0, int64(nanos)).UTC(),
				Stream: string(rest[:i]),
				Key:    string(rest[i+1:]),
			}, true
		}
	}
	return Due{}, false
}

// appendRecord appends to dst the record in the current format (the bytes
// after dst's length), and returns the record's chain hash:
//
//	byte      format version (2)
//	uvarint   global
//	uvarint   len(stream), stream
//	uvarint   seq
//	uvarint   len(type), type
//	be16      version
//	uvarint   len(data), data
//	[32]byte  chain hash: ChainHash(prev, record)
//	be32      CRC-32C (Castagnoli) of all bytes before it
//
// Global is also the log key; keeping it in the bytes detects a value that
// ended up under the wrong key. The CRC catches disk damage; the chain hash
// catches deliberate changes (a recomputed CRC does not hide them).
func appendRecord(dst []byte, global uint64, stream string, seq uint64, e Event, prev Hash) ([]byte, Hash) {
	h := chainHash(prev, global, stream, seq, e.Type, e.Version, e.Data)
	start := len(dst)
	b := slices.Grow(dst, 1+5*binary.MaxVarintLen64+len(stream)+len(e.Type)+2+len(e.Data)+len(h)+4)
	b = append(b, formatVersion)
	b = appendFields(b, global, stream, seq, e.Type, e.Version, e.Data)
	b = append(b, h[:]...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli)), h
}

// encodeRecordV1 is the format 1 encoding, kept so tests can write old
// records: the fields and the CRC, no chain hash.
func encodeRecordV1(global uint64, stream string, seq uint64, e Event) []byte {
	b := []byte{format1}
	b = appendFields(b, global, stream, seq, e.Type, e.Version, e.Data)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func appendFields(b []byte, global uint64, stream string, seq uint64, typ string, version uint16, data []byte) []byte {
	b = binary.AppendUvarint(b, global)
	b = binary.AppendUvarint(b, uint64(len(stream)))
	b = append(b, stream...)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(typ)))
	b = append(b, typ...)
	b = binary.BigEndian.AppendUint16(b, version)
	b = binary.AppendUvarint(b, uint64(len(data)))
	return append(b, data...)
}

// decodeRecord decodes a log value stored under global, in any format up
// to formatVersion. v is only valid inside the bbolt transaction, so
// everything returned is copied. A format 1 record has a zero Hash: its
// chain hash is not stored, and needs the previous records to compute.
func decodeRecord(global uint64, v []byte) (Record, error) {
	return decodeRecordData(global, v, true)
}

// decodeRecordData is decodeRecord; with copyData false the Record's Data
// aliases v (valid only while v's transaction is open), which spares a copy
// of every record to a check that only hashes it.
func decodeRecordData(global uint64, v []byte, copyData bool) (Record, error) {
	corrupt := func(why string) error {
		return fmt.Errorf("%w: record global %d: %s", ErrCorrupt, global, why)
	}
	if len(v) == 0 {
		return Record{}, corrupt("empty value")
	}
	format := v[0]
	if format > formatVersion {
		return Record{}, fmt.Errorf("%w: record global %d has format %d, this build reads up to %d",
			ErrFormatTooNew, global, format, formatVersion)
	}
	if format == 0 {
		return Record{}, corrupt("format byte 0")
	}
	if len(v) < 5 {
		return Record{}, corrupt("truncated")
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Record{}, corrupt(fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got))
	}
	fields := body[1:]
	var h Hash
	if format >= 2 {
		if len(fields) < len(h) {
			return Record{}, corrupt("truncated")
		}
		copy(h[:], fields[len(fields)-len(h):])
		fields = fields[:len(fields)-len(h)]
	}
	d := decoder{b: fields}
	g := d.uvarint()
	stream := d.bytes()
	seq := d.uvarint()
	typ := d.bytes()
	ver := d.uint16()
	data := d.bytes()
	if d.bad || len(d.b) != 0 {
		return Record{}, corrupt("malformed fields")
	}
	if g != global {
		return Record{}, corrupt(fmt.Sprintf("stored under global %d but encodes global %d", global, g))
	}
	if copyData {
		data = append([]byte{}, data...)
	}
	return Record{
		Global:  g,
		Stream:  string(stream),
		Seq:     seq,
		Type:    string(typ),
		Version: ver,
		Data:    data,
		Hash:    h,
		Format:  format,
	}, nil
}

// decoder reads fields from a byte slice; the first short read sets bad and
// every later read returns zero values.
type decoder struct {
	b   []byte
	bad bool
}

func (d *decoder) uvarint() uint64 {
	if d.bad {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.bad || n > uint64(len(d.b)) {
		d.bad = true
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) uint16() uint16 {
	if d.bad || len(d.b) < 2 {
		d.bad = true
		return 0
	}
	v := binary.BigEndian.Uint16(d.b)
	d.b = d.b[2:]
	return v
}

func crc32Castagnoli(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }
