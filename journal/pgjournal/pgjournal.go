package pgjournal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refundd/refundd/journal"

	"github.com/refundd/refundd/journal/internal/groupcommit"
)

// Options configures Open. The zero value is the production setting.
type Options struct {
	// NodeID names this DB in the rows it writes (events, activations) and
	// in PostgreSQL's application_name. 1..64 bytes of UTF-8 without NUL.
	// Zero means a random id ("node-" and 16 hex digits) per Open.
	NodeID string
	// MaxBatch is the most appends committed in one transaction. Zero
	// means 1024.
	MaxBatch int
	// Logger receives commit failures and lifecycle messages. Nil means
	// slog.Default().
	Logger *slog.Logger
	// Schema is the PostgreSQL schema holding the tables; Open creates it
	// if missing. Zero means "public".
	Schema string
	// CommitTimeout bounds one group-commit transaction, including the wait
	// for another node's commit. Zero means 30s.
	CommitTimeout time.Duration
	// IdleTxTimeout is idle_in_transaction_session_timeout for this DB's
	// connections: PostgreSQL ends a session that stalls inside a
	// transaction (and releases its locks) after it. Zero means 10s.
	IdleTxTimeout time.Duration
	// OnCommit, when set, is called by the committer after each
	// transaction with its size and timings (Sync is the second round trip:
	// the writes and COMMIT). It must return quickly. Nil means none.
	OnCommit func(journal.CommitInfo)
}

func (o *Options) withDefaults() (Options, error) {
	var v Options
	if o != nil {
		v = *o
	}
	if v.NodeID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		v.NodeID = "node-" + hex.EncodeToString(b[:])
	}
	if len(v.NodeID) > 64 || !utf8.ValidString(v.NodeID) || strings.IndexByte(v.NodeID, 0) >= 0 {
		return v, fmt.Errorf("%w: node id must be 1..64 bytes of UTF-8 without NUL", journal.ErrInvalid)
	}
	if v.MaxBatch <= 0 {
		v.MaxBatch = 1024
	}
	if v.Logger == nil {
		v.Logger = slog.Default()
	}
	if v.Schema == "" {
		v.Schema = "public"
	}
	if len(v.Schema) > 63 || !utf8.ValidString(v.Schema) || strings.IndexByte(v.Schema, 0) >= 0 {
		return v, fmt.Errorf("%w: schema must be 1..63 bytes of UTF-8 without NUL", journal.ErrInvalid)
	}
	if v.CommitTimeout <= 0 {
		v.CommitTimeout = 30 * time.Second
	}
	if v.IdleTxTimeout <= 0 {
		v.IdleTxTimeout = 10 * time.Second
	}
	return v, nil
}

// maxQueue caps the append queue's buffer so a huge MaxBatch does not
// allocate up front.
const maxQueue = 4096

// DB is a journal in a PostgreSQL database, one node's handle on it. It is
// safe for concurrent use.
type DB struct {
	opts Options
	log  *slog.Logger
	pool *pgxpool.Pool

	// loop is the group committer (append.go); its Committed signal is
	// broadcast after every commit and stopped at Close.
	loop    *groupcommit.Loop[request]
	commits atomic.Uint64 // transactions run by the committer, for tests

	// epochs maps a stream to the epoch this DB activated (fence.go).
	epochMu sync.Mutex
	epochs  map[string]uint64

	// beforeCommit, when set (tests only), is called by the committer
	// inside the transaction, after the locks and checks, before the
	// writes and COMMIT.
	beforeCommit atomic.Pointer[func()]

	closeOnce sync.Once
}

// Open connects to the database at dsn (a PostgreSQL URL or key=value
// string; pool settings such as pool_max_conns are honoured), applies the
// schema migrations this build knows, and starts the committer. Several
// DBs, in one process or many, may open the same schema: that is a cluster.
// It fails with journal.ErrFormatTooNew if the schema was migrated by a
// newer build. opts may be nil.
func Open(ctx context.Context, dsn string, opts *Options) (*DB, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("pgjournal: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("pgjournal: open: %w", err)
	}
	rp := cfg.ConnConfig.RuntimeParams
	rp["search_path"] = pgx.Identifier{o.Schema}.Sanitize()
	rp["application_name"] = "github.com/refundd/refundd/" + o.NodeID
	rp["idle_in_transaction_session_timeout"] = strconv.FormatInt(o.IdleTxTimeout.Milliseconds(), 10)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("pgjournal: open: %w", err)
	}
	if err := migrate(ctx, pool, o.Schema); err != nil {
		pool.Close()
		return nil, fmt.Errorf("pgjournal: open schema %q: %w", o.Schema, err)
	}
	db := &DB{
		opts:   o,
		log:    o.Logger.With("journal", "postgres", "schema", o.Schema, "node", o.NodeID),
		pool:   pool,
		epochs: make(map[string]uint64),
	}
	db.loop = groupcommit.Start(groupcommit.Config[request]{
		Commit:   db.commit,
		MaxBatch: o.MaxBatch,
		QueueLen: min(o.MaxBatch, maxQueue),
		Closed:   journal.ErrClosed,
		Name:     "pgjournal",
		Log:      db.log,
	})
	db.log.Debug("journal opened", "max_batch", o.MaxBatch)
	return db, nil
}

// NodeID returns the node id this DB writes under (Options.NodeID or the
// random one chosen by Open).
func (db *DB) NodeID() string { return db.opts.NodeID }

// Schema returns the schema the DB's tables are in.
func (db *DB) Schema() string { return db.opts.Schema }

// Close stops accepting appends (they fail with journal.ErrClosed), waits
// for the already queued ones to commit, and closes the connections. It is
// safe to call more than once.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		db.loop.Close()
		db.pool.Close()
		db.log.Debug("journal closed")
	})
	return nil
}

// ready fails with ctx's error or ErrClosed before a read.
func (db *DB) ready(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if db.loop.Closed() {
		return journal.ErrClosed
	}
	return nil
}

// Committed returns a channel that is closed after the next commit of this
// DB's appends (successful or not), or when the DB is closed. Commits of
// other nodes do not close it: a reader that must follow the whole cluster
// polls Scan.
func (db *DB) Committed() <-chan struct{} {
	ch, _ := db.loop.Committed()
	return ch
}
