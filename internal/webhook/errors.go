package webhook

import "errors"

var (
	// ErrConfig is returned by New when the configuration is invalid.
	ErrConfig = errors.New("webhook: invalid configuration")

	// ErrUnknownEndpoint is returned when no configured endpoint has the
	// given name.
	ErrUnknownEndpoint = errors.New("webhook: unknown endpoint")

	// ErrNotParked is returned by Replay when the event is not parked at
	// the endpoint (never parked, or already delivered).
	ErrNotParked = errors.New("webhook: event not parked")

	// ErrRunning is returned by Run when the Dispatcher is already running.
	ErrRunning = errors.New("webhook: dispatcher already running")

	// ErrBadSignature is returned by Verify when the signature header is
	// missing, malformed, or matches no signature of the body.
	ErrBadSignature = errors.New("webhook: bad signature")

	// ErrBadTimestamp is returned by Verify when the timestamp is missing,
	// malformed, or further than the allowed skew from now (a replayed or
	// delayed delivery).
	ErrBadTimestamp = errors.New("webhook: bad or stale timestamp")
)
