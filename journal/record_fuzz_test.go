package journal

import (
	"bytes"
	"errors"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary bytes to the record decoder, which reads
// whatever is in the file: it must never panic, must refuse anything it does
// not fully understand with ErrCorrupt or ErrFormatTooNew, and what it
// accepts must encode back to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	good, _ := encodeRecord(7, "res-1", 3, Event{Type: "refund.requested", Version: 1, Data: []byte(`{"amount":100}`)}, Hash{1})
	f.Add(uint64(7), good)
	f.Add(uint64(7), encodeRecordV1(7, "res-1", 3, Event{Type: "t", Version: 2, Data: nil}))
	f.Add(uint64(1), []byte{})
	f.Add(uint64(1), []byte{9, 1, 2})
	f.Add(uint64(7), good[:len(good)-5])
	f.Fuzz(func(t *testing.T, global uint64, v []byte) {
		r, err := decodeRecord(global, v)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrFormatTooNew) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if r.Global != global {
			t.Fatalf("accepted a record of global %d under key %d", r.Global, global)
		}
		e := Event{Type: r.Type, Version: r.Version, Data: r.Data}
		var again []byte
		if r.Format == format1 {
			again = encodeRecordV1(r.Global, r.Stream, r.Seq, e)
		} else {
			// The stored hash is opaque here (it needs the previous record):
			// compare everything before it, then the hash bytes themselves.
			again, _ = encodeRecord(r.Global, r.Stream, r.Seq, e, Hash{})
			n := len(again) - 4 - len(Hash{})
			if !bytes.Equal(again[:n], v[:n]) || !bytes.Equal(v[n:n+len(Hash{})], r.Hash[:]) {
				t.Fatalf("accepted bytes do not re-encode: %x", v)
			}
			return
		}
		if !bytes.Equal(again, v) {
			t.Fatalf("accepted format-1 bytes do not re-encode: %x vs %x", v, again)
		}
	})
}

// encodeRecord is the record in a buffer of its own, and its chain hash.
func encodeRecord(global uint64, stream string, seq uint64, e Event, prev Hash) ([]byte, Hash) {
	return appendRecord(nil, global, stream, seq, e, prev)
}
