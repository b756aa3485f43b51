package journal_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/refundd/refundd/journal"
)

func ExampleDB_Append() {
	dir, err := os.MkdirTemp("", "journal-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)

	db, err := journal.Open(filepath.Join(dir, "refundd.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()

	// A new stream starts from Expected 0 and claims its refund number.
	last, err := db.Append(ctx, journal.AppendRequest{
		Stream: "reservation-42",
		Events: []journal.Event{{Type: "refund.requested", Version: 1, Data: []byte(`{"amount_fen":1500}`)}},
		Claims: []journal.Claim{{Namespace: "refund_no", Key: "RF20250301001"}},
	})
	fmt.Println("appended up to seq", last, err)

	// A writer with a stale view is refused, and told the real head.
	_, err = db.Append(ctx, journal.AppendRequest{
		Stream: "reservation-42",
		Events: []journal.Event{{Type: "refund.requested", Version: 1}},
	})
	var se *journal.SequenceError
	fmt.Println("stale writer refused:", errors.As(err, &se), "head is", se.Actual)

	owner, _ := db.Lookup(ctx, "refund_no", "RF20250301001")
	recs, _ := db.Load(ctx, owner, 0)
	for _, r := range recs {
		fmt.Printf("%s #%d (global %d): %s v%d %s\n", r.Stream, r.Seq, r.Global, r.Type, r.Version, r.Data)
	}
	// Output:
	// appended up to seq 1 <nil>
	// stale writer refused: true head is 1
	// reservation-42 #1 (global 1): refund.requested v1 {"amount_fen":1500}
}
