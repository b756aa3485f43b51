package journal_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/journal"
)

// writeStreams appends n rounds of one event to each stream, interleaved,
// so archived and hot records alternate in the log.
func writeStreams(t *testing.T, db *journal.DB, streams []string, rounds int) {
	t.Helper()
	ctx := context.Background()
	for r := range rounds {
		for _, s := range streams {
			_, err := db.Append(ctx, journal.AppendRequest{Stream: s, Expected: uint64(r),
				Events: []journal.Event{{Type: "t", Version: 1, Data: []byte(fmt.Sprintf("%s-%d", s, r))}},
				Claims: []journal.Claim{{Namespace: "k", Key: s}}})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
}

func checkWith(t *testing.T, path string, pub ed25519.PublicKey, withArchive bool) journal.CheckResult {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opts := &journal.CheckOptions{PublicKey: pub}
	if withArchive {
		if opts.Archive, err = journal.OpenArchive(db, journal.ArchiveDir(path)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := db.Check(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestArchiveStreams_OneChain(t *testing.T) {
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(nil)
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{SigningKey: key, CheckpointEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	writeStreams(t, db, []string{"a", "b", "c", "d"}, 4)
	before, err := db.ChainHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// d holds the last record: the hot log then ends before its sequence.
	res, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{
		Streams: []string{"b", "d"}, Cutoff: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), SigningKey: key,
		Totals: map[string]int64{"reservations": 2}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Records != 8 || res.Manifest.Streams != 2 || res.Manifest.FirstGlobal != 2 || res.Manifest.LastGlobal != 16 {
		t.Fatalf("manifest %+v", res.Manifest)
	}
	if filepath.Base(res.SegmentPath) != "2026-01.seg" {
		t.Fatalf("segment %s", res.SegmentPath)
	}
	if _, err := os.Stat(res.Aside); err != nil {
		t.Fatalf("old generation not kept aside: %v", err)
	}

	if got := checkWith(t, path, pub, true); !got.OK() || got.Records != 16 || got.Archived != 8 || got.Head.Hash != before.Hash {
		t.Fatalf("archive + hot: %+v", got)
	}
	if got := checkWith(t, path, pub, false); got.OK() {
		t.Fatal("hot file alone checked OK despite its gaps")
	}

	db, err = journal.Open(path, &journal.Options{SigningKey: key, CheckpointEvery: 3})
	if err != nil {
		t.Fatal(err)
	}
	if recs, err := db.Load(ctx, "b", 0); err != nil || len(recs) != 0 {
		t.Fatalf("archived stream still hot: %d records, %v", len(recs), err)
	}
	if recs, err := db.Load(ctx, "c", 0); err != nil || len(recs) != 4 {
		t.Fatalf("hot stream: %d records, %v", len(recs), err)
	}
	_, err = db.Append(ctx, journal.AppendRequest{Stream: "b", Events: []journal.Event{{Type: "t", Version: 1}}})
	if !errors.Is(err, journal.ErrArchived) {
		t.Fatalf("append to an archived stream: %v", err)
	}
	_, err = db.Append(ctx, journal.AppendRequest{Stream: "x", Events: []journal.Event{{Type: "t", Version: 1}}, Claims: []journal.Claim{{Namespace: "k", Key: "b"}}})
	if !errors.Is(err, journal.ErrKeyTaken) {
		t.Fatalf("claim of an archived stream taken again: %v", err)
	}
	writeStreams(t, db, []string{"e"}, 2) // chained onto d's last record, which is archived
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if got := checkWith(t, path, pub, true); !got.OK() || got.LastGlobal != 18 {
		t.Fatalf("after appends: %+v", got)
	}

	a := openArchive(t, path)
	at, ok := archivedStream(t, path, "d")
	if !ok || at.Head != 4 || len(at.Blocks) == 0 {
		t.Fatalf("archived entry of d: %v %+v", ok, at)
	}
	recs, err := a.Load("d", at)
	if err != nil || len(recs) != 4 || string(recs[3].Data) != "d-3" || recs[3].Global != 16 {
		t.Fatalf("load from archive: %v %+v", err, recs)
	}
}

func openArchive(t *testing.T, path string) *journal.Archive {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := journal.OpenArchive(db, journal.ArchiveDir(path))
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func archivedStream(t *testing.T, path, stream string) (journal.ArchivedAt, bool) {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	at, ok, err := db.ArchivedStream(stream)
	if err != nil {
		t.Fatal(err)
	}
	return at, ok
}

// archived writes three rounds of streams to a new signed journal and
// archives those of them in move; it returns the file, the key and the
// archival's result.
func archived(t *testing.T, streams, move []string) (string, ed25519.PublicKey, ed25519.PrivateKey, journal.ArchiveResult) {
	t.Helper()
	pub, key, _ := ed25519.GenerateKey(nil)
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{SigningKey: key})
	if err != nil {
		t.Fatal(err)
	}
	writeStreams(t, db, streams, 3)
	db.Close()
	res, err := journal.ArchiveStreams(context.Background(), path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: move, Cutoff: time.Now(), SigningKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return path, pub, key, res
}

func TestArchiveStreams_TamperedSegment(t *testing.T) {
	path, pub, _, res := archived(t, []string{"a", "b"}, []string{"a"})
	if err := os.Chmod(res.SegmentPath, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(res.SegmentPath)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(res.SegmentPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	got := checkWith(t, path, pub, true)
	if got.OK() {
		t.Fatal("a changed segment checked OK")
	}
	// A manifest signed by another key is caught too.
	other, _, _ := ed25519.GenerateKey(nil)
	if got := checkWith(t, path, other, true); got.OK() {
		t.Fatal("signature of another key accepted")
	}
}

func TestArchiveStreams_Refused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeStreams(t, db, []string{"a"}, 1)
	_, err = db.Append(ctx, journal.AppendRequest{Stream: "due", Events: []journal.Event{{Type: "t", Version: 1}},
		Dues: []journal.Due{{At: time.Now(), Key: "r1"}}})
	if err != nil {
		t.Fatal(err)
	}
	// Held by a writer: refused, nothing written.
	if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: []string{"a"}, Timeout: 10 * time.Millisecond}); !errors.Is(err, journal.ErrLocked) {
		t.Fatalf("archive of a journal in use: %v", err)
	}
	db.Close()
	for _, s := range []string{"missing", "due"} {
		if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: []string{s}}); !errors.Is(err, journal.ErrInvalid) {
			t.Errorf("archive of %s: %v", s, err)
		}
	}
	if got := checkWith(t, path, nil, true); !got.OK() || got.Archived != 0 {
		t.Fatalf("after refusals: %+v", got)
	}
}

// TestArchive_Restore: a backup of a journal that archived streams
// restores with its archive, and the restored journal checks as one chain.
func TestArchive_Restore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "refundd.db")
	db, err := journal.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	writeStreams(t, db, []string{"a", "b", "c"}, 3)
	db.Close()
	if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: []string{"a", "c"}, Cutoff: time.Now()}); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), "refundd.db")
	// Without its archive the backup does not check: refused.
	if _, err := journal.Restore(ctx, path, dst, &journal.RestoreOptions{ArchiveDir: t.TempDir()}); err == nil {
		t.Fatal("restored without its archive")
	}
	if _, err := journal.Restore(ctx, path, dst, nil); err != nil {
		t.Fatal(err)
	}
	if got := checkWith(t, dst, nil, true); !got.OK() || got.Archived != 6 || got.Records != 9 {
		t.Fatalf("restored: %+v", got)
	}
}

// TestArchive_HotFileShrinks: the new generation holds only what stays
// hot, so the file is smaller than before (bbolt never shrinks one in
// place).
func TestArchive_HotFileShrinks(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "refundd.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	var streams []string
	for i := range 200 {
		streams = append(streams, fmt.Sprintf("s%03d", i))
	}
	data := make([]byte, 2048)
	for seq := range 3 {
		for _, s := range streams {
			if _, err := db.Append(ctx, journal.AppendRequest{Stream: s, Expected: uint64(seq), Events: []journal.Event{{Type: "t", Version: 1, Data: data}}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.Close()
	before, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{Streams: streams[:180], Cutoff: time.Now()}); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if after.Size() >= before.Size()/2 {
		t.Fatalf("hot file %d bytes after archiving 90%% of it, %d before", after.Size(), before.Size())
	}
	if got := checkWith(t, path, nil, true); !got.OK() || got.Archived != 540 {
		t.Fatalf("check: %+v", got)
	}
}

// TestArchiveStreams_ManifestCountsChecked: a manifest whose counts or
// digest disagree with its segment's records is reported by the full
// check, which tallies the records in its walk (no pass of its own), and
// by CheckManifests. The manifest here is re-signed and recorded again in
// the hot file, so only its contents are wrong.
func TestArchiveStreams_ManifestCountsChecked(t *testing.T) {
	path, pub, key, res := archived(t, []string{"a", "b", "c"}, []string{"a", "c"})
	if got := checkWith(t, path, pub, true); !got.OK() {
		t.Fatalf("archived journal: %v", got.Problems)
	}
	m := res.Manifest
	m.Streams++ // not among what the hot file records of it
	m.Sign(key)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(res.ManifestPath, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(res.ManifestPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	sum, err := journal.FileSHA256(res.ManifestPath)
	if err != nil {
		t.Fatal(err)
	}
	patchFile(t, path, func(tx *bolt.Tx) error {
		meta := tx.Bucket([]byte("meta"))
		var applied []journal.AppliedSegment
		if err := json.Unmarshal(meta.Get([]byte("archive")), &applied); err != nil {
			return err
		}
		applied[0].ManifestSHA256 = sum
		v, err := json.Marshal(applied)
		if err != nil {
			return err
		}
		return meta.Put([]byte("archive"), v)
	})
	const want = "its manifest says"
	got := checkWith(t, path, pub, true)
	if len(got.Problems) != 1 || !strings.Contains(got.Problems[0].Message, want) {
		t.Fatalf("Check: %v, want one problem saying %q", got.Problems, want)
	}
	if ps := openArchive(t, path).CheckManifests(pub); len(ps) != 1 || !strings.Contains(ps[0].Message, want) {
		t.Fatalf("CheckManifests: %v, want one problem saying %q", ps, want)
	}
}
