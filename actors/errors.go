package actors

import "errors"

var (
	// ErrVersionConflict is returned by a Store when a stream was appended to
	// by someone else since it was loaded.
	ErrVersionConflict = errors.New("actors: journal version conflict")
	// ErrUnavailable is returned when the reservation's state could not be
	// loaded or its events could not be journaled. Nothing was decided.
	ErrUnavailable = errors.New("actors: journal unavailable")
	// ErrClosed is returned after the engine started shutting down.
	ErrClosed = errors.New("actors: engine closed")
)
