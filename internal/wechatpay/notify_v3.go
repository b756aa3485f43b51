package wechatpay

import (
	"encoding/json"
	"fmt"
	"strings"
)

// MaxNotificationSize is the largest notification body the parsers accept.
// Real refund notifications are under 2 KiB; callers should cap the HTTP
// body themselves (http.MaxBytesReader) at this size or less.
const MaxNotificationSize = 64 << 10

// APIv3 refund event types (Notification.EventType).
const (
	EventRefundSuccess  = "REFUND.SUCCESS"
	EventRefundAbnormal = "REFUND.ABNORMAL"
	EventRefundClosed   = "REFUND.CLOSED"
)

// APIv3 refund statuses (RefundResource.RefundStatus). Notifications carry
// SUCCESS, CLOSED or ABNORMAL; PROCESSING appears in query responses.
const (
	RefundSuccess    = "SUCCESS"
	RefundClosed     = "CLOSED"
	RefundProcessing = "PROCESSING"
	RefundAbnormal   = "ABNORMAL"
)

// refundEventPrefix starts every refund event type.
const refundEventPrefix = "REFUND."

// Notification is the JSON envelope of an APIv3 notification.
type Notification struct {
	ID           string            `json:"id"`            // unique per notification; opaque (UUID or EV-...)
	CreateTime   string            `json:"create_time"`   // RFC 3339
	ResourceType string            `json:"resource_type"` // "encrypt-resource"
	EventType    string            `json:"event_type"`    // REFUND.SUCCESS, REFUND.ABNORMAL, REFUND.CLOSED
	Summary      string            `json:"summary"`       // human text, e.g. 退款成功
	Resource     EncryptedResource `json:"resource"`
}

// EncryptedResource is the encrypted payload of a Notification.
type EncryptedResource struct {
	OriginalType   string `json:"original_type"` // "refund"
	Algorithm      string `json:"algorithm"`     // AEAD_AES_256_GCM
	Ciphertext     string `json:"ciphertext"`    // base64(ciphertext||tag)
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// RefundResource is the decrypted resource of a refund notification. The
// status field is refund_status (the refund API's response calls it status).
// Enum-like fields are plain strings so unknown or empty values parse;
// unknown JSON fields are ignored. Amounts are fen.
type RefundResource struct {
	MchID               string       `json:"mchid,omitempty"`     // direct merchants
	SpMchID             string       `json:"sp_mchid,omitempty"`  // partner mode
	SubMchID            string       `json:"sub_mchid,omitempty"` // partner mode
	TransactionID       string       `json:"transaction_id"`
	OutTradeNo          string       `json:"out_trade_no"`
	RefundID            string       `json:"refund_id"`
	OutRefundNo         string       `json:"out_refund_no"`
	RefundStatus        string       `json:"refund_status"`
	SuccessTime         string       `json:"success_time,omitempty"` // RFC 3339, only on SUCCESS
	UserReceivedAccount string       `json:"user_received_account"`
	Amount              RefundAmount `json:"amount"`
}

// RefundAmount holds a refund notification's amounts in fen.
type RefundAmount struct {
	Total       int64 `json:"total"`        // order total
	Refund      int64 `json:"refund"`       // refund requested
	PayerTotal  int64 `json:"payer_total"`  // paid by the user
	PayerRefund int64 `json:"payer_refund"` // returned to the user
}

// ParseRefundNotification authenticates and decodes an APIv3 refund
// notification, in this order: body size, v.Verify over the raw body (before
// anything is decrypted), envelope JSON, event type REFUND.*, algorithm
// AEAD_AES_256_GCM, decryption with apiV3Key, resource JSON. It does not
// compare the result with the merchant's records; the caller must (mchid,
// out_refund_no, amounts), and must treat duplicates as normal.
//
// Errors wrap ErrTooLarge, ErrInvalidArgument (nil Verifier), ErrInvalidKey
// (apiV3Key not 32 bytes), any error of Verifier.Verify (ErrProbe among
// them), ErrMalformed, ErrUnexpectedEvent, ErrUnsupportedAlgorithm,
// ErrInvalidNonce, ErrDecrypt or ErrIncomplete (the resource lacks mchid,
// out_trade_no, refund_id, refund_status or an amount: refuse it like a
// mismatch). Once the envelope has parsed, the returned
// Notification is filled even on error, for logging.
func ParseRefundNotification(v *Verifier, apiV3Key []byte, h Headers, body []byte) (Notification, RefundResource, error) {
	if len(body) > MaxNotificationSize {
		return Notification{}, RefundResource{}, fmt.Errorf("%w: body is %d bytes, max %d", ErrTooLarge, len(body), MaxNotificationSize)
	}
	if v == nil {
		return Notification{}, RefundResource{}, fmt.Errorf("%w: nil Verifier", ErrInvalidArgument)
	}
	// A wrong-size key is configuration, not input: report it before
	// spending a signature check on every notification.
	if len(apiV3Key) != APIv3KeySize {
		return Notification{}, RefundResource{}, fmt.Errorf("%w: APIv3 key is %d bytes, want %d", ErrInvalidKey, len(apiV3Key), APIv3KeySize)
	}
	if err := v.Verify(h, body); err != nil {
		return Notification{}, RefundResource{}, err
	}
	return decodeRefundNotification(apiV3Key, body)
}

// decodeRefundNotification is ParseRefundNotification after the signature
// check. The key size has been checked by the caller.
func decodeRefundNotification(apiV3Key, body []byte) (Notification, RefundResource, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return Notification{}, RefundResource{}, fmt.Errorf("%w: notification JSON: %s", ErrMalformed, jsonErr(err))
	}
	if !strings.HasPrefix(n.EventType, refundEventPrefix) {
		return n, RefundResource{}, fmt.Errorf("%w: event_type %q", ErrUnexpectedEvent, limit(n.EventType, 40))
	}
	if n.Resource.Algorithm != AlgorithmAEADAES256GCM {
		return n, RefundResource{}, fmt.Errorf("%w: resource algorithm %q", ErrUnsupportedAlgorithm, limit(n.Resource.Algorithm, 40))
	}
	pt, err := DecryptAEAD(apiV3Key, n.Resource.Nonce, n.Resource.AssociatedData, n.Resource.Ciphertext)
	if err != nil {
		return n, RefundResource{}, fmt.Errorf("notification %q: %w", limit(n.ID, 64), err)
	}
	r, err := parseRefundResource(pt)
	if err != nil {
		return n, RefundResource{}, err
	}
	return n, r, nil
}

// parseRefundResource decodes the decrypted resource. It requires
// out_refund_no (to route it), rejects negative amounts, and refuses a
// resource lacking a field WeChat Pay always sends (ErrIncomplete); matching
// the values against local records is the caller's business check.
func parseRefundResource(plaintext []byte) (RefundResource, error) {
	var r RefundResource
	if err := json.Unmarshal(plaintext, &r); err != nil {
		return RefundResource{}, fmt.Errorf("%w: refund resource JSON: %s", ErrMalformed, jsonErr(err))
	}
	if r.OutRefundNo == "" {
		return RefundResource{}, fmt.Errorf("%w: refund resource has no out_refund_no", ErrMalformed)
	}
	a := r.Amount
	if a.Total < 0 || a.Refund < 0 || a.PayerTotal < 0 || a.PayerRefund < 0 {
		return RefundResource{}, fmt.Errorf("%w: refund resource has a negative amount", ErrMalformed)
	}
	if err := checkResourceComplete(plaintext, r); err != nil {
		return RefundResource{}, err
	}
	return r, nil
}

// BuildRefundNotification encrypts r and returns the JSON body of a refund
// notification, for sandboxes and tests; sign it with SignHeaders. Fields of
// n fill the envelope, with these defaults when empty: EventType and Summary
// from r.RefundStatus (SUCCESS, CLOSED, ABNORMAL), ResourceType
// "encrypt-resource", Resource.Algorithm AEAD_AES_256_GCM,
// Resource.OriginalType "refund", Resource.Nonce RandomAEADNonce().
// Resource.AssociatedData is used as given (WeChat Pay sends "refund"; ""
// is allowed). n.Resource.Ciphertext is ignored.
//
// Errors wrap ErrInvalidArgument (no ID or CreateTime, no out_refund_no, or
// no EventType and an unknown status), ErrUnsupportedAlgorithm, ErrInvalidKey
// or ErrInvalidNonce.
func BuildRefundNotification(apiV3Key []byte, n Notification, r RefundResource) ([]byte, error) {
	if n.ID == "" || n.CreateTime == "" {
		return nil, fmt.Errorf("%w: notification needs id and create_time", ErrInvalidArgument)
	}
	if r.OutRefundNo == "" {
		return nil, fmt.Errorf("%w: refund resource needs out_refund_no", ErrInvalidArgument)
	}
	if n.EventType == "" || n.Summary == "" {
		event, summary, ok := refundEvent(r.RefundStatus)
		if !ok && n.EventType == "" {
			return nil, fmt.Errorf("%w: no event_type and no event for refund_status %q", ErrInvalidArgument, limit(r.RefundStatus, 40))
		}
		if n.EventType == "" {
			n.EventType = event
		}
		if n.Summary == "" {
			n.Summary = summary
		}
	}
	if n.ResourceType == "" {
		n.ResourceType = "encrypt-resource"
	}
	res := &n.Resource
	if res.Algorithm == "" {
		res.Algorithm = AlgorithmAEADAES256GCM
	}
	if res.Algorithm != AlgorithmAEADAES256GCM {
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedAlgorithm, limit(res.Algorithm, 40))
	}
	if res.OriginalType == "" {
		res.OriginalType = "refund"
	}
	if res.Nonce == "" {
		res.Nonce = RandomAEADNonce()
	}
	pt, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal refund resource: %s", ErrInvalidArgument, err)
	}
	if res.Ciphertext, err = EncryptAEAD(apiV3Key, res.Nonce, res.AssociatedData, pt); err != nil {
		return nil, err
	}
	body, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("%w: marshal notification: %s", ErrInvalidArgument, err)
	}
	return body, nil
}

// refundEvent maps a refund status to the event type and summary WeChat Pay
// sends with it.
func refundEvent(status string) (event, summary string, ok bool) {
	switch status {
	case RefundSuccess:
		return EventRefundSuccess, "退款成功", true
	case RefundClosed:
		return EventRefundClosed, "退款关闭", true
	case RefundAbnormal:
		return EventRefundAbnormal, "退款异常", true
	}
	return "", "", false
}

// jsonErr describes a JSON error without echoing input: syntax and type
// errors carry offsets and Go types, never values.
func jsonErr(err error) string {
	switch e := err.(type) {
	case *json.SyntaxError:
		return fmt.Sprintf("syntax error at offset %d", e.Offset)
	case *json.UnmarshalTypeError:
		return fmt.Sprintf("field %s: wrong JSON type for %s", limit(e.Field, 64), e.Type)
	}
	return "invalid JSON"
}
