package journal

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

var bgCtx = context.Background()

// chainFixture writes five records over two streams, then a checkpoint at
// global 3 (CheckpointEvery 3), and closes the file.
func chainFixture(t *testing.T, key ed25519.PrivateKey) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := Open(path, &Options{NoSync: true, CheckpointEvery: 3, CheckpointInterval: -1, SigningKey: key})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range []string{"a", "b", "a", "b", "a"} {
		head, _ := db.Head(bgCtx, s)
		_, err := db.Append(bgCtx, AppendRequest{Stream: s, Expected: head,
			Events: []Event{{Type: "t", Version: 1, Data: []byte(fmt.Sprintf("event %d", i+1))}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// patch runs fn on the closed file with bbolt directly.
func patch(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	bdb, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := bdb.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := bdb.Close(); err != nil {
		t.Fatal(err)
	}
}

func readRec(t *testing.T, tx *bolt.Tx, g uint64) Record {
	t.Helper()
	r, err := decodeRecord(g, tx.Bucket(bucketLog).Get(be64(g)))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// rewrite stores r under global g in format 2 with the given stored hash,
// and a valid CRC: what someone who knows the format would write.
func rewrite(tx *bolt.Tx, g uint64, r Record, stored Hash) error {
	b := []byte{formatVersion}
	b = appendFields(b, g, r.Stream, r.Seq, r.Type, r.Version, r.Data)
	b = append(b, stored[:]...)
	b = binary.BigEndian.AppendUint32(b, crcOf(b))
	return tx.Bucket(bucketLog).Put(be64(g), b)
}

func crcOf(b []byte) uint32 { return crc32Castagnoli(b) }

func checkFile(t *testing.T, path string, opts *CheckOptions) CheckResult {
	t.Helper()
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.Check(bgCtx, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func hasProblem(res CheckResult, kind string, global uint64, text string) bool {
	for _, p := range res.Problems {
		if p.Kind == kind && p.Global == global && strings.Contains(p.Message, text) {
			return true
		}
	}
	return false
}

func TestChainHash_IndependentRecomputation(t *testing.T) {
	path := chainFixture(t, nil)
	db, err := Open(path, &Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	recs, err := db.Scan(bgCtx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The documented construction (docs/AUDIT.md), written out by hand.
	var prev [32]byte
	for _, r := range recs {
		var m []byte
		m = append(m, prev[:]...)
		m = binary.BigEndian.AppendUint64(m, r.Global)
		m = binary.BigEndian.AppendUint64(m, r.Seq)
		m = binary.BigEndian.AppendUint32(m, uint32(len(r.Stream)))
		m = append(m, r.Stream...)
		m = binary.BigEndian.AppendUint32(m, uint32(len(r.Type)))
		m = append(m, r.Type...)
		m = binary.BigEndian.AppendUint16(m, r.Version)
		m = binary.BigEndian.AppendUint32(m, uint32(len(r.Data)))
		m = append(m, r.Data...)
		prev = sha256.Sum256(m)
		if Hash(prev) != r.Hash || r.Format != 2 {
			t.Fatalf("global %d: stored %s (format %d), recomputed %x", r.Global, r.Hash, r.Format, prev)
		}
	}
	head, err := db.ChainHead(bgCtx)
	if err != nil {
		t.Fatal(err)
	}
	if head.Global != 5 || head.Hash != Hash(prev) {
		t.Fatalf("ChainHead = %d %s, want 5 %x", head.Global, head.Hash, prev)
	}
}

func TestCheck_Tampering(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(t *testing.T, tx *bolt.Tx) error
		kind   string
		global uint64
		text   string
	}{
		{"flipped data byte", func(t *testing.T, tx *bolt.Tx) error {
			v := append([]byte{}, tx.Bucket(bucketLog).Get(be64(2))...)
			v[len(v)-40] ^= 0x01 // inside the data, before the hash and CRC
			return tx.Bucket(bucketLog).Put(be64(2), v)
		}, "record", 2, "checksum mismatch"},
		{"altered data with a recomputed CRC", func(t *testing.T, tx *bolt.Tx) error {
			r := readRec(t, tx, 2)
			r.Data = []byte("event X")
			return rewrite(tx, 2, r, r.Hash)
		}, "chain", 2, "chain hash mismatch"},
		{"deleted record", func(t *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketLog).Delete(be64(4))
		}, "sequence", 5, "global 5 follows 3"},
		{"deleted record breaks the chain", func(t *testing.T, tx *bolt.Tx) error {
			return tx.Bucket(bucketLog).Delete(be64(4))
		}, "chain", 5, "chain hash mismatch"},
		{"reordered records", func(t *testing.T, tx *bolt.Tx) error {
			// Records 4 and 5 swapped, each re-encoded under its new
			// global with a valid CRC and its own stored hash.
			r4, r5 := readRec(t, tx, 4), readRec(t, tx, 5)
			if err := rewrite(tx, 4, r5, r5.Hash); err != nil {
				return err
			}
			return rewrite(tx, 5, r4, r4.Hash)
		}, "chain", 4, "chain hash mismatch"},
		{"moved record", func(t *testing.T, tx *bolt.Tx) error {
			v := append([]byte{}, tx.Bucket(bucketLog).Get(be64(5))...)
			return tx.Bucket(bucketLog).Put(be64(4), v)
		}, "record", 4, "stored under global 4 but encodes global 5"},
		{"recomputed chain, checkpoint kept", func(t *testing.T, tx *bolt.Tx) error {
			recomputeFrom(t, tx, 2, []byte("event X"))
			return nil
		}, "checkpoint", 3, "records at or before global 3 were changed"},
		{"downgraded record", func(t *testing.T, tx *bolt.Tx) error {
			r := readRec(t, tx, 5)
			return tx.Bucket(bucketLog).Put(be64(5), encodeRecordV1(5, r.Stream, r.Seq, Event{Type: r.Type, Version: r.Version, Data: []byte("other")}))
		}, "chain", 5, "format 1 record after format 2"},
		{"truncated log", func(t *testing.T, tx *bolt.Tx) error {
			// The checkpoint at 3 stays; records 3..5 and their indexes go.
			for g := uint64(3); g <= 5; g++ {
				if err := tx.Bucket(bucketLog).Delete(be64(g)); err != nil {
					return err
				}
			}
			return tx.Bucket(bucketLog).SetSequence(2)
		}, "checkpoint", 3, "beyond the end of the log"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := chainFixture(t, nil)
			if res := checkFile(t, path, nil); !res.OK() {
				t.Fatalf("clean journal has problems: %v", res.Problems)
			}
			patch(t, path, func(tx *bolt.Tx) error { return tt.mutate(t, tx) })
			res := checkFile(t, path, nil)
			for _, p := range res.Problems {
				t.Logf("%s", p.Error())
			}
			if !hasProblem(res, tt.kind, tt.global, tt.text) {
				t.Fatalf("want a %s problem at global %d mentioning %q; got %+v", tt.kind, tt.global, tt.text, res.Problems)
			}
			// Verify reports one of them as an error.
			db, err := Open(path, &Options{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.Verify(bgCtx); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Verify: %v, want ErrCorrupt", err)
			}
		})
	}
}

// recomputeFrom replaces the data of record from, then rewrites the
// stored hash of it and of every later record so the chain holds
// together again: a forger who knows the format but cannot touch heads
// recorded elsewhere.
func recomputeFrom(t *testing.T, tx *bolt.Tx, from uint64, data []byte) Hash {
	t.Helper()
	prev := Hash{}
	if from > 1 {
		prev = readRec(t, tx, from-1).Hash
	}
	last := tx.Bucket(bucketLog).Sequence()
	for g := from; g <= last; g++ {
		r := readRec(t, tx, g)
		if g == from {
			r.Data = data
		}
		prev = ChainHash(prev, r)
		if err := rewrite(tx, g, r, prev); err != nil {
			t.Fatal(err)
		}
	}
	return prev
}

func TestCheck_RecomputedChain(t *testing.T) {
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)

	t.Run("unsigned checkpoints rewritten: only a recorded head catches it", func(t *testing.T) {
		path := chainFixture(t, nil)
		before := checkFile(t, path, nil).Head // recorded elsewhere by an auditor
		patch(t, path, func(tx *bolt.Tx) error {
			h := recomputeFrom(t, tx, 2, []byte("event X"))
			_ = h
			// Forge the stored checkpoint too.
			r3 := readRec(t, tx, 3)
			return putCheckpoint(tx, Checkpoint{Global: 3, Hash: r3.Hash, Time: time.Now()})
		})
		if res := checkFile(t, path, nil); !res.OK() {
			t.Fatalf("without a recorded head the forgery is consistent, but Check found %v", res.Problems)
		}
		res := checkFile(t, path, &CheckOptions{Heads: []Checkpoint{before}})
		if !hasProblem(res, "head", 5, "records at or before global 5 were changed") || res.HeadsMatched != 0 {
			t.Fatalf("recorded head not enforced: %+v", res)
		}
	})
	t.Run("signed checkpoint rewritten without the key", func(t *testing.T) {
		path := chainFixture(t, key)
		patch(t, path, func(tx *bolt.Tx) error {
			recomputeFrom(t, tx, 2, []byte("event X"))
			var cp Checkpoint
			v := tx.Bucket(bucketCheckpoints).Get(be64(3))
			cp, err := decodeCheckpoint(be64(3), v)
			if err != nil {
				return err
			}
			cp.Hash = readRec(t, tx, 3).Hash // the forger cannot re-sign
			return putCheckpoint(tx, cp)
		})
		res := checkFile(t, path, &CheckOptions{PublicKey: pub})
		if !hasProblem(res, "checkpoint", 3, "signature does not verify") {
			t.Fatalf("forged signed checkpoint not caught: %+v", res.Problems)
		}
		db, err := Open(path, &Options{ReadOnly: true, SigningKey: key})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Verify(bgCtx); !errors.Is(err, ErrSignature) {
			t.Fatalf("Verify = %v, want ErrSignature", err)
		}
	})
	t.Run("signature stripped", func(t *testing.T) {
		path := chainFixture(t, key)
		db, err := Open(path, &Options{SigningKey: key, NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := db.WriteCheckpoint(bgCtx); err != nil {
			t.Fatal(err)
		}
		db.Close()
		patch(t, path, func(tx *bolt.Tx) error {
			cp, err := decodeCheckpoint(be64(5), tx.Bucket(bucketCheckpoints).Get(be64(5)))
			if err != nil {
				return err
			}
			cp.KeyID, cp.Signature = "", nil
			return putCheckpoint(tx, cp)
		})
		res := checkFile(t, path, &CheckOptions{PublicKey: pub})
		if !hasProblem(res, "checkpoint", 5, "not signed, but an earlier one is") {
			t.Fatalf("stripped signature not caught: %+v", res.Problems)
		}
	})
}

func TestCheck_ReportsEveryProblem(t *testing.T) {
	path := chainFixture(t, nil)
	patch(t, path, func(tx *bolt.Tx) error {
		for _, g := range []uint64{2, 4} {
			v := append([]byte{}, tx.Bucket(bucketLog).Get(be64(g))...)
			v[len(v)-40] ^= 0x01
			if err := tx.Bucket(bucketLog).Put(be64(g), v); err != nil {
				return err
			}
		}
		return nil
	})
	res := checkFile(t, path, nil)
	if !hasProblem(res, "record", 2, "checksum") || !hasProblem(res, "record", 4, "checksum") {
		t.Fatalf("want both damaged records named, got %+v", res.Problems)
	}
	// The records between them still chain: no chain problem is invented.
	for _, p := range res.Problems {
		if p.Kind == "chain" {
			t.Fatalf("unexpected chain problem after resync: %+v", p)
		}
	}
}

func TestCheck_HeadsMatch(t *testing.T) {
	path := chainFixture(t, nil)
	res := checkFile(t, path, nil)
	mid := checkFile(t, path, nil).LastCheckpoint
	got := checkFile(t, path, &CheckOptions{Heads: []Checkpoint{res.Head, *mid, {}}})
	if !got.OK() || got.HeadsMatched != 3 {
		t.Fatalf("heads on the chain: %+v", got)
	}
	wrong := res.Head
	wrong.Hash[0] ^= 1
	got = checkFile(t, path, &CheckOptions{Heads: []Checkpoint{wrong, {Global: 9}}})
	if !hasProblem(got, "head", 5, "the chain says") || !hasProblem(got, "head", 9, "beyond the end") {
		t.Fatalf("bad heads: %+v", got.Problems)
	}
}

// BenchmarkChainHash is the chain's cost per appended record (a 1 KiB
// event): microseconds, against the millisecond fsync of a commit.
func BenchmarkChainHash(b *testing.B) {
	r := Record{Global: 12345, Stream: "reservation-12345", Seq: 7, Type: "refund.provider_result", Version: 1, Data: make([]byte, 1024)}
	var h Hash
	b.SetBytes(int64(len(r.Data)))
	for b.Loop() {
		h = ChainHash(h, r)
	}
}
