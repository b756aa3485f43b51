package feed

import "errors"

var (
	// ErrUnknownType is returned by Read when a type filter names a type
	// that is not one of Types().
	ErrUnknownType = errors.New("feed: unknown event type")

	// ErrInconsistent is returned when a journal record cannot be turned
	// into an event because the reservation's earlier records do not
	// support it (a refund that was never requested); the journal is
	// damaged and the feed stops there rather than invent amounts.
	ErrInconsistent = errors.New("feed: journal inconsistent")

	// ErrBadID is returned by ParseID for a string that is not an event id.
	ErrBadID = errors.New("feed: malformed event id")
)
