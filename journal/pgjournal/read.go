package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal"
)

// scanRecords reads rows of (global, stream, seq, type, version, data,
// hash) into records.
func scanRecords(rows pgx.Rows, each func(journal.Record) error) error {
	defer rows.Close()
	for rows.Next() {
		var g, seq int64
		var version int32
		var stream, typ, data, hash []byte
		if err := rows.Scan(&g, &stream, &seq, &typ, &version, &data, &hash); err != nil {
			return err
		}
		r := journal.Record{
			Global: uint64(g), Stream: string(stream), Seq: uint64(seq), Type: string(typ),
			Version: uint16(version), Data: data, Format: 2,
		}
		if len(hash) != len(r.Hash) {
			return fmt.Errorf("%w: global %d: hash of %d bytes", journal.ErrCorrupt, g, len(hash))
		}
		copy(r.Hash[:], hash)
		if err := each(r); err != nil {
			return err
		}
	}
	return rows.Err()
}

const recordColumns = "global, stream, seq, type, version, data, hash"

// Load returns the records of stream with Seq > afterSeq, in Seq order. An
// unknown stream yields an empty slice. A gap in the stream yields
// journal.ErrCorrupt. Load does not activate the stream.
func (db *DB) Load(ctx context.Context, stream string, afterSeq uint64) ([]journal.Record, error) {
	if err := checkStream(stream); err != nil {
		return nil, fmt.Errorf("pgjournal: load: %w", err)
	}
	recs := []journal.Record{}
	if afterSeq >= math.MaxInt64 {
		return recs, nil
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: load %q: %w", stream, err)
	}
	rows, err := db.pool.Query(ctx, "SELECT "+recordColumns+" FROM events WHERE stream = $1 AND seq > $2 ORDER BY seq",
		b(stream), int64(afterSeq))
	if err == nil {
		want := afterSeq + 1
		err = scanRecords(rows, func(r journal.Record) error {
			if r.Seq != want {
				return fmt.Errorf("%w: stream %q: seq %d follows %d", journal.ErrCorrupt, stream, r.Seq, want-1)
			}
			want++
			recs = append(recs, r)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: load %q: %w", stream, err)
	}
	return recs, nil
}

// Head returns the Seq of the stream's last record, 0 for an unknown or
// empty stream.
func (db *DB) Head(ctx context.Context, stream string) (uint64, error) {
	if err := checkStream(stream); err != nil {
		return 0, fmt.Errorf("pgjournal: head: %w", err)
	}
	if err := db.ready(ctx); err != nil {
		return 0, fmt.Errorf("pgjournal: head %q: %w", stream, err)
	}
	var head int64
	err := db.pool.QueryRow(ctx, "SELECT head FROM streams WHERE stream = $1", b(stream)).Scan(&head)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgjournal: head %q: %w", stream, err)
	}
	return uint64(head), nil
}

// Lookup returns the stream that owns key in namespace, or
// journal.ErrNotFound.
func (db *DB) Lookup(ctx context.Context, namespace, key string) (string, error) {
	if err := checkClaim(journal.Claim{Namespace: namespace, Key: key}); err != nil {
		return "", fmt.Errorf("pgjournal: lookup: %w", err)
	}
	if err := db.ready(ctx); err != nil {
		return "", fmt.Errorf("pgjournal: lookup %q/%q: %w", namespace, key, err)
	}
	var owner []byte
	err := db.pool.QueryRow(ctx, "SELECT stream FROM claims WHERE namespace = $1 AND key = $2", b(namespace), b(key)).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		err = journal.ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("pgjournal: lookup %q/%q: %w", namespace, key, err)
	}
	return string(owner), nil
}

// Scan returns up to limit records with Global > afterGlobal, in global
// order. limit <= 0 means no limit. Commits of all nodes become visible in
// global order, so a Scan never returns a global before every smaller one
// is visible.
func (db *DB) Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error) {
	recs := []journal.Record{}
	if afterGlobal >= math.MaxInt64 {
		return recs, nil
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: scan after %d: %w", afterGlobal, err)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := db.pool.Query(ctx, "SELECT "+recordColumns+" FROM events WHERE global > $1 ORDER BY global LIMIT $2",
		int64(afterGlobal), lim)
	if err == nil {
		want := afterGlobal + 1
		err = scanRecords(rows, func(r journal.Record) error {
			if r.Global != want {
				return fmt.Errorf("%w: global %d follows %d", journal.ErrCorrupt, r.Global, want-1)
			}
			want++
			recs = append(recs, r)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: scan after %d: %w", afterGlobal, err)
	}
	return recs, nil
}

// LastGlobal returns the Global of the last record, 0 if the journal is
// empty.
func (db *DB) LastGlobal(ctx context.Context) (uint64, error) {
	if err := db.ready(ctx); err != nil {
		return 0, fmt.Errorf("pgjournal: last global: %w", err)
	}
	var last int64
	if err := db.pool.QueryRow(ctx, "SELECT last_global FROM log_head").Scan(&last); err != nil {
		return 0, fmt.Errorf("pgjournal: last global: %w", err)
	}
	return uint64(last), nil
}

// waitPoll is how often WaitGlobal looks for other nodes' commits.
const waitPoll = 200 * time.Millisecond

// WaitGlobal returns nil as soon as the journal holds a record with Global
// > after (at once if it already does). This DB's own commits wake it at
// once; other nodes' commits are seen within 200ms. It returns ctx's error
// when ctx ends first, and journal.ErrClosed when the DB is closed.
func (db *DB) WaitGlobal(ctx context.Context, after uint64) error {
	t := time.NewTimer(waitPoll)
	defer t.Stop()
	for {
		ch, stopped := db.loop.Committed()
		last, err := db.LastGlobal(ctx)
		if err != nil {
			return err
		}
		if last > after {
			return nil
		}
		if stopped {
			return fmt.Errorf("pgjournal: wait after %d: %w", after, journal.ErrClosed)
		}
		t.Reset(waitPoll)
		select {
		case <-ch:
		case <-t.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// DueBefore returns up to limit due entries with At <= t, oldest first
// (ties ordered by stream, then key). limit <= 0 means no limit.
func (db *DB) DueBefore(ctx context.Context, t time.Time, limit int) ([]journal.Due, error) {
	dues := []journal.Due{}
	if t.Before(time.Unix(0, 0)) {
		return dues, nil
	}
	end, ok := dueNanos(t)
	if !ok { // after 2262: everything is due
		end = math.MaxInt64
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: due before %s: %w", t.UTC().Format(time.RFC3339Nano), err)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	rows, err := db.pool.Query(ctx, "SELECT at, stream, key FROM dues WHERE at <= $1 ORDER BY at, stream, key LIMIT $2", end, lim)
	if err == nil {
		defer rows.Close()
		for rows.Next() {
			var at int64
			var stream, key []byte
			if err = rows.Scan(&at, &stream, &key); err != nil {
				break
			}
			dues = append(dues, journal.Due{At: time.Unix(0, at).UTC(), Stream: string(stream), Key: string(key)})
		}
		if err == nil {
			err = rows.Err()
		}
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: due before %s: %w", t.UTC().Format(time.RFC3339Nano), err)
	}
	return dues, nil
}

// DeleteDue removes the given due entries in one transaction. Removing an
// entry that does not exist is not an error. It is not fenced: any node may
// remove a handled timer.
func (db *DB) DeleteDue(ctx context.Context, dues []journal.Due) error {
	var ats []int64
	var streams, keys [][]byte
	for _, d := range dues {
		if n, ok := dueNanos(d.At); ok { // an unrepresentable At was never stored
			ats = append(ats, n)
			streams = append(streams, b(d.Stream))
			keys = append(keys, b(d.Key))
		}
	}
	if err := db.ready(ctx); err != nil {
		return fmt.Errorf("pgjournal: delete due: %w", err)
	}
	if len(ats) == 0 {
		return nil
	}
	_, err := db.pool.Exec(ctx, `DELETE FROM dues d USING unnest($1::bigint[], $2::bytea[], $3::bytea[]) AS u(at, stream, key)
WHERE d.at = u.at AND d.stream = u.stream AND d.key = u.key`, ats, streams, keys)
	if err != nil {
		return fmt.Errorf("pgjournal: delete due: %w", err)
	}
	return nil
}

// Marks lists the keys in the marks index that start with prefix, in key
// order, after the key after (exclusive; "" starts at the beginning), at
// most limit (limit <= 0 means no limit). Like the bbolt journal, a cursor
// after that sorts before prefix, with other keys between them, yields
// nothing.
func (db *DB) Marks(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	keys := []string{}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: marks %q: %w", prefix, err)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	err := func() error {
		if after != "" && after < prefix {
			// The bbolt cursor starts at the first key after "after" and
			// stops at once if it lacks the prefix.
			var n int
			if err := db.pool.QueryRow(ctx, "SELECT count(*) FROM (SELECT 1 FROM marks WHERE key > $1 AND key < $2 LIMIT 1) x",
				b(after), b(prefix)).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
		}
		q := "SELECT key FROM marks WHERE key >= $1 AND key > $2 ORDER BY key LIMIT $3"
		args := []any{b(prefix), b(after), lim}
		if end := prefixEnd(prefix); end != nil {
			q = "SELECT key FROM marks WHERE key >= $1 AND key > $2 AND key < $4 ORDER BY key LIMIT $3"
			args = append(args, end)
		}
		rows, err := db.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, string(k))
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("pgjournal: marks %q: %w", prefix, err)
	}
	return keys, nil
}

// MarksDesc lists the keys in the marks index that start with prefix and
// sort before before ("" means no bound), in descending key order, at most
// limit (limit <= 0 means no limit), as the bbolt journal's MarksDesc.
func (db *DB) MarksDesc(ctx context.Context, prefix, before string, limit int) ([]string, error) {
	keys := []string{}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: marks desc %q: %w", prefix, err)
	}
	var lim *int64
	if limit > 0 {
		l := int64(limit)
		lim = &l
	}
	q := "SELECT key FROM marks WHERE key >= $1"
	args := []any{b(prefix), lim}
	if end := prefixEnd(prefix); end != nil {
		args = append(args, end)
		q += " AND key < $" + strconv.Itoa(len(args))
	}
	if before != "" {
		args = append(args, b(before))
		q += " AND key < $" + strconv.Itoa(len(args))
	}
	q += " ORDER BY key DESC LIMIT $2"
	err := func() error {
		rows, err := db.pool.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			if err := rows.Scan(&k); err != nil {
				return err
			}
			keys = append(keys, string(k))
		}
		return rows.Err()
	}()
	if err != nil {
		return nil, fmt.Errorf("pgjournal: marks desc %q: %w", prefix, err)
	}
	return keys, nil
}

// WriteMarks sets and clears marks in one transaction without appending a
// record, as the bbolt journal's WriteMarks: for an upgrade that
// back-fills a marks index. It is not fenced.
func (db *DB) WriteMarks(ctx context.Context, marks []journal.Mark) error {
	var set, cleared [][]byte
	for _, m := range marks {
		if err := journal.ValidateMark(m); err != nil {
			return fmt.Errorf("pgjournal: write marks: %w", err)
		}
		if m.Clear {
			cleared = append(cleared, b(m.Key))
		} else {
			set = append(set, b(m.Key))
		}
	}
	if err := db.ready(ctx); err != nil {
		return fmt.Errorf("pgjournal: write marks: %w", err)
	}
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		if len(cleared) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM marks WHERE key = ANY($1::bytea[])`, cleared); err != nil {
				return err
			}
		}
		if len(set) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO marks (key) SELECT * FROM unnest($1::bytea[]) ON CONFLICT DO NOTHING`, set); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("pgjournal: write marks: %w", err)
	}
	return nil
}

// WriteMarksAt writes the marks of each entry of batch whose stream's head
// is still its Head, in one transaction, and returns the streams whose head
// moved (their marks are not written): marks made from a state that an
// append has since changed would contradict the append's own. The streams'
// rows are locked (FOR SHARE, in stream order) while the marks are
// written, so no append to them commits in between; an append waits for
// this transaction, then changes the marks from what it wrote.
func (db *DB) WriteMarksAt(ctx context.Context, batch []journal.StreamMarks) ([]string, error) {
	heads := make(map[string]uint64, len(batch))
	for _, sm := range batch {
		if err := checkStream(sm.Stream); err != nil {
			return nil, fmt.Errorf("pgjournal: write marks: %w", err)
		}
		for _, m := range sm.Marks {
			if err := journal.ValidateMark(m); err != nil {
				return nil, fmt.Errorf("pgjournal: write marks: %w", err)
			}
		}
		if h, ok := heads[sm.Stream]; ok && h != sm.Head {
			return nil, fmt.Errorf("pgjournal: write marks: %w: stream %q at heads %d and %d", journal.ErrInvalid, sm.Stream, h, sm.Head)
		}
		heads[sm.Stream] = sm.Head
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: write marks: %w", err)
	}
	names := slices.Sorted(maps.Keys(heads))
	args := make([][]byte, len(names))
	for i, n := range names {
		args[i] = b(n)
	}
	var moved []string
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		moved = moved[:0]
		rows, err := tx.Query(ctx, "SELECT stream, head FROM streams WHERE stream = ANY($1::bytea[]) ORDER BY stream FOR SHARE", args)
		if err != nil {
			return err
		}
		found := make(map[string]uint64, len(names))
		for rows.Next() {
			var s []byte
			var h int64
			if err := rows.Scan(&s, &h); err != nil {
				rows.Close()
				return err
			}
			found[string(s)] = uint64(h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, n := range names {
			if h, ok := found[n]; !ok || h != heads[n] {
				moved = append(moved, n)
			}
		}
		var set, cleared [][]byte
		for _, sm := range batch {
			if slices.Contains(moved, sm.Stream) {
				continue
			}
			for _, m := range sm.Marks {
				if m.Clear {
					cleared = append(cleared, b(m.Key))
				} else {
					set = append(set, b(m.Key))
				}
			}
		}
		if len(cleared) > 0 {
			if _, err := tx.Exec(ctx, `DELETE FROM marks WHERE key = ANY($1::bytea[])`, cleared); err != nil {
				return err
			}
		}
		if len(set) > 0 {
			if _, err := tx.Exec(ctx, `INSERT INTO marks (key) SELECT * FROM unnest($1::bytea[]) ON CONFLICT DO NOTHING`, set); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgjournal: write marks: %w", err)
	}
	return moved, nil
}

// LoadStreams returns the records of each of streams (duplicates are read
// once), as Load would, in one query. An unknown stream maps to an empty
// slice. It does not activate the streams.
func (db *DB) LoadStreams(ctx context.Context, streams []string) (map[string][]journal.Record, error) {
	out := make(map[string][]journal.Record, len(streams))
	args := make([][]byte, 0, len(streams))
	for _, s := range streams {
		if err := checkStream(s); err != nil {
			return nil, fmt.Errorf("pgjournal: load streams: %w", err)
		}
		if _, ok := out[s]; !ok {
			out[s] = []journal.Record{}
			args = append(args, b(s))
		}
	}
	if err := db.ready(ctx); err != nil {
		return nil, fmt.Errorf("pgjournal: load streams: %w", err)
	}
	rows, err := db.pool.Query(ctx, "SELECT "+recordColumns+" FROM events WHERE stream = ANY($1::bytea[]) ORDER BY stream, seq", args)
	if err == nil {
		err = scanRecords(rows, func(r journal.Record) error {
			recs := out[r.Stream]
			if r.Seq != uint64(len(recs))+1 {
				return fmt.Errorf("%w: stream %q: seq %d follows %d", journal.ErrCorrupt, r.Stream, r.Seq, len(recs))
			}
			out[r.Stream] = append(recs, r)
			return nil
		})
	}
	if err != nil {
		return nil, fmt.Errorf("pgjournal: load streams: %w", err)
	}
	return out, nil
}
