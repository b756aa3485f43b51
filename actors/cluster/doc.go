// Package cluster runs refundd's reservation actors on several nodes with
// protoactor-go's cluster: each reservation is a grain of Kind
// "reservation", placed on one member by the disthash identity lookup
// (rendezvous hashing over the members), and any node accepts any call and
// routes it there by reservation id. The grain hands the call to the owning
// node's actors.Engine, so the reservation's rules, its journal order
// (decide -> append -> apply -> reply -> side effects) and its passivation
// are exactly the single-node ones.
//
// Placement is best effort: in a partition, or for a moment after a node
// dies or joins, two nodes may both believe they own a reservation. Safety
// does not rest on it. The shared journal (journal/pgjournal) gives every
// activation a new epoch and refuses an append under an older one, so a
// stale owner can never write; this package only keeps such moments short
// and rare:
//
//   - A node fires only the due timers of reservations it owns, and
//     refuses to activate one it does not own (its Store is guarded), so
//     its background work never takes a stream from the owner.
//   - When the membership changes, actors of reservations that moved are
//     passivated; protoactor stops the moved grains.
//   - Self-fencing (membership Etcd): a node that cannot renew its lease
//     before it may have expired stops every actor, leaves, and rejoins
//     under a new member id.
//
// Messages between nodes are JSON in a protobuf BytesValue (wire.go): no
// generated code. Routing resends a request only when it provably did not
// run (no owner yet, the grain was gone, the node answered that it is not
// the owner); a timeout is an error, never a resend. Each command also
// carries an id that the owner de-duplicates while it keeps the
// reservation.
//
// docs/CLUSTER.md is the deployment guide and the single-writer argument.
package cluster
