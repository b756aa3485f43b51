package pgjournal

import (
	"errors"
	"fmt"
)

// ErrFenced is returned by Append when this DB does not hold the stream's
// current epoch: it never activated the stream, or another DB (another
// node) activated it since. Nothing of the request was written. The error
// is a *FencedError.
var ErrFenced = errors.New("pgjournal: fenced: stream is owned by another activation")

// The other errors are the bbolt journal's, so callers handle both
// backends alike: journal.ErrInvalid, journal.ErrNotFound, journal.ErrClosed,
// journal.ErrCorrupt, journal.ErrFormatTooNew (a schema migrated by a newer
// build), *journal.SequenceError and *journal.KeyTakenError.

// FencedError is the error returned by Append for a stream this DB does not
// own. It matches ErrFenced with errors.Is.
type FencedError struct {
	Stream  string
	Epoch   uint64 // the epoch this DB activated; 0 if it never activated the stream
	Current uint64 // the stream's epoch when the append was checked; 0 if unknown
}

func (e *FencedError) Error() string {
	if e.Epoch == 0 {
		return fmt.Sprintf("pgjournal: fenced: stream %q was not activated by this node", e.Stream)
	}
	return fmt.Sprintf("pgjournal: fenced: stream %q: this node activated epoch %d, current epoch is %d",
		e.Stream, e.Epoch, e.Current)
}

// Unwrap lets errors.Is(err, ErrFenced) succeed.
func (e *FencedError) Unwrap() error { return ErrFenced }
