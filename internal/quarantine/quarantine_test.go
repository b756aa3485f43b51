package quarantine

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

func TestStore_KeepListReadAndReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	for i := range 3 {
		if err := s.Keep(Entry{At: at, Endpoint: "v3", Reason: "bad_signature", Body: []byte(fmt.Sprint("body", i))}); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := s.List(10)
	if len(list) != 3 || list[0].Reason != "bad_signature" {
		t.Fatalf("List = %+v", list)
	}
	e, err := s.Read(list[0].Name)
	if err != nil || string(e.Body) != "body2" {
		t.Fatalf("newest entry = %q, %v; want body2", e.Body, err)
	}
	s2, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, _ := s2.Stats(); n != 3 {
		t.Fatalf("reopened store has %d entries, want 3", n)
	}
	if err := s2.Keep(Entry{Reason: "x", Body: []byte("after")}); err != nil {
		t.Fatal(err)
	}
	list, _ = s2.List(1)
	if e, _ := s2.Read(list[0].Name); string(e.Body) != "after" {
		t.Fatalf("after reopen the newest entry is %q: sequence restarted?", e.Body)
	}
}

func TestStore_BoundsDropOldestFirst(t *testing.T) {
	s, err := Open(t.TempDir(), Options{MaxEntries: 5, MaxBody: 100})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		if err := s.Keep(Entry{Reason: "r", Body: []byte(fmt.Sprint(i))}); err != nil {
			t.Fatal(err)
		}
	}
	n, _, dropped := s.Stats()
	if n != 5 || dropped != 7 {
		t.Fatalf("entries %d dropped %d, want 5 and 7", n, dropped)
	}
	list, _ := s.List(10)
	if e, _ := s.Read(list[len(list)-1].Name); string(e.Body) != "7" {
		t.Fatalf("oldest kept = %q, want 7", e.Body)
	}
	if err := s.Keep(Entry{Reason: "big", Body: bytes.Repeat([]byte("a"), 1000)}); err != nil {
		t.Fatal(err)
	}
	list, _ = s.List(1)
	if e, _ := s.Read(list[0].Name); len(e.Body) != 100 {
		t.Fatalf("body kept at %d bytes, want truncated to 100", len(e.Body))
	}

	byBytes, _ := Open(t.TempDir(), Options{MaxBytes: 2000})
	for range 50 {
		_ = byBytes.Keep(Entry{Reason: "r", Body: bytes.Repeat([]byte("b"), 300)})
	}
	if _, total, dropped := byBytes.Stats(); total > 2000 || dropped == 0 {
		t.Fatalf("total %d dropped %d: byte bound not enforced", total, dropped)
	}
}

func TestStore_ReadRejectsPathTricks(t *testing.T) {
	s, _ := Open(t.TempDir(), Options{})
	for _, name := range []string{"../x.json", "/etc/passwd", ".hidden.json", "a/b.json", "x.txt"} {
		if _, err := s.Read(name); err == nil {
			t.Errorf("Read(%q) succeeded", name)
		}
	}
}
