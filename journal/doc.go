// Package journal is refundd's durable event journal, stored in a single
// bbolt file.
//
// Every decision of a reservation actor is appended here, and fsynced,
// before any reply or side effect. The package knows nothing about
// reservations: it stores opaque event bytes tagged with a type name and a
// schema version, in append-only streams.
//
// # Model
//
//   - A stream is a named, append-only sequence of records. Each record has
//     a per-stream sequence (Seq, 1-based, gap-free) and a global sequence
//     (Global, 1-based, gap-free across all streams).
//   - Append is optimistic: the caller states the Seq it believes is the
//     stream's last (AppendRequest.Expected) and the append fails with a
//     *SequenceError when it is wrong. A single writer per stream is thus
//     enforced by the data, not only by the actor system.
//   - Claims are unique keys (a refund number, an out_trade_no) owned by the
//     stream that first claimed them, written atomically with its events.
//     Lookup maps a key back to its stream.
//   - The due index holds (time, stream, key) entries, written atomically
//     with events, for timers that must survive restarts.
//
// A request that fails validation (wrong sequence, key taken, invalid)
// writes nothing at all, and does not affect other requests committed in
// the same transaction.
//
// # Layout
//
// A few large buckets, never one bucket per stream (bbolt copies whole
// pages per commit; one shared append-only bucket keeps that cost flat):
//
//	meta     "format" -> be32 format version
//	log      be64(global) -> encoded record (format byte, fields, CRC-32C)
//	heads    stream -> be64(last seq)
//	streams  stream 0x00 be64(seq) -> be64(global)
//	claims   namespace 0x00 key -> stream
//	due      be64(unix nanos) stream 0x00 key -> empty
//
// # Group commit
//
// One committer goroutine owns all appends. It takes the first queued
// request, then everything else already queued (up to Options.MaxBatch)
// without waiting, validates and writes them in one bbolt transaction,
// fsyncs once, and wakes every waiter with its own result. There is no timer:
// a lone writer pays one commit, and many writers share one.
//
// # Concurrency
//
// A DB is safe for concurrent use. Reads (Load, Head, Scan, ...) run in
// bbolt read transactions and see only committed appends. Only one process
// may open a file: a second Open fails with ErrLocked after
// Options.Timeout.
package journal
