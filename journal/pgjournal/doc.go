// Package pgjournal is refundd's event journal in PostgreSQL, for cluster
// mode: several refundd nodes share one database, and each reservation
// (stream) is written by whichever node currently owns it.
//
// It has the same model and methods as the bbolt journal (package journal)
// for what the rest of refundd uses: streams of records with a per-stream
// Seq and a gap-free Global, optimistic appends (AppendRequest.Expected),
// unique claims, the due index, marks and the key-value area, the same
// request limits and errors (*journal.SequenceError, *journal.KeyTakenError,
// journal.ErrInvalid, journal.ErrNotFound, journal.ErrClosed), and the same
// SHA-256 chain hash (journal.ChainHash), so records of either backend
// verify the same way. What it adds is ownership: Activate and ErrFenced.
//
// # The single-writer argument
//
// Placement (protoactor-go's cluster) is best effort: during a partition,
// or for a moment after a node dies, one reservation can be live on two
// nodes. A lock inside one process protects nothing across processes, so
// the journal itself must refuse the second writer. It does so with a
// per-stream epoch in the streams table:
//
//  1. Activate(stream) runs one statement that increments the stream's
//     epoch (creating the row at epoch 1) and returns it; the DB remembers
//     it in a node-local map. The statement takes the stream row's lock, so
//     it waits for any transaction that holds that lock, that is for an
//     append of the previous owner that is in flight, and commits only
//     after it. The caller then loads the stream and sees that append.
//  2. Append captures the epoch the DB remembers for the stream when it is
//     called (a stream this DB never activated fails at once). The group
//     commit transaction locks the stream's row (SELECT ... FOR UPDATE),
//     compares both the head with AppendRequest.Expected and the row's
//     epoch with the captured one, and only if both match inserts the
//     events and moves the head, in the same transaction, before the row
//     lock is released by COMMIT.
//
// Take two nodes A and B that both believe they own a stream. Their epochs
// differ, because each Activate incremented the row, and at most one of
// them equals the row's epoch at any moment. An append of A is checked and
// written while A holds the row lock; B's Activate needs that lock, so it
// either committed before A's check (A sees the new epoch and writes
// nothing: ErrFenced) or starts after A's commit (B's Load sees A's events,
// and A's next append is fenced). There is no interleaving in which A
// writes under an epoch that is no longer current: every event row stores
// the epoch and node it was written under, every activation is recorded
// with the head it found (table activations), and Verify checks that each
// event lies between its epoch's activation and the next one.
//
// The head check alone already keeps a stream's Seq gap-free and forbids
// two writers from both succeeding on the same Expected; the epoch adds
// that a stale owner, whose in-memory state may be behind, cannot write
// even when its Expected happens to be right (for example after the new
// owner loaded but has not appended yet).
//
// # Global order
//
// A PostgreSQL sequence would give globals in allocation order, not commit
// order: a reader could see global N+1 before N commits, and skip N. So
// every commit locks one row, log_head (last global, last chain hash), first,
// takes the next globals from it, and writes it back. Commits of all nodes
// are thereby serialized, and one that holds the row becomes visible before
// the next one can lock it: a reader's snapshot always holds a gap-free
// prefix, and the chain hash is computed exactly as the bbolt journal does.
// The price is that commits do not overlap across nodes; each is one
// pipelined round trip to lock and read, one to write and commit.
//
// # Group commit
//
// One committer goroutine per DB (node) takes everything queued, up to
// Options.MaxBatch, without a timer (the bbolt journal's loop,
// journal/internal/groupcommit, without its yield before the drain), and
// commits it in one transaction: the lock and reads (log_head, the
// streams' rows, the claimed keys) in one pipelined round trip, then
// validation in Go in queue order (a request sees the heads and claims of
// earlier requests in the batch), then every accepted request's rows in a
// few unnest statements and COMMIT in a second round trip. A request that
// fails validation (fenced, sequence, key taken, invalid) writes nothing
// and does not affect the others; a failure of the transaction itself
// fails the whole batch, and if COMMIT's answer was lost the outcome is
// unknown: the caller stops and reloads the stream, as with the bbolt
// journal.
//
// # Tables
//
// Opening applies the versioned migrations (table schema_migrations) in
// Options.Schema under a transaction-level advisory lock, so nodes starting
// together are safe. Names and keys are bytea (byte order, like bbolt, and
// any bytes a Go string may hold):
//
//	log_head     one row: last_global, last_hash
//	streams      stream -> head, epoch, node (of the last activation)
//	activations  (stream, epoch) -> node, head when activated, time
//	events       global -> stream, seq, type, version, data, hash, epoch, node;
//	             unique (stream, seq)
//	claims       (namespace, key) -> stream
//	dues         (at in Unix nanoseconds, stream, key)
//	marks        key
//	kv           key -> value (not part of the history)
//	counters     key -> value (migration 2)
//	counters_state  one row: complete, generation
//
// # Liveness
//
// A node that stalls inside a commit holds log_head and stalls every node's
// commits; connections set idle_in_transaction_session_timeout
// (Options.IdleTxTimeout) so PostgreSQL ends such a session and its locks.
// Safety never depends on that timeout: an ended session's transaction
// rolls back.
//
// # Counters
//
// Like the bbolt journal, it keeps the running counters appends carry
// (AppendRequest.Counters: the totals, refunds by state and the per-hour
// refund totals of GET /v1/totals), summed per commit and upserted in the
// append's transaction (table counters); the log_head lock serializes
// them with every other commit, so Counters and CountersBetween read, in
// one snapshot, the counters of exactly the records they see. Migration 2
// added them: a schema that held records then has them only for what was
// appended since (counters_state.complete false, Counts.Complete false)
// until CompleteCounters adds what the earlier records count
// (eventstore.BackfillCounters, run by refundd at boot and safe while
// other nodes append). The journal contract (journaltest) checks both
// journals sum them the same way.
package pgjournal
