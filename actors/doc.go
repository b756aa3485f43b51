// Package actors runs one protoactor-go actor per reservation.
//
// The actor serializes everything addressed to its reservation: refund
// commands, provider results, notifications, reconciliation results and
// timers. It keeps one order for every message (the raft Ready contract):
//
//	decide -> append to the journal (durable) -> apply -> reply -> side effects
//
// A failed append replies with an error and passivates the actor, so the next
// message rebuilds the state from the journal. Messages are addressed by
// reservation id through the Engine, never to a stored PID: a message for a
// passivated reservation activates it again. Work that must happen later is a
// journaled due time drained by the Scheduler, never an in-memory timer, and
// provider calls run outside the mailbox; their results come back as
// messages and are journaled like everything else.
//
// A live actor is therefore only a cache of its journal: it passivates
// after Config.IdleTimeout without messages, or sooner when more than
// Config.MaxActive are live (the least recently used go first), and
// mailboxes run on a pool of long-lived goroutines (poolDispatcher).
//
// The package talks to the journal and the provider only through the Store
// and Provider interfaces it declares, in the core's types; the provider's
// pure request encoder (Config.Encode) goes to the core with each decision.
package actors
