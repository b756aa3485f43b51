package journal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"
)

// formatVersion is the version of both the file layout (meta "format") and
// the record encoding (first byte of every log value).
const formatVersion = 1

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

	metaFormatKey = []byte("format")
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

// encodeRecord returns a fresh buffer (bbolt keeps it until commit):
//
//	byte      format version
//	uvarint   global
//	uvarint   len(stream), stream
//	uvarint   seq
//	uvarint   len(type), type
//	be16      version
//	uvarint   len(data), data
//	be32      CRC-32C (Castagnoli) of all bytes before it
//
// Global is also the log key; keeping it in the bytes detects a value that
// ended up under the wrong key.
func encodeRecord(global uint64, stream string, seq uint64, e Event) []byte {
	n := 1 + 5*binary.MaxVarintLen64 + len(stream) + len(e.Type) + 2 + len(e.Data) + 4
	b := make([]byte, 0, n)
	b = append(b, formatVersion)
	b = binary.AppendUvarint(b, global)
	b = binary.AppendUvarint(b, uint64(len(stream)))
	b = append(b, stream...)
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, uint64(len(e.Type)))
	b = append(b, e.Type...)
	b = binary.BigEndian.AppendUint16(b, e.Version)
	b = binary.AppendUvarint(b, uint64(len(e.Data)))
	b = append(b, e.Data...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// decodeRecord decodes a log value stored under global. v is only valid
// inside the bbolt transaction, so everything returned is copied.
func decodeRecord(global uint64, v []byte) (Record, error) {
	corrupt := func(why string) error {
		return fmt.Errorf("%w: record global %d: %s", ErrCorrupt, global, why)
	}
	if len(v) == 0 {
		return Record{}, corrupt("empty value")
	}
	if v[0] > formatVersion {
		return Record{}, fmt.Errorf("%w: record global %d has format %d, this build reads up to %d",
			ErrFormatTooNew, global, v[0], formatVersion)
	}
	if v[0] == 0 {
		return Record{}, corrupt("format byte 0")
	}
	if len(v) < 5 {
		return Record{}, corrupt("truncated")
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return Record{}, corrupt(fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got))
	}
	d := decoder{b: body[1:]}
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
	return Record{
		Global:  g,
		Stream:  string(stream),
		Seq:     seq,
		Type:    string(typ),
		Version: ver,
		Data:    append([]byte{}, data...),
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
