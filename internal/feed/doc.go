// Package feed turns journal records into the domain events that downstream
// systems consume: refund.requested, refund.succeeded, refund.failed,
// refund.abnormal, refund.stuck, reservation.canceled, and for refunds
// held for four-eyes approval refund.approval_requested, refund.approved and
// refund.rejected, and refund.abnormal_applied when an operator has WeChat
// pay an ABNORMAL refund out to a bank account.
//
// Events are derived, never stored: each one is computed from one journal
// record and the records of the same reservation before it, so an event and
// the state change it reports can never disagree, and reading the same
// record twice (a replay, a redelivery, a rebuilt consumer) yields the same
// event byte for byte. An event's ID comes from its record's global sequence
// and its cursor is that sequence: reading "after" a cursor continues exactly
// where a consumer stopped, in the journal's global order, which is also
// each reservation's own order.
//
// Records that mean nothing to consumers (submissions, queries, provider
// answers that changed no state, conflicts) produce no event; Read still
// moves its cursor past them.
package feed
