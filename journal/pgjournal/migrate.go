package pgjournal

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refundd/refundd/journal"
)

// migrations are applied in order; migration i+1 is schema version i+1.
// A released migration never changes: a new one is appended.
var migrations = []string{
	// 1: the journal.
	`
CREATE TABLE log_head (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    last_global bigint NOT NULL,
    last_hash   bytea  NOT NULL
);
INSERT INTO log_head (id, last_global, last_hash) VALUES (true, 0, '\x0000000000000000000000000000000000000000000000000000000000000000');

CREATE TABLE streams (
    stream bytea  PRIMARY KEY,
    head   bigint NOT NULL,
    epoch  bigint NOT NULL,
    node   text   NOT NULL
);

CREATE TABLE activations (
    stream       bytea       NOT NULL,
    epoch        bigint      NOT NULL,
    node         text        NOT NULL,
    head         bigint      NOT NULL,
    activated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (stream, epoch)
);

CREATE TABLE events (
    global  bigint  PRIMARY KEY,
    stream  bytea   NOT NULL,
    seq     bigint  NOT NULL,
    type    bytea   NOT NULL,
    version integer NOT NULL,
    data    bytea   NOT NULL,
    hash    bytea   NOT NULL,
    epoch   bigint  NOT NULL,
    node    text    NOT NULL,
    UNIQUE (stream, seq)
);

CREATE TABLE claims (
    namespace bytea NOT NULL,
    key       bytea NOT NULL,
    stream    bytea NOT NULL,
    PRIMARY KEY (namespace, key)
);

CREATE TABLE dues (
    at     bigint NOT NULL,
    stream bytea  NOT NULL,
    key    bytea  NOT NULL,
    PRIMARY KEY (at, stream, key)
);

CREATE TABLE marks (
    key bytea PRIMARY KEY
);

CREATE TABLE kv (
    key   bytea PRIMARY KEY,
    value bytea NOT NULL
);
`,
	// 2: the counters (counters.go), changed by every append in its
	// transaction. counters_state says whether they cover the whole log:
	// at once for a schema with no records yet; a schema written before
	// has them only for what is appended from now on, until
	// CompleteCounters adds the rest (eventstore.BackfillCounters). The
	// generation is journal.CountersGeneration of the build that added
	// them: 2, with the per-hour refund totals.
	`
CREATE TABLE counters (
    key   bytea  PRIMARY KEY,
    value bigint NOT NULL
);

CREATE TABLE counters_state (
    id         boolean PRIMARY KEY DEFAULT true CHECK (id),
    complete   boolean NOT NULL,
    generation bigint  NOT NULL
);
INSERT INTO counters_state (id, complete, generation) SELECT true, last_global = 0, 2 FROM log_head;
`,
}

// migrate brings schema up to the newest version this build knows, under a
// transaction-level advisory lock on the schema's name, so that nodes
// opening together apply each migration exactly once.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	h := fnv.New64a()
	h.Write([]byte("github.com/refundd/refundd/pgjournal/" + schema))
	lockKey := int64(h.Sum64())
	ident := pgx.Identifier{schema}.Sanitize()
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey); err != nil {
			return err
		}
		// CREATE SCHEMA checks the privilege to create before IF NOT
		// EXISTS: a role that may not create schemas can still use one
		// made for it.
		var exists bool
		if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
			return err
		}
		if !exists {
			if _, err := tx.Exec(ctx, "CREATE SCHEMA "+ident); err != nil {
				return err
			}
		}
		// No arguments: pgx sends these in the simple protocol, so a
		// migration may hold several statements.
		if _, err := tx.Exec(ctx, "SET LOCAL search_path TO "+ident); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer     PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now()
)`); err != nil {
			return err
		}
		var cur int
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM schema_migrations").Scan(&cur); err != nil {
			return err
		}
		if cur > len(migrations) {
			return fmt.Errorf("%w: schema version %d, this build knows up to %d", journal.ErrFormatTooNew, cur, len(migrations))
		}
		for v := cur + 1; v <= len(migrations); v++ {
			if _, err := tx.Exec(ctx, migrations[v-1]); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
			if _, err := tx.Exec(ctx, "INSERT INTO schema_migrations (version) VALUES ($1)", v); err != nil {
				return fmt.Errorf("migration %d: %w", v, err)
			}
		}
		return nil
	})
}
