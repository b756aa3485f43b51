package journal

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Hash is a SHA-256 chain hash. Its text form is lower-case hex.
type Hash [sha256.Size]byte

// String returns the hash in hex.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// IsZero reports whether h is all zeros: the hash "before" the first record,
// and the Hash of a format 1 record (not stored).
func (h Hash) IsZero() bool { return h == Hash{} }

// MarshalText implements encoding.TextMarshaler (hex).
func (h Hash) MarshalText() ([]byte, error) { return []byte(h.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler (hex, either case).
func (h *Hash) UnmarshalText(b []byte) error {
	v, err := ParseHash(string(b))
	if err != nil {
		return err
	}
	*h = v
	return nil
}

// ParseHash parses 64 hex digits.
func ParseHash(s string) (Hash, error) {
	var h Hash
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("%w: hash must be %d hex digits", ErrInvalid, 2*len(h))
	}
	copy(h[:], b)
	return h, nil
}

// ChainHash returns the chain hash of r given the chain hash of the record
// before it in global order (the zero Hash before global 1):
//
//	SHA-256( prev[32]
//	       || be64(global) || be64(seq)
//	       || be32(len(stream)) || stream
//	       || be32(len(type))   || type
//	       || be16(version)
//	       || be32(len(data))   || data )
//
// The bytes hashed do not depend on the record's storage format, so the
// chain runs unchanged across format versions. They include the per-stream
// sequence, so a journal shared by several writers could chain per stream
// instead. docs/AUDIT.md shows how to recompute it without this package.
func ChainHash(prev Hash, r Record) Hash {
	return chainHash(prev, r.Global, r.Stream, r.Seq, r.Type, r.Version, r.Data)
}

func chainHash(prev Hash, global uint64, stream string, seq uint64, typ string, version uint16, data []byte) Hash {
	h := sha256.New()
	var buf [8]byte
	h.Write(prev[:])
	binary.BigEndian.PutUint64(buf[:], global)
	h.Write(buf[:8])
	binary.BigEndian.PutUint64(buf[:], seq)
	h.Write(buf[:8])
	writeLen := func(n int) {
		binary.BigEndian.PutUint32(buf[:4], uint32(n))
		h.Write(buf[:4])
	}
	writeLen(len(stream))
	h.Write([]byte(stream))
	writeLen(len(typ))
	h.Write([]byte(typ))
	binary.BigEndian.PutUint16(buf[:2], version)
	h.Write(buf[:2])
	writeLen(len(data))
	h.Write(data)
	var out Hash
	h.Sum(out[:0])
	return out
}

// tip is the chain's end: the last global and its chain hash.
type tip struct {
	global uint64
	hash   Hash
}

// tipInTx reads the chain's end from the log. A format 2 last record
// carries its hash; a format 1 one (a file written before the chain) needs
// the whole chain computed from global 1, once.
func tipInTx(tx *bolt.Tx) (tip, error) {
	logB := tx.Bucket(bucketLog)
	if logB == nil {
		return tip{}, fmt.Errorf("%w: missing log bucket", ErrCorrupt)
	}
	k, v := logB.Cursor().Last()
	if len(k) != 8 && k != nil {
		return tip{}, fmt.Errorf("%w: log key of %d bytes", ErrCorrupt, len(k))
	}
	if k == nil || binary.BigEndian.Uint64(k) != logB.Sequence() {
		// The last records were archived (archivemove.go): the chain's end
		// was recorded when they left.
		if at := tx.Bucket(bucketMeta).Get(metaArchiveTipKey); len(at) == 8+len(Hash{}) && binary.BigEndian.Uint64(at) == logB.Sequence() {
			var t tip
			t.global = binary.BigEndian.Uint64(at)
			copy(t.hash[:], at[8:])
			return t, nil
		}
		if k == nil {
			return tip{}, nil
		}
	}
	g := binary.BigEndian.Uint64(k)
	r, err := decodeRecord(g, v)
	if err != nil {
		return tip{}, err
	}
	if r.Format >= 2 {
		return tip{global: g, hash: r.Hash}, nil
	}
	var t tip
	c := logB.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		g := binary.BigEndian.Uint64(k)
		r, err := decodeRecord(g, v)
		if err != nil {
			return tip{}, err
		}
		h := ChainHash(t.hash, r)
		if r.Format >= 2 && r.Hash != h {
			return tip{}, fmt.Errorf("%w: global %d: chain hash mismatch", ErrCorrupt, g)
		}
		t = tip{global: g, hash: h}
	}
	return t, nil
}
