package journal_test

import (
	"fmt"
	"time"

	"github.com/refundd/refundd/journal"
)

// The chain hash of the first record of a journal: anyone can recompute it
// from the record's fields (docs/AUDIT.md shows it without Go).
func ExampleChainHash() {
	r := journal.Record{Global: 1, Stream: "r1", Seq: 1, Type: "reservation.registered", Version: 1, Data: []byte(`{}`)}
	h := journal.ChainHash(journal.Hash{}, r)
	fmt.Println(h)
	// The next record chains onto it.
	fmt.Println(journal.ChainHash(h, journal.Record{Global: 2, Stream: "r1", Seq: 2, Type: "reservation.canceled", Version: 1}))
	// Output:
	// 0dc9c71b992dc9a1d649a0a7670174dd7b45ff4b7b80a52421cb7b919d0db69d
	// c50d503feb7815bd0f2fdba1dbc5c2a9387578b325ae885f15dfec4ad4e455f4
}

// What a checkpoint signature covers.
func ExampleCheckpoint_Message() {
	c := journal.Checkpoint{Global: 2, Time: time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)}
	fmt.Print(string(c.Message()))
	// Output:
	// refundd journal checkpoint v1
	// global: 2
	// hash: 0000000000000000000000000000000000000000000000000000000000000000
	// time: 2026-03-01T02:00:00Z
}
