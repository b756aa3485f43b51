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
// # Tamper evidence
//
// Every record carries its chain hash: SHA-256 over the previous record's
// chain hash (global order) and the record's canonical bytes (ChainHash).
// Changing, removing, inserting or reordering a record breaks the chain at
// that record, even if its CRC is recomputed; Check names the global where
// it breaks. A forger who recomputes every later hash too is caught by a
// head recorded outside the journal (ChainHead, CheckOptions.Heads), or by
// the stored checkpoints (global, hash, time) that appends write every
// Options.CheckpointEvery records or CheckpointInterval, Ed25519-signed
// when Options.SigningKey is set. docs/AUDIT.md is the auditor's guide.
//
// # Formats
//
// Format 1 records (fields, CRC) are still read; their chain hash is
// computed from the records before them. Format 2 records also store it.
// Opening a format 1 file for writing upgrades the file's format number;
// its records stay as they are. A file or record of a newer format is
// refused with ErrFormatTooNew. Committed fixtures of each format
// (testdata/) are read in tests.
//
// # Backups and restore
//
// Snapshot and BackupFile copy the live file consistently (bbolt
// Tx.WriteTo) while appends go on; Options.ReadOnly opens a copy or a
// stopped journal without changing a byte. Restore turns a backup into a
// journal with a new refund-number epoch (Epoch) and a pending
// reconciliation (ReconcileRequired): the restored journal has lost what
// happened after the backup.
//
// # Layout
//
// A few large buckets, never one bucket per stream (bbolt copies whole
// pages per commit; one shared append-only bucket keeps that cost flat):
//
//	meta         "format" -> be32 file format (5); "epoch" -> be64;
//	             "indexed" -> be64 index watermark (index.go);
//	             "marked" -> be64 mark watermark (marktail.go);
//	             "counted" -> be64: the counters cover every record (counters.go);
//	             "restore", "reconcile" -> JSON RestoreInfo
//	log          be64(global) -> encoded record (format byte, fields,
//	             chain hash, CRC-32C)
//	heads        stream -> be64(last seq)
//	streams      stream 0x00 be64(seq) -> be64(global)
//	claims       namespace 0x00 key -> stream
//	due          be64(unix nanos) stream 0x00 key -> empty
//	marks        key -> empty
//	checkpoints  be64(global) -> JSON Checkpoint
//	counters     key -> be64 running total
//	pending      be64(n) -> a bucket of one commit's marks and counter
//	             changes (key 0x00; a plain value in files from before
//	             2026-12-07), until a mark flush writes them to marks and
//	             counters (marktail.go)
//	kv           key -> value (kv.go; not part of the history)
//	archived     stream -> be64(last seq) segment name [0 block offsets]:
//	             streams moved to an archive segment, and the blocks of it
//	             that hold their records (archive.go; file format 6, with
//	             meta "archive", the segments applied, and "archive-tip")
//
// # Archival
//
// ArchiveStreams (offline) moves finished streams into a gzip segment that
// keeps their log values byte for byte, in blocks of about 64 KiB so that
// one stream is read without the rest (Archive.Load), with a manifest
// signed like the checkpoints, then replaces the file by a new generation
// without them (bbolt never shrinks a file). Check with CheckOptions.Archive walks
// segments and log as one chain; appends to an archived stream fail with
// ErrArchived; its claims stay. docs/AUDIT.md, "Archival".
//
// # Group commit
//
// One committer goroutine owns all appends. It takes the first queued
// request, then everything else already queued (up to Options.MaxBatch)
// without waiting, validates and writes them in one bbolt transaction,
// fsyncs once, and wakes every waiter with its own result. There is no timer:
// a lone writer pays one commit, and many writers share one. Before the
// drain it yields once, so that writers woken by the last commit can queue.
// The loop itself (queue, batching, dropping requests whose context ended,
// failing a batch whose commit panicked, the Committed signal, Close) is
// journal/internal/groupcommit, which pgjournal runs too; this package
// gives it the bbolt transaction and the index tail's idle flush.
//
// # Index tail
//
// The commit that acknowledges an append writes the log, claims, dues and
// one pending entry of its marks and counter changes; the streams index and heads of its records are written later, a
// stream's entries of many commits at once, riding in a later commit of
// appends (or in a transaction of their own when no append comes): a
// stream-keyed index dirties a page per stream per commit, the log does
// not. Until then the entries
// live in memory, and reads merge them. The log stays the only truth:
// "indexed" in meta says up to where the index is complete, and Open
// re-reads the log after it, so a crash loses nothing and boot reads only
// the unflushed tail (Options.IndexFlushEntries, IndexFlushDelay). Format 3
// files are refused by builds that predate the tail.
//
// # Mark tail
//
// Marks (list rows, attention keys) and counters are keyed by merchant and
// state, so with many merchants a commit dirtied a page per merchant. The
// commit writes them as one entry at the end of the pending bucket and keeps
// them in memory, where reads of marks and counters merge them; a later
// flush writes the whole tail in key order (Options.MarkFlushEntries,
// MarkFlushDelay) and records "marked". The pending bucket is durable with
// the commit, so Open reads it back and a crash loses nothing. Format 5
// files are refused by builds that predate it.
//
// # Concurrency
//
// A DB is safe for concurrent use. Reads (Load, Head, Scan, ...) run in
// bbolt read transactions and see only committed appends. Only one process
// may open a file for writing: a second Open fails with ErrLocked after
// Options.Timeout. Read-only opens share the file with each other, not
// with a writer.
package journal
