package wechatpay

import "errors"

// Sentinel errors. Every error returned by this package wraps exactly one of
// them (test with errors.Is), and no error message ever contains key
// material, plaintext or ciphertext.
var (
	// ErrInvalidKey is returned when a key, certificate or APIv3/APIv2 key
	// cannot be parsed, has the wrong type, or has the wrong size.
	ErrInvalidKey = errors.New("wechatpay: invalid key")

	// ErrInvalidArgument is returned when a caller-supplied value (method,
	// URL, nonce, merchant id, serial, timestamp, notification field) is
	// empty or would break the wire format.
	ErrInvalidArgument = errors.New("wechatpay: invalid argument")

	// ErrInvalidNonce is returned when an AEAD nonce is not exactly 12 bytes.
	ErrInvalidNonce = errors.New("wechatpay: invalid AEAD nonce")

	// ErrDecrypt is returned when a ciphertext is not valid base64, is too
	// short, or fails authentication (wrong key, nonce, associated data, or a
	// tampered ciphertext).
	ErrDecrypt = errors.New("wechatpay: decryption failed")

	// ErrBadPadding is returned when AES-ECB plaintext does not end in strict
	// PKCS#7 padding, or the ciphertext is not a whole number of blocks.
	ErrBadPadding = errors.New("wechatpay: bad PKCS#7 padding")

	// ErrMissingHeader is returned when a Wechatpay-Timestamp, -Nonce,
	// -Signature or -Serial header is absent or empty.
	ErrMissingHeader = errors.New("wechatpay: missing header")

	// ErrInvalidHeader is returned when a Wechatpay-* header is present but
	// malformed, for example a non-numeric timestamp.
	ErrInvalidHeader = errors.New("wechatpay: invalid header")

	// ErrUnknownSerial is returned when Wechatpay-Serial names no key held by
	// the Verifier.
	ErrUnknownSerial = errors.New("wechatpay: unknown serial")

	// ErrCertificateExpired is returned when the platform certificate chosen
	// by Wechatpay-Serial is not valid at the verification time.
	ErrCertificateExpired = errors.New("wechatpay: platform certificate not valid now")

	// ErrBadSignature is returned when a signature is not valid base64 or
	// does not verify against the message.
	ErrBadSignature = errors.New("wechatpay: bad signature")

	// ErrProbe is returned instead of ErrBadSignature when the signature
	// starts with "WECHATPAY/SIGNTEST/": WeChat Pay's deliberate probe to
	// check that merchants verify signatures. The message must still be
	// rejected (WeChat Pay then resends it correctly signed), but it is
	// expected traffic and should be counted, not alerted on.
	ErrProbe = errors.New("wechatpay: signature probe")

	// ErrStaleTimestamp is returned when Wechatpay-Timestamp (or an
	// Authorization timestamp) is further from now than the allowed skew, in
	// either direction.
	ErrStaleTimestamp = errors.New("wechatpay: timestamp outside allowed skew")

	// ErrUnsupportedAlgorithm is returned when a notification resource uses
	// an algorithm other than AEAD_AES_256_GCM, or a signature type other
	// than WECHATPAY2-SHA256-RSA2048.
	ErrUnsupportedAlgorithm = errors.New("wechatpay: unsupported algorithm")

	// ErrBadAuthorization is returned when an Authorization header is not a
	// well-formed WECHATPAY2-SHA256-RSA2048 credential.
	ErrBadAuthorization = errors.New("wechatpay: malformed authorization")

	// ErrMalformed is returned when a notification body or its decrypted
	// resource cannot be parsed, or lacks out_refund_no (so it cannot even
	// be routed); other absent fields are ErrIncomplete.
	ErrMalformed = errors.New("wechatpay: malformed message")

	// ErrIncomplete is returned when a notification resource, a v2
	// req_info or a refund object parses but lacks a field WeChat Pay always
	// sends with it (merchant, out_trade_no, refund id, status, amounts): it
	// must be refused like a mismatch, never matched with empty values.
	ErrIncomplete = errors.New("wechatpay: required field absent")

	// ErrMerchantMismatch is returned by CheckMerchant when a message names
	// another merchant than the one expected: another mchid or sp_mchid,
	// another sub_mchid, or a sub_mchid where a direct merchant is expected.
	ErrMerchantMismatch = errors.New("wechatpay: message is for another merchant")

	// ErrTooLarge is returned when a notification body exceeds
	// MaxNotificationSize.
	ErrTooLarge = errors.New("wechatpay: message too large")

	// ErrUnexpectedEvent is returned when a v3 notification is not a refund
	// event (event_type not starting with "REFUND.").
	ErrUnexpectedEvent = errors.New("wechatpay: not a refund notification")

	// ErrReturnFail is returned when an APIv2 notification's return_code is
	// not SUCCESS; the envelope is still returned for logging.
	ErrReturnFail = errors.New("wechatpay: v2 return_code is not SUCCESS")
)
