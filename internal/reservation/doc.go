// Package reservation holds the refund rules of one reservation as a pure
// state machine.
//
// Decide(state, command, env) returns the events a command produces, or a
// domain error; Apply(state, event) folds one event into the state. Everything
// else in refundd (actors, journal, HTTP, WeChat Pay) is an adapter around
// these two functions.
//
// Determinism rules, so that replaying a journal always rebuilds the same
// state:
//   - no IO, no goroutines, no time.Now: the time and the principal come in
//     through Env and are recorded in each event; so does the provider's
//     request encoder (Env.Encode), which must be pure, and whose bytes are
//     journaled;
//   - no dependence on map iteration order;
//   - Apply never fails and never validates: an event is a fact that was
//     already decided and journaled;
//   - Decide never mutates the state it is given.
//
// The package also holds the value types the driver and its adapters share
// (RefundRequest, Timer, RefundRef, ErrVersionConflict), so that adapters
// need not import the driver. It imports only the standard library and pure
// helpers (internal/lint checks this).
//
// Money is int64 fen throughout. The paid amount comes only from the
// registration by the booking/payment system, never from a refund requester.
package reservation
