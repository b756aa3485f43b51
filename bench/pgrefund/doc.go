// Package pgrefund is the baseline refundd is measured against: the seeds'
// design (../shared/seeds) on PostgreSQL, behind the same JSON API shape as
// refundd for register, refund and read.
//
// A refund is claimed by one conditional UPDATE of the reservation's
// running totals (refunded + in flight + amount <= paid) together with an
// INSERT into reservation_refund, whose unique keys (refund number;
// reservation + idempotency key) turn a duplicate request into a replay.
// Both are one statement, so one round trip and one commit. The provider is
// called after that commit, never inside a transaction, and its answer is
// recorded by a second conditional UPDATE (refund PROCESSING/UNKNOWN ->
// SUCCEEDED, moving its amount from in flight to refunded) in the same
// statement as the reservation's totals. A WeChat Pay v3 notification is
// verified and decrypted, checked against the refund, and applied by
// inserting into refund_notify_record (unique per refund number and status)
// and the same conditional UPDATE, one statement again: a duplicate inserts
// nothing and changes nothing.
//
// Tuning: a pgxpool sized by Options.Pool, pgx's per-connection prepared
// statement cache (every statement is prepared once per connection), no
// explicit transactions where one statement does, synchronous_commit left
// on. The PostgreSQL settings used for the published numbers are in
// bench/pg-setup.sh and docs/BENCHMARKS.md.
//
// This package is a benchmark baseline, not part of refundd: it keeps no
// journal, no timers and no reconciliation.
package pgrefund
