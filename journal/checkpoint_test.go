package journal_test

import (
	"crypto/ed25519"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

func testKey() ed25519.PrivateKey {
	return ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
}

func appendN(t *testing.T, db *journal.DB, stream string, n int) {
	t.Helper()
	for range n {
		head, err := db.Head(bg, stream)
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, db, journal.AppendRequest{Stream: stream, Expected: head, Events: []journal.Event{ev("t", "x")}})
	}
}

func TestAppend_WritesCheckpoints(t *testing.T) {
	t.Run("every n records", func(t *testing.T) {
		db := journaltest.OpenWith(t, &journal.Options{NoSync: true, CheckpointEvery: 3, CheckpointInterval: -1})
		appendN(t, db, "s", 7)
		cps, err := db.Checkpoints(bg, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(cps) != 2 || cps[0].Global != 3 || cps[1].Global != 6 || cps[0].Signed() {
			t.Fatalf("checkpoints %+v, want unsigned ones at 3 and 6", cps)
		}
		if after, _ := db.Checkpoints(bg, 3, 0); len(after) != 1 || after[0].Global != 6 {
			t.Fatalf("Checkpoints after 3 = %+v", after)
		}
	})
	t.Run("after an interval", func(t *testing.T) {
		var now atomic.Int64
		now.Store(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano())
		clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
		db := journaltest.OpenWith(t, &journal.Options{NoSync: true, CheckpointEvery: -1, CheckpointInterval: time.Minute, Now: clock})
		appendN(t, db, "s", 3) // the first commit checkpoints (none before), the others are within the minute
		now.Add(int64(time.Minute))
		appendN(t, db, "s", 1)
		cps, _ := db.Checkpoints(bg, 0, 0)
		if len(cps) != 2 || cps[0].Global != 1 || cps[1].Global != 4 || !cps[1].Time.Equal(clock()) {
			t.Fatalf("checkpoints %+v, want at 1 and 4 (a minute later)", cps)
		}
	})
	t.Run("reopen continues the count", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "j.db")
		opts := &journal.Options{NoSync: true, CheckpointEvery: 3, CheckpointInterval: -1}
		db, err := journal.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		appendN(t, db, "s", 4)
		db.Close()
		db, err = journal.Open(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		appendN(t, db, "s", 2)
		cps, _ := db.Checkpoints(bg, 0, 0)
		if len(cps) != 2 || cps[1].Global != 6 {
			t.Fatalf("checkpoints %+v, want at 3 and 6", cps)
		}
	})
}

func TestCheckpoint_Signed(t *testing.T) {
	key := testKey()
	pub := key.Public().(ed25519.PublicKey)
	db := journaltest.OpenWith(t, &journal.Options{NoSync: true, SigningKey: key, CheckpointEvery: 2, CheckpointInterval: -1})
	appendN(t, db, "s", 3)
	cp, ok, err := db.LastCheckpoint(bg)
	if err != nil || !ok || cp.Global != 2 {
		t.Fatalf("LastCheckpoint = %+v %v %v", cp, ok, err)
	}
	if err := cp.VerifySignature(pub); err != nil {
		t.Fatalf("stored checkpoint: %v", err)
	}
	head, err := db.ChainHead(bg)
	if err != nil || head.Global != 3 {
		t.Fatalf("ChainHead = %+v, %v", head, err)
	}
	if err := head.VerifySignature(pub); err != nil {
		t.Fatalf("head: %v", err)
	}
	written, err := db.WriteCheckpoint(bg)
	if err != nil || written.Global != 3 || written.Hash != head.Hash || written.VerifySignature(pub) != nil {
		t.Fatalf("WriteCheckpoint = %+v, %v", written, err)
	}
	if last, _, _ := db.LastCheckpoint(bg); last.Global != 3 {
		t.Fatalf("last checkpoint %d after WriteCheckpoint, want 3", last.Global)
	}

	other := ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)
	tests := []struct {
		name   string
		change func(c *journal.Checkpoint)
		pub    ed25519.PublicKey
	}{
		{"other key", func(*journal.Checkpoint) {}, other},
		{"changed hash", func(c *journal.Checkpoint) { c.Hash[0] ^= 1 }, pub},
		{"changed global", func(c *journal.Checkpoint) { c.Global++ }, pub},
		{"changed time", func(c *journal.Checkpoint) { c.Time = c.Time.Add(time.Nanosecond) }, pub},
		{"unsigned", func(c *journal.Checkpoint) { c.Signature = nil }, pub},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := head
			c.Signature = append([]byte{}, head.Signature...)
			tt.change(&c)
			if err := c.VerifySignature(tt.pub); !errors.Is(err, journal.ErrSignature) {
				t.Fatalf("VerifySignature = %v, want ErrSignature", err)
			}
		})
	}
}

func TestCheckpoint_Message(t *testing.T) {
	c := journal.Checkpoint{Global: 12, Time: time.Date(2026, 3, 1, 2, 0, 0, 5, time.FixedZone("CST", 8*3600))}
	c.Hash[31] = 0xab
	want := "refundd journal checkpoint v1\nglobal: 12\nhash: " +
		"00000000000000000000000000000000000000000000000000000000000000ab\ntime: 2026-02-28T18:00:00.000000005Z\n"
	if got := string(c.Message()); got != want {
		t.Fatalf("Message =\n%s\nwant\n%s", got, want)
	}
	h, err := journal.ParseHash(c.Hash.String())
	if err != nil || h != c.Hash {
		t.Fatalf("ParseHash round trip: %v", err)
	}
	if _, err := journal.ParseHash("xyz"); !errors.Is(err, journal.ErrInvalid) {
		t.Fatalf("ParseHash(bad) = %v", err)
	}
}

func TestCheckpoint_ClockSteppedBack(t *testing.T) {
	var now atomic.Int64
	now.Store(time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()).UTC() }
	db := journaltest.OpenWith(t, &journal.Options{NoSync: true, CheckpointEvery: 1, CheckpointInterval: -1, Now: clock})
	appendN(t, db, "s", 1)
	now.Add(-int64(time.Hour))
	appendN(t, db, "s", 1)
	if _, err := db.WriteCheckpoint(bg); err != nil {
		t.Fatal(err)
	}
	cps, _ := db.Checkpoints(bg, 0, 0)
	if len(cps) != 2 || cps[1].Time.Before(cps[0].Time) {
		t.Fatalf("checkpoints %+v: times must not go backwards", cps)
	}
	if err := db.Verify(bg); err != nil {
		t.Fatalf("a clock step is not corruption: %v", err)
	}
}
