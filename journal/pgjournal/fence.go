package pgjournal

import (
	"context"
	"fmt"
)

// Activate makes this DB the stream's owner: it increments the stream's
// epoch in the database (creating the stream at epoch 1), records the
// activation with the head it found, and remembers the epoch for this DB's
// appends. It waits for an append of the previous owner that is in flight
// (it needs the stream row's lock), so a Load after it sees every event
// written under an older epoch, and no append under an older epoch can
// succeed any more (ErrFenced).
//
// Call it before loading the stream to take it over (an actor's start);
// calling it again fences this DB's own appends issued before.
func (db *DB) Activate(ctx context.Context, stream string) (uint64, error) {
	if err := checkStream(stream); err != nil {
		return 0, fmt.Errorf("pgjournal: activate: %w", err)
	}
	if err := db.ready(ctx); err != nil {
		return 0, fmt.Errorf("pgjournal: activate %q: %w", stream, err)
	}
	var epoch int64
	err := db.pool.QueryRow(ctx, `
WITH s AS (
    INSERT INTO streams AS s (stream, head, epoch, node) VALUES ($1, 0, 1, $2)
    ON CONFLICT (stream) DO UPDATE SET epoch = s.epoch + 1, node = EXCLUDED.node
    RETURNING s.stream, s.epoch, s.head
)
INSERT INTO activations (stream, epoch, node, head) SELECT stream, epoch, $2, head FROM s
RETURNING epoch`, b(stream), db.opts.NodeID).Scan(&epoch)
	if err != nil {
		return 0, fmt.Errorf("pgjournal: activate %q: %w", stream, err)
	}
	e := uint64(epoch)
	db.epochMu.Lock()
	if e > db.epochs[stream] { // two Activates of this DB may finish out of order
		db.epochs[stream] = e
	}
	db.epochMu.Unlock()
	return e, nil
}

// ActiveEpoch returns the epoch this DB activated for stream, 0 if none. It may
// be stale: another node may have activated the stream since.
func (db *DB) ActiveEpoch(stream string) uint64 {
	db.epochMu.Lock()
	defer db.epochMu.Unlock()
	return db.epochs[stream]
}

// Release forgets this DB's epoch for stream (an actor that stops), so the
// node-local map does not grow with every stream ever activated. Later
// appends to the stream fail with ErrFenced until it is activated again.
func (db *DB) Release(stream string) {
	db.epochMu.Lock()
	delete(db.epochs, stream)
	db.epochMu.Unlock()
}
