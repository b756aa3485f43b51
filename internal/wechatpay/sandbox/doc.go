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
//     Wechatpay-Serial = Config.PublicKeyID, or in Config.CertificateMode
//     the platform certificate's serial; the signing key is whichever the
//     credential routes last chose (creds.go).
//   - GET /v3/certificates: the platform certificates served, each
//     encrypted with the APIv3 key in force (AEAD_AES_256_GCM,
//     associated_data "certificate"); 404 RESOURCE_NOT_EXISTS when there is
//     none. RotateCertificate, AddPublicKey, SignWith, RetireCertificate and
//     ChangeAPIv3Key (and /sandbox/credentials) drive every switchover of
//     PARTNER.md §3.
//   - POST /v3/refund/domestic/refunds/{refund_id}/apply-abnormal-refund,
//     signed the same way, to resolve an ABNORMAL refund (see below).
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
// # Several merchants and partner mode
//
// A Server is the books of one merchant: a direct merchant (Config.MchID),
// or one sub-merchant of a service provider (Config.SubMchID, with the
// provider's mchid and keys). Multi serves several behind one address and
// routes each call to its merchant's books; see Multi for WeChat Pay's
// partner rules it enforces (NO_AUTH for a sub_mchid the provider is not
// authorised for). A sub-merchant's notifications carry sp_mchid and
// sub_mchid (v2: sub_mch_id), its bill the sub_mchid as 特约商户号.
//
// # Decisions where WeChat Pay's behaviour is not documented
//
//   - Orders are known independently of the merchant, as WeChat knows what
//     was paid: CreateOrder (or POST /sandbox/orders) registers a paid order
//     and its total. A refund for another order is 404 RESOURCE_NOT_EXISTS;
//     an amount.total different from the order's is 400 INVALID_REQUEST; a
//     refund above what is left of the order is 400 INVALID_REQUEST
//     (PARTNER.md §5; the real API's v3 code for this case is unconfirmed,
//     v2 answers INVALID_REQUEST). NOT_ENOUGH is WeChat Pay's code for the
//     merchant's balance being short; FaultNotEnough answers it (403).
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
//   - With Config.MinRefundSpacing, a new out_refund_no on an order whose
//     previous refund was accepted less than that long ago is 429
//     FREQUENCY_LIMITED, the same answer as FaultFrequencyLimited (WeChat
//     Pay: refunds of one order must be one minute apart, PROTOCOL.md
//     §1.6; its code for this case is undocumented, 429 is its documented
//     rate-limit status, PARTNER.md §4). It is checked after the business rules, so a request
//     that is wrong anyway gets its own error; resubmissions of an accepted
//     number are never refused by it.
//   - An order paid more than 365 days ago is refused with 400
//     INVALID_REQUEST (WeChat Pay: refunds within one year of payment; its
//     code for this is undocumented). Resubmissions of an accepted number
//     are still answered.
//   - The refund bill of a date lists the refunds created that day (Beijing
//     time) that are not CLOSED, with their status at download time. Today's
//     bill is served at once (the real one appears the next morning).
//
// # apply-abnormal-refund
//
// An ABNORMAL refund stays ABNORMAL until the merchant calls
// apply-abnormal-refund with its refund_id and a body {"out_refund_no",
// "type"} where type is USER_BANK_CARD (then bank_type, and bank_account
// and real_name encrypted with RSA-OAEP SHA-1 for the WeChat Pay public
// key named by the Wechatpay-Serial header, are required) or
// MERCHANT_BANK_CARD, the two values of WeChat Pay's merchant
// documentation; other fields are ignored. The answer is 200 with the
// refund object, status PROCESSING, channel OTHER_BANKCARD; the refund
// reaches SUCCESS ProcessingDelay*TimeFactor later and is notified. An
// unknown refund_id is 404 RESOURCE_NOT_EXISTS; a refund that is not
// ABNORMAL (including one already being resolved, so a retry after a lost
// answer) or an out_refund_no that is not this refund's is 400
// INVALID_REQUEST, and the merchant learns the state by querying; a bad
// body is 400 PARAM_ERROR. WeChat Pay documents none of these codes for
// this call.
//
// # Durable books
//
// With Config.StateFile the sandbox, like WeChat Pay, never forgets a
// refund it accepted, even when the process running it is killed: orders,
// accepted refunds (amounts, status and final outcome, refund_id,
// timestamps, notify_url, body hash), the body hashes submitted per
// refund number and the id sequence are saved (temporary file, fsync,
// rename, directory fsync) after every order created, refund accepted,
// new body submitted and status changed, before the call that caused it is
// answered and before any notification of the new status is sent. Queries
// and bills also wait until what they show is saved. New loads the file and
// resumes: a refund still PROCESSING reaches its outcome ProcessingDelay
// after it started processing, measured on Config.Now (at once if that has
// passed), and is notified; a final refund whose notification was not yet
// acknowledged is notified again from the first attempt of the schedule,
// with a new notification id (duplicates are possible, as with WeChat
// Pay). Faults, delivery logs and bill download links are not kept; the
// submission count of RefundRecord is saved with the next change, so it may
// miss identical resubmissions just before a kill. One Server at a time
// may use a file. Close saves a last time and detaches the file: from a
// later call that would change the books on, calls are answered 500
// SYSTEM_ERROR, so nothing is answered that the next sandbox on the file
// would not know.
//
// # Faults
//
// SetFault (or POST /sandbox/faults) injects faults per out_trade_no or
// out_refund_no, optionally only on create, query or apply-abnormal-refund
// calls (Fault.Op), for a limited number of calls: slow responses, bare
// 500s, SYSTEM_ERROR, FREQUENCY_LIMITED, 202 Accepted, a call applied but
// its response lost (500 or a dropped connection), bad or probe
// (WECHATPAY/SIGNTEST/) response signatures, CLOSED or ABNORMAL outcomes,
// and notifications that are duplicated, late (after a query already showed
// the outcome), dropped, or first sent with a probe or bad signature.
//
// Refund, Refunded, Submissions and Deliveries expose what the sandbox
// holds so tests can check the merchant against it.
package sandbox
