// Package client is a Go client for refundd's HTTP API.
//
// Every operation of the OpenAPI document (GET /v1/openapi.json, kept in
// api/openapi.json) is a method of Client, except WeChat Pay's own
// notification callbacks; TestOperationsCovered keeps the two in step.
// Answers are typed; failures the API reports are *Error values carrying
// its code (CodeNotFound, CodeInsufficientRefundable, ...), so callers
// switch on codes, never on HTTP statuses or messages.
//
// # Why written by hand
//
// The client is written by hand on one small core (do, in client.go)
// rather than generated from the OpenAPI document. What matters most in a
// refund client is not expressible in OpenAPI, so a generator would leave
// exactly that to hand-written wrappers anyway:
//
//   - An idempotency key belongs to a logical call, not to an HTTP request:
//     one key is generated (or taken from the caller) per RequestRefund and
//     reused, unchanged, on every retry of it. A generated client makes the
//     key a plain header parameter per request.
//   - Which calls may be retried is a property of the server's semantics:
//     reads, the registration (idempotent by reservation id) and keyed
//     refund requests are retried on network errors, 429 and 5xx; operator
//     actions and webhook replays are never retried, since a retry after
//     an answer that was lost would be a second decision, not the same one.
//   - ?wait= must stretch the request's own deadline, and the feed's long
//     poll must be followed from a cursor stored by the consumer.
//
// The document is the reference the core is checked against: the tests
// list its operationIds and the error codes of its ErrorCode schema and
// compare them with this package's tables, and they run every method
// against a real in-process refundd.
//
// # Exactly once across restarts
//
// A key the client generates lives only as long as the call. A caller that
// must survive its own crash between a request and its answer passes its
// own RefundRequest.IdempotencyKey, stored with its order (for example the
// order line's id): asking again with that key, from any process, answers
// the same refund.
package client
