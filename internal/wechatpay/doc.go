// Package wechatpay speaks the WeChat Pay wire protocol that refundd needs,
// on the Go standard library only.
//
// It does IO in two places: Client (client.go), the engine's provider, which
// creates and queries refunds over HTTP (its RequestBody, the submission
// encoder, is pure), and Client.DownloadBill (bill.go), which fetches a
// refund bill. Everything else is primitives: key parsing (keys.go), APIv3 request
// signing (sign.go) and Authorization headers (authorization.go),
// verification of WeChat Pay responses and notifications against public keys
// and platform certificates (verify.go), AEAD_AES_256_GCM resource encryption (aead.go), APIv3 refund
// notifications (notify_v3.go), and the legacy APIv2 XML refund notification
// with its AES-256-ECB req_info (ecb.go, notify_v2.go). Service-provider
// (partner) mode: a Client per account serves its merchants through
// Client.For (target.go), and Merchant/CheckMerchant (merchant.go) name
// and match the merchant a message is for. Each parser has a
// builder next to it so a sandbox can produce the same bytes WeChat Pay
// would.
//
// Rules the code keeps:
//
//   - Verify over the raw bytes received; never re-serialise before
//     verifying. Verify the signature before decrypting anything.
//   - Outside input never panics: nonce and key lengths are checked before
//     crypto/cipher sees them, sizes are capped, fuzz targets cover every
//     parser.
//   - Errors wrap one sentinel from errors.go and never contain key
//     material, plaintext or ciphertext.
//   - Money is int64 fen.
//   - Nothing here reads the clock directly except through Verifier.Now and
//     ClientConfig's clock. Only Client does IO, bounded by its caller's
//     context; the primitives leave HTTP, retries and body size limits to
//     their callers.
//
// Signature probes (Wechatpay-Signature starting "WECHATPAY/SIGNTEST/") are
// rejected with ErrProbe, distinct from ErrBadSignature, so callers can count
// them without alerting.
package wechatpay
