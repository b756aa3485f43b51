package journal_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

func TestKV_PutGetDeleteList(t *testing.T) {
	db := journaltest.Open(t)
	if _, err := db.Get(bg, "webhook/a/cursor"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("Get on a fresh file: %v, want ErrNotFound", err)
	}
	if got, err := db.List(bg, ""); err != nil || len(got) != 0 {
		t.Fatalf("List on a fresh file = %v, %v", got, err)
	}
	buf := []byte("7")
	if err := db.Put(bg, "webhook/a/cursor", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // the stored value must not alias the caller's buffer
	for _, kv := range []journal.KV{
		{Key: "webhook/b/cursor", Value: []byte("9")},
		{Key: "webhook/a/parked/2", Value: []byte{}},
		{Key: "webhookz", Value: []byte("other owner")},
	} {
		if err := db.Put(bg, kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	if v, err := db.Get(bg, "webhook/a/cursor"); err != nil || string(v) != "7" {
		t.Fatalf("Get = %q, %v; want 7", v, err)
	}
	if v, err := db.Get(bg, "webhook/a/parked/2"); err != nil || v == nil || len(v) != 0 {
		t.Fatalf("Get of an empty value = %q (nil %v), %v; want empty, not nil", v, v == nil, err)
	}

	tests := []struct {
		prefix string
		want   []string
	}{
		{"webhook/a/", []string{"webhook/a/cursor", "webhook/a/parked/2"}},
		{"webhook/", []string{"webhook/a/cursor", "webhook/a/parked/2", "webhook/b/cursor"}},
		{"", []string{"webhook/a/cursor", "webhook/a/parked/2", "webhook/b/cursor", "webhookz"}},
		{"nothing/", nil},
	}
	for _, tt := range tests {
		got, err := db.List(bg, tt.prefix)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, kv := range got {
			keys = append(keys, kv.Key)
		}
		if strings.Join(keys, ",") != strings.Join(tt.want, ",") {
			t.Errorf("List(%q) = %v, want %v", tt.prefix, keys, tt.want)
		}
	}

	if err := db.WriteKV(bg, []journal.KV{{Key: "webhook/a/cursor", Value: []byte("8")}},
		[]string{"webhook/a/parked/2", "never/there"}); err != nil {
		t.Fatal(err)
	}
	if v, _ := db.Get(bg, "webhook/a/cursor"); string(v) != "8" {
		t.Fatalf("after WriteKV cursor = %q, want 8", v)
	}
	if _, err := db.Get(bg, "webhook/a/parked/2"); !errors.Is(err, journal.ErrNotFound) {
		t.Fatalf("deleted key: %v, want ErrNotFound", err)
	}
	if err := db.Delete(bg, "webhookz"); err != nil {
		t.Fatal(err)
	}
	if got, _ := db.List(bg, ""); len(got) != 2 {
		t.Fatalf("after deletes List = %v, want 2 entries", got)
	}
}

func TestKV_PersistsAndVerifies(t *testing.T) {
	db := journaltest.Open(t)
	mustAppend(t, db, journal.AppendRequest{Stream: "r-1", Events: []journal.Event{ev("a", "1")}})
	if err := db.Put(bg, "webhook/a/cursor", []byte("1")); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, db, journal.AppendRequest{Stream: "r-1", Expected: 1, Events: []journal.Event{ev("b", "2")}})
	// Verify checks the log and its indexes; the kv area must not upset it.
	if err := db.Verify(bg); err != nil {
		t.Fatalf("Verify with a kv bucket: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	re, err := journal.Open(db.Path(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer re.Close()
	if v, err := re.Get(bg, "webhook/a/cursor"); err != nil || string(v) != "1" {
		t.Fatalf("after reopen Get = %q, %v", v, err)
	}
	if g, _ := re.LastGlobal(bg); g != 2 {
		t.Fatalf("after reopen last global = %d, want 2", g)
	}
	if err := re.Verify(bg); err != nil {
		t.Fatalf("Verify after reopen: %v", err)
	}
}

func TestKV_Invalid(t *testing.T) {
	db := journaltest.Open(t)
	tests := []struct {
		name string
		call func() error
	}{
		{"get empty key", func() error { _, err := db.Get(bg, ""); return err }},
		{"put empty key", func() error { return db.Put(bg, "", []byte("x")) }},
		{"put long key", func() error { return db.Put(bg, strings.Repeat("k", 1025), nil) }},
		{"put huge value", func() error { return db.Put(bg, "k", make([]byte, 1<<20+1)) }},
		{"delete empty key", func() error { return db.Delete(bg, "") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, journal.ErrInvalid) {
				t.Fatalf("err = %v, want ErrInvalid", err)
			}
		})
	}
	if got, _ := db.List(bg, ""); len(got) != 0 {
		t.Fatalf("invalid writes stored %v", got)
	}
}

func TestKV_Closed(t *testing.T) {
	db := journaltest.Open(t)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Put(bg, "k", []byte("v")); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Put after Close: %v, want ErrClosed", err)
	}
	if _, err := db.Get(bg, "k"); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("Get after Close: %v, want ErrClosed", err)
	}
	if _, err := db.List(bg, ""); !errors.Is(err, journal.ErrClosed) {
		t.Errorf("List after Close: %v, want ErrClosed", err)
	}
}

func TestWaitGlobal_AlreadyThere(t *testing.T) {
	db := journaltest.Open(t)
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("a", "")}})
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	if err := db.WaitGlobal(ctx, 0); err != nil {
		t.Fatalf("WaitGlobal(0) with one record: %v", err)
	}
}

func TestWaitGlobal_WakesOnAppend(t *testing.T) {
	db := journaltest.Open(t)
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("a", "")}})
	done := make(chan error, 1)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	go func() { done <- db.WaitGlobal(ctx, 1) }()
	select {
	case err := <-done:
		t.Fatalf("WaitGlobal(1) returned %v before a second record existed", err)
	default:
	}
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Expected: 1, Events: []journal.Event{ev("b", "")}})
	if err := <-done; err != nil {
		t.Fatalf("WaitGlobal after the append: %v", err)
	}
}

func TestWaitGlobal_Deadline(t *testing.T) {
	db := journaltest.Open(t)
	ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
	defer cancel()
	if err := db.WaitGlobal(ctx, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitGlobal on an empty journal: %v, want DeadlineExceeded", err)
	}
}

func TestWaitGlobal_Close(t *testing.T) {
	db := journaltest.Open(t)
	done := make(chan error, 1)
	go func() { done <- db.WaitGlobal(bg, 0) }()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, journal.ErrClosed) {
			t.Fatalf("WaitGlobal across Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitGlobal still blocked 10s after Close")
	}
}

func TestCommitted_ClosedByCommit(t *testing.T) {
	db := journaltest.Open(t)
	ch := db.Committed()
	select {
	case <-ch:
		t.Fatal("Committed channel closed before any commit")
	default:
	}
	mustAppend(t, db, journal.AppendRequest{Stream: "s", Events: []journal.Event{ev("a", "")}})
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("Committed channel still open after an append returned")
	}
	next := db.Committed()
	if next == ch {
		t.Fatal("Committed returned the already closed channel for the next commit")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	<-next           // closed by Close
	<-db.Committed() // and stays closed: nothing more will be committed
}
