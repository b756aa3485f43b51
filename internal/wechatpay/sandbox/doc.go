// Package sandbox is a WeChat Pay refund server for tests and local
// development. It speaks the real APIv3 wire protocol with its own generated
// keys, so a merchant client that works against it exercises the same
// signing, verification, encryption and error handling it needs in
// production. It builds only on the primitives of package wechatpay.
//
// # What it serves
//
//   - POST /v3/refund/domestic/refunds and
//     GET /v3/refund/domestic/refunds/{out_refund_no}: the merchant's
//     Authorization is verified (mchid, serial, signature over
//     METHOD\nURL\ntimestamp\nnonce\nbody\n, timestamp skew) and every
//     response, errors included, is signed with the platform key and
//     Wechatpay-Serial = Config.PublicKeyID.
//   - GET /v3/bill/tradebill?bill_date=YYYY-MM-DD&bill_type=REFUND[&tar_type=GZIP]
//     and the download URL it returns (GET /v3/billdownload/file?token=...):
//     the daily refund bill in WeChat Pay's CSV layout. The download request
//     must be signed; its response is not, as on the real API.
//   - v3 refund notifications (AEAD_AES_256_GCM, signed) to the refund's
//     notify_url and, when Config.APIv2Key and Config.NotifyURLV2 are set,
//     APIv2 XML notifications, retried on failure with WeChat Pay's schedule
//     (15s 15s 30s 3m 10m 20m 30m 30m 30m 60m 3h 3h 3h 6h 6h, times
//     Config.TimeFactor): at most 16 attempts per notification, the first
//     at once.
//   - /sandbox/... admin routes (orders, faults, refund records) for tests
//     and development only: they are unauthenticated, so never expose a
//     sandbox beyond loopback. Config.DisableAdmin turns them off.
//
// # Decisions where WeChat Pay's behaviour is not documented
//
//   - Orders are known independently of the merchant, as WeChat knows what
//     was paid: CreateOrder (or POST /sandbox/orders) registers a paid order
//     and its total. A refund for another order is 404 RESOURCE_NOT_EXISTS;
//     an amount.total different from the order's is 400 INVALID_REQUEST; a
//     refund above what is left of the order is 403 NOT_ENOUGH (the real
//     API's code for this case is unconfirmed).
//   - Idempotency is byte-exact: the same out_refund_no with the same body
//     bytes (SHA-256) returns the same refund, any other body is 400
//     INVALID_REQUEST. The real API compares parameters; being stricter
//     catches a client that re-serialises a journaled request.
//   - Creating a refund always answers status PROCESSING (acceptance). The
//     refund reaches its outcome ProcessingDelay*TimeFactor later; with a
//     zero delay it does so before the response is written, so a query right
//     after already sees SUCCESS and the notification may race the response,
//     which real merchants must survive too.
//   - A refund that ends CLOSED releases its amount; PROCESSING, SUCCESS and
//     ABNORMAL hold it. Refunded(out_trade_no) never exceeds the order total.
//     ABNORMAL stays ABNORMAL (apply-abnormal-refund is not served).
//   - The refund bill of a date lists the refunds created that day (Beijing
//     time) that are not CLOSED, with their status at download time. Today's
//     bill is served at once (the real one appears the next morning).
//
// # Faults
//
// SetFault (or POST /sandbox/faults) injects faults per out_trade_no or
// out_refund_no, optionally only on create or on query calls, for a limited
// number of calls: slow responses, bare 500s, SYSTEM_ERROR,
// FREQUENCY_LIMITED, a refund applied but its response lost, bad or probe
// (WECHATPAY/SIGNTEST/) response signatures, CLOSED or ABNORMAL outcomes,
// and notifications that are duplicated, late (after a query already showed
// the outcome), dropped, or first sent with a probe or bad signature.
//
// Refund, Refunded, Submissions and Deliveries expose what the sandbox
// holds so tests can check the merchant against it.
package sandbox
