// Package webhook delivers the event feed to HTTP endpoints, signed.
//
// A Dispatcher runs one goroutine per configured endpoint. Each goroutine
// reads the feed (package feed) from the endpoint's cursor and POSTs one
// event at a time, in global order, retrying with exponential backoff and
// jitter until the endpoint answers 2xx or the attempts run out. It only
// reads the journal and writes its own small records (the cursor, parked
// events) into the journal's kv area, so an endpoint that is slow or down
// never blocks a refund: it only falls behind, which Lag reports.
//
// # Guarantees
//
//   - At least once: the cursor is persisted after each delivery, so after a
//     restart at most the last delivery before it is repeated. Every
//     delivery of one event carries the same event id and body.
//   - In order per reservation: events go out one at a time in global
//     order, which includes each reservation's order. When an event
//     exhausts its attempts it is parked (kept in the kv area), and the
//     endpoint moves on to other reservations; later events of the same
//     reservation are parked behind it without being tried, so nothing
//     overtakes it. Replay (an operator's decision) re-queues the whole
//     reservation's parked events, which are then delivered in order before
//     that reservation's new events flow directly again.
//
// # Signature
//
// Each POST carries Refundd-Event-Id, Refundd-Event-Type, Refundd-Timestamp
// (unix seconds) and Refundd-Signature: "v1=" followed by the hex
// HMAC-SHA256 of timestamp + "." + body under the endpoint's secret.
// Consumers check it with Verify (docs/WEBHOOKS.md has an example).
package webhook
