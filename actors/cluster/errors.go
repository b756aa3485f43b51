package cluster

import (
	"errors"
	"fmt"

	"github.com/refundd/refundd/actors"
)

var (
	// ErrUnavailable is returned when a call could not be routed to the
	// reservation's owner in time: no member owns it yet (the node is
	// joining or self-fenced), or the owner did not answer. It wraps
	// actors.ErrUnavailable, so callers map it like a journal outage (the
	// API answers 503). An Execute that timed out may still have run on the
	// owner: retry with the same idempotency key.
	ErrUnavailable = fmt.Errorf("cluster: reservation owner unreachable: %w", actors.ErrUnavailable)
	// ErrNotOwner is returned by the node's Store guard when this node is
	// asked to activate a reservation another node owns: activating it
	// would take the stream's epoch from its owner.
	ErrNotOwner = errors.New("cluster: reservation is owned by another node")
	// ErrWire is returned when a message from another node cannot be
	// decoded (a newer build's format, or corruption).
	ErrWire = errors.New("cluster: malformed message")
	// ErrClosed is returned after Close started.
	ErrClosed = fmt.Errorf("cluster: node closed: %w", actors.ErrClosed)
	// ErrMembership is returned when a membership URL or option is invalid.
	ErrMembership = errors.New("cluster: invalid membership")
)
