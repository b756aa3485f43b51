package journal

import (
	"errors"
	"fmt"
)

var (
	// ErrSequenceMismatch is returned by Append when AppendRequest.Expected
	// is not the stream's last Seq. The error is a *SequenceError.
	ErrSequenceMismatch = errors.New("journal: sequence mismatch")

	// ErrKeyTaken is returned by Append when a claim's key is already owned
	// by another stream. The error is a *KeyTakenError.
	ErrKeyTaken = errors.New("journal: key taken")

	// ErrNotFound is returned by Lookup when no stream owns the key.
	ErrNotFound = errors.New("journal: not found")

	// ErrClosed is returned when the DB is used after Close.
	ErrClosed = errors.New("journal: closed")

	// ErrLocked is returned by Open when another process (or another DB in
	// this process) holds the file lock for longer than Options.Timeout.
	ErrLocked = errors.New("journal: file locked by another process")

	// ErrCorrupt is returned when stored data fails a consistency check: a
	// record checksum, a sequence gap, or an index that disagrees with the log.
	ErrCorrupt = errors.New("journal: corrupt")

	// ErrFormatTooNew is returned when the file or a record was written by a
	// newer format version than this code understands.
	ErrFormatTooNew = errors.New("journal: format too new")

	// ErrReadOnly is returned by Append and the other writes on a DB opened
	// with Options.ReadOnly.
	ErrReadOnly = errors.New("journal: opened read-only")

	// ErrSignature is returned when a checkpoint is not signed, or not by
	// the expected key, or its signature does not verify.
	ErrSignature = errors.New("journal: bad checkpoint signature")

	// ErrInvalid is returned by Append and other calls when the request
	// itself is malformed: empty stream, no events, bad type or version, a
	// name containing NUL, a size over its limit.
	ErrInvalid = errors.New("journal: invalid request")

	// ErrMoved is returned by SetCounters when records were appended after
	// the global its totals were folded at.
	ErrMoved = errors.New("journal: the log moved on")
)

// SequenceError is the error returned by Append when Expected does not
// match the stream's head. It matches ErrSequenceMismatch with errors.Is.
type SequenceError struct {
	Stream   string
	Expected uint64 // the caller's AppendRequest.Expected
	Actual   uint64 // the stream's last Seq at validation time
}

func (e *SequenceError) Error() string {
	return fmt.Sprintf("journal: sequence mismatch on stream %q: expected head %d, actual %d",
		e.Stream, e.Expected, e.Actual)
}

// Unwrap lets errors.Is(err, ErrSequenceMismatch) succeed.
func (e *SequenceError) Unwrap() error { return ErrSequenceMismatch }

// KeyTakenError is the error returned by Append when a claim's key is owned
// by another stream. It matches ErrKeyTaken with errors.Is.
type KeyTakenError struct {
	Namespace string
	Key       string
	Owner     string // the stream that owns the key
}

func (e *KeyTakenError) Error() string {
	return fmt.Sprintf("journal: key %q in namespace %q is taken by stream %q",
		e.Key, e.Namespace, e.Owner)
}

// Unwrap lets errors.Is(err, ErrKeyTaken) succeed.
func (e *KeyTakenError) Unwrap() error { return ErrKeyTaken }

// ErrNotOnChain means a point given to start a check from (a recorded head
// or checkpoint) is not on the journal's hash chain: it was forged, or the
// records up to it were changed since it was recorded.
var ErrNotOnChain = errors.New("journal: not on the chain")
