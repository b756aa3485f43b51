package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal"
)

// The counters are the bbolt journal's (journal/counters.go): running
// totals changed by every append in its transaction (the table counters,
// key -> value), whose meaning is the writer's (eventstore.Tally). Commits
// are serialized by the log_head lock, so the counters a reader sees in one
// snapshot are those of exactly the records it sees.
//
// counters_state says whether they cover the whole log (Counts.Complete):
// true for a schema created by a build that keeps them; false for a schema
// that held records when migration 2 added the table, until
// CompleteCounters adds what those records count.

// counterSums sums one commit's counter changes per key, so each counter is
// written once per commit.
type counterSums struct {
	add map[string]int64
	max map[string]int64
}

func (c *counterSums) put(cs []journal.Counter) {
	for _, x := range cs {
		if x.Max {
			if c.max == nil {
				c.max = map[string]int64{}
			}
			if v, ok := c.max[x.Key]; !ok || x.Add > v {
				c.max[x.Key] = x.Add
			}
			continue
		}
		if c.add == nil {
			c.add = map[string]int64{}
		}
		c.add[x.Key] += x.Add
	}
}

// args are the sums as statement arguments, in key order (two writers
// lock the rows in the same order), without additions of zero.
func (c *counterSums) args() (addKeys [][]byte, addVals []int64, maxKeys [][]byte, maxVals []int64) {
	for _, k := range slices.Sorted(mapKeys(c.add)) {
		if v := c.add[k]; v != 0 {
			addKeys, addVals = append(addKeys, b(k)), append(addVals, v)
		}
	}
	for _, k := range slices.Sorted(mapKeys(c.max)) {
		maxKeys, maxVals = append(maxKeys, b(k)), append(maxVals, c.max[k])
	}
	return addKeys, addVals, maxKeys, maxVals
}

func mapKeys(m map[string]int64) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// queueCounters queues the upserts of summed counter changes.
func queueCounters(batch *pgx.Batch, addKeys [][]byte, addVals []int64, maxKeys [][]byte, maxVals []int64) {
	if len(addKeys) > 0 {
		batch.Queue(`INSERT INTO counters (key, value) SELECT * FROM unnest($1::bytea[], $2::bigint[])
ON CONFLICT (key) DO UPDATE SET value = counters.value + EXCLUDED.value`, addKeys, addVals)
	}
	if len(maxKeys) > 0 {
		batch.Queue(`INSERT INTO counters (key, value) SELECT * FROM unnest($1::bytea[], $2::bigint[])
ON CONFLICT (key) DO UPDATE SET value = GREATEST(counters.value, EXCLUDED.value)`, maxKeys, maxVals)
	}
}

// Counters returns the counters and the last global they include, read in
// one snapshot.
func (db *DB) Counters(ctx context.Context) (journal.Counts, error) {
	return db.CountersBetween(ctx, "", "")
}

// CountersBetween returns the counters whose keys are in [from, to) (to ""
// means no end) with Complete, Generation and LastGlobal, read in one
// snapshot, as journal.DB.CountersBetween does: a range of keys that sort
// by time (the per-hour totals) reads only its span.
func (db *DB) CountersBetween(ctx context.Context, from, to string) (journal.Counts, error) {
	cs := journal.Counts{Values: map[string]int64{}}
	if err := db.ready(ctx); err != nil {
		return journal.Counts{}, fmt.Errorf("pgjournal: counters: %w", err)
	}
	err := pgx.BeginTxFunc(ctx, db.pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		var last, gen int64
		var complete bool
		if err := tx.QueryRow(ctx, "SELECT last_global FROM log_head").Scan(&last); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, "SELECT complete, generation FROM counters_state").Scan(&complete, &gen); err != nil {
			return err
		}
		cs.LastGlobal, cs.Complete = uint64(last), complete
		if complete {
			cs.Generation = uint64(gen)
		}
		q, args := "SELECT key, value FROM counters WHERE key >= $1", []any{b(from)}
		if to != "" {
			q, args = q+" AND key < $2", append(args, b(to))
		}
		rows, err := tx.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k []byte
			var v int64
			if err := rows.Scan(&k, &v); err != nil {
				return err
			}
			cs.Values[string(k)] = v
		}
		return rows.Err()
	})
	if err != nil {
		return journal.Counts{}, fmt.Errorf("pgjournal: counters: %w", err)
	}
	return cs, nil
}

// ErrCountersComplete is returned by CompleteCounters when the counters
// already cover the whole log (another node completed them first): the
// changes were not applied.
var ErrCountersComplete = errors.New("pgjournal: the counters already cover the whole log")

// CompleteCounters adds changes to the counters and marks them complete,
// in one transaction that holds the log_head lock, so no append commits in
// between. changes must be what the records up to global at count less
// what the counters held when the log ended at at (read in one snapshot by
// Counters): the appends since then added their own share, so the sum is
// what the whole log counts. A Max change keeps the larger value.
//
// It fails with ErrCountersComplete when the counters are complete
// already (nothing is changed: another node did it), and with
// journal.ErrInvalid for a malformed key.
func (db *DB) CompleteCounters(ctx context.Context, changes []journal.Counter) error {
	for _, c := range changes {
		if err := journal.ValidateCounter(c); err != nil {
			return fmt.Errorf("pgjournal: complete counters: %w", err)
		}
	}
	var sums counterSums
	sums.put(changes)
	addKeys, addVals, maxKeys, maxVals := sums.args()
	if err := db.ready(ctx); err != nil {
		return fmt.Errorf("pgjournal: complete counters: %w", err)
	}
	err := pgx.BeginFunc(ctx, db.pool, func(tx pgx.Tx) error {
		// log_head first, as every commit takes it: the counters' rows are
		// then locked by one transaction at a time, never in two orders.
		if _, err := tx.Exec(ctx, "SELECT 1 FROM log_head FOR UPDATE"); err != nil {
			return err
		}
		var complete bool
		if err := tx.QueryRow(ctx, "SELECT complete FROM counters_state FOR UPDATE").Scan(&complete); err != nil {
			return err
		}
		if complete {
			return ErrCountersComplete
		}
		batch := &pgx.Batch{}
		queueCounters(batch, addKeys, addVals, maxKeys, maxVals)
		batch.Queue("UPDATE counters_state SET complete = true")
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return fmt.Errorf("pgjournal: complete counters: %w", err)
	}
	return nil
}
