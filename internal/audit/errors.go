package audit

import "errors"

var (
	// ErrNotFound is returned when the journal has no stream for the
	// reservation asked about.
	ErrNotFound = errors.New("audit: reservation not in the journal")

	// ErrInvalid is returned for a malformed argument: a bad refund-number
	// prefix, an epoch prefix longer than 16 characters, a bad time range.
	ErrInvalid = errors.New("audit: invalid argument")
)
