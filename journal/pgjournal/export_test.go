package pgjournal

// SetBeforeCommit makes db's committer call fn inside each transaction,
// after it locked and checked, before it writes and commits (nil removes
// it).
func SetBeforeCommit(db *DB, fn func()) {
	if fn == nil {
		db.beforeCommit.Store(nil)
		return
	}
	db.beforeCommit.Store(&fn)
}

// Commits returns how many transactions db's committer ran.
func Commits(db *DB) uint64 { return db.commits.Load() }

// Queued returns how many appends wait in db's queue.
func Queued(db *DB) int { return db.loop.Queued() }
