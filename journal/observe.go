package journal

import (
	"time"

	bolt "go.etcd.io/bbolt"
)

// CommitInfo describes one transaction of the group committer, for
// Options.OnCommit.
type CommitInfo struct {
	Batch    int           // appends in the transaction
	Duration time.Duration // the whole transaction: writing the batch, then committing and fsyncing it
	Sync     time.Duration // the commit to disk: page writes and fsync; zero when the transaction failed
	Err      error         // nil when it committed
}

// commitTimer measures one transaction for Options.OnCommit; it is nil,
// and its methods do nothing, when no one listens.
type commitTimer struct {
	on      func(CommitInfo)
	batch   int
	start   time.Time
	wroteAt time.Time
	sync    time.Duration
}

func (db *DB) startCommit(batch int) *commitTimer {
	if db.opts.OnCommit == nil {
		return nil
	}
	return &commitTimer{on: db.opts.OnCommit, batch: batch, start: time.Now()}
}

// wrote marks the end of the in-memory writes of tx and times the commit
// that follows (bbolt runs OnCommit handlers once the data and meta pages
// are written and synced). It returns err unchanged.
func (c *commitTimer) wrote(tx *bolt.Tx, err error) error {
	if c == nil || err != nil {
		return err
	}
	c.wroteAt = time.Now()
	tx.OnCommit(func() { c.sync = time.Since(c.wroteAt) })
	return nil
}

// observe reports a finished transaction to Options.OnCommit. The commit
// is already decided; a panicking observer is logged and otherwise ignored,
// so that it cannot fail appends that are on disk.
func (db *DB) observe(c *commitTimer, err error) {
	defer func() {
		if r := recover(); r != nil {
			db.log.Error("journal: OnCommit panicked; ignored", "panic", r)
		}
	}()
	c.done(err)
}

func (c *commitTimer) done(err error) {
	if c == nil {
		return
	}
	c.on(CommitInfo{Batch: c.batch, Duration: time.Since(c.start), Sync: c.sync, Err: err})
}
