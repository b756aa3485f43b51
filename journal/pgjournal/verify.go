package pgjournal

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal"
)

// Verify checks the whole journal in one consistent snapshot and returns
// an error wrapping journal.ErrCorrupt naming the first problem:
//
//   - globals run 1..N without a gap, N is log_head's, and every record's
//     chain hash is journal.ChainHash of the one before (log_head holds
//     the last);
//   - every stream's seqs run 1..head, head being the streams row's;
//   - every claim is owned by a stream with events;
//   - fencing: every event was written by the node that activated its
//     epoch, after that activation (seq > the head it found) and before the
//     next one (seq <= the head the next activation found), and the
//     stream's epoch is its last activation's.
//
// It reads every record: it is for tests, audits and tools, not for a
// node's hot path.
func (db *DB) Verify(ctx context.Context) error {
	if err := db.ready(ctx); err != nil {
		return fmt.Errorf("pgjournal: verify: %w", err)
	}
	tx, err := db.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fmt.Errorf("pgjournal: verify: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := verifyTx(ctx, tx); err != nil {
		return fmt.Errorf("pgjournal: verify: %w", err)
	}
	return nil
}

func verifyTx(ctx context.Context, tx pgx.Tx) error {
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{journal.ErrCorrupt}, args...)...)
	}
	var lastGlobal int64
	var lastHash []byte
	if err := tx.QueryRow(ctx, "SELECT last_global, last_hash FROM log_head").Scan(&lastGlobal, &lastHash); err != nil {
		return err
	}
	rows, err := tx.Query(ctx, "SELECT "+recordColumns+" FROM events ORDER BY global")
	if err != nil {
		return err
	}
	var prev journal.Hash
	var want uint64 = 1
	err = scanRecords(rows, func(r journal.Record) error {
		if r.Global != want {
			return corrupt("global %d follows %d", r.Global, want-1)
		}
		h := journal.ChainHash(prev, r)
		if h != r.Hash {
			return corrupt("global %d: chain hash mismatch", r.Global)
		}
		prev = h
		want++
		return nil
	})
	if err != nil {
		return err
	}
	if want-1 != uint64(lastGlobal) {
		return corrupt("log_head says global %d, the log ends at %d", lastGlobal, want-1)
	}
	if string(lastHash) != string(prev[:]) {
		return corrupt("log_head's hash is not the last record's")
	}

	var stream []byte
	var n int64
	err = tx.QueryRow(ctx, `
SELECT s.stream, coalesce(e.n, 0) FROM streams s
LEFT JOIN (SELECT stream, count(*) AS n, min(seq) AS lo, max(seq) AS hi FROM events GROUP BY stream) e USING (stream)
WHERE coalesce(e.n, 0) <> s.head OR coalesce(e.lo, 1) <> 1 OR coalesce(e.hi, 0) <> s.head
LIMIT 1`).Scan(&stream, &n)
	if err == nil {
		return corrupt("stream %q: %d events do not run 1..head", stream, n)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	err = tx.QueryRow(ctx, "SELECT e.stream FROM events e LEFT JOIN streams s USING (stream) WHERE s.stream IS NULL LIMIT 1").Scan(&stream)
	if err == nil {
		return corrupt("stream %q has events but no head", stream)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}

	var ns, key []byte
	err = tx.QueryRow(ctx, `SELECT c.namespace, c.key FROM claims c LEFT JOIN streams s USING (stream)
WHERE s.stream IS NULL OR s.head = 0 LIMIT 1`).Scan(&ns, &key)
	if err == nil {
		return corrupt("claim %q/%q is owned by a stream without events", ns, key)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}

	var seq, epoch int64
	err = tx.QueryRow(ctx, `
SELECT e.stream, e.seq, e.epoch FROM events e
LEFT JOIN activations a ON a.stream = e.stream AND a.epoch = e.epoch
LEFT JOIN activations nx ON nx.stream = e.stream AND nx.epoch = e.epoch + 1
WHERE a.stream IS NULL OR a.node <> e.node OR e.seq <= a.head OR (nx.stream IS NOT NULL AND e.seq > nx.head)
ORDER BY e.global LIMIT 1`).Scan(&stream, &seq, &epoch)
	if err == nil {
		return corrupt("stream %q seq %d was not written under the epoch current at the time (its epoch %d)", stream, seq, epoch)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	err = tx.QueryRow(ctx, `
SELECT s.stream FROM streams s
LEFT JOIN (SELECT stream, max(epoch) AS epoch, count(*) AS n FROM activations GROUP BY stream) a USING (stream)
WHERE a.epoch IS DISTINCT FROM s.epoch OR a.n <> s.epoch LIMIT 1`).Scan(&stream)
	if err == nil {
		return corrupt("stream %q: epoch does not match its activations", stream)
	} else if !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	return nil
}
