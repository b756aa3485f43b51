package journal_test

import (
	"context"
	"sync"
	"testing"

	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

func TestOptions_OnCommit(t *testing.T) {
	var mu sync.Mutex
	var got []journal.CommitInfo
	db := journaltest.OpenWith(t, &journal.Options{OnCommit: func(c journal.CommitInfo) {
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	}})
	for i := range 3 {
		if _, err := db.Append(context.Background(), journal.AppendRequest{Stream: "s", Expected: uint64(i),
			Events: []journal.Event{{Type: "t", Version: 1, Data: []byte("x")}}}); err != nil {
			t.Fatal(err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 3 {
		t.Fatalf("%d commits observed, want 3", len(got))
	}
	for _, c := range got {
		if c.Batch != 1 || c.Err != nil || c.Sync <= 0 || c.Duration < c.Sync {
			t.Fatalf("commit %+v", c)
		}
	}
}
