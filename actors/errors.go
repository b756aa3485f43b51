package actors

import (
	"errors"

	"github.com/refundd/refundd/internal/reservation"
)

var (
	// ErrVersionConflict is returned by a Store when a stream was appended to
	// by someone else since it was loaded. It is the core's error, so that
	// stores return it without importing the driver.
	ErrVersionConflict = reservation.ErrVersionConflict
	// ErrUnavailable is returned when the reservation's state could not be
	// loaded or its events could not be journaled. Nothing was decided.
	ErrUnavailable = errors.New("actors: journal unavailable")
	// ErrClosed is returned after the engine started shutting down.
	ErrClosed = errors.New("actors: engine closed")
)
