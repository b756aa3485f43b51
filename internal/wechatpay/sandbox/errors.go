package sandbox

import "errors"

var (
	// ErrInvalidConfig is returned by New when a Config field is missing or
	// out of range.
	ErrInvalidConfig = errors.New("sandbox: invalid config")

	// ErrInvalidArgument is returned when CreateOrder or SetFault is given a
	// value that cannot be used: an empty or over-long order number, a
	// non-positive total, an unknown fault kind.
	ErrInvalidArgument = errors.New("sandbox: invalid argument")

	// ErrOrderConflict is returned by CreateOrder when the order number is
	// already registered with another total or transaction id.
	ErrOrderConflict = errors.New("sandbox: order exists with different values")

	// ErrStateFile is returned by New when Config.StateFile cannot be read,
	// does not parse, holds inconsistent books or another merchant's, or
	// cannot be written; and by CreateOrder when the new order cannot be
	// saved.
	ErrStateFile = errors.New("sandbox: state file")

	// ErrKeyFiles is returned by LoadKeys when a key directory is incomplete
	// or holds a file that does not parse.
	ErrKeyFiles = errors.New("sandbox: bad key files")
)
