package reservation

import (
	"encoding/base64"
	"math"
	"strconv"
	"time"

	"github.com/refundd/refundd/internal/jsontext"
)

// The event payloads are written by hand, in the exact bytes encoding/json
// gives them (field order, omitempty and omitzero, its string escaping,
// base64 for []byte, RFC 3339 for times): the journal stores these bytes and
// hashes over stored records must not change. encoding/json costs several
// allocations and a reflective walk per event, on every append.
// TestEncode_SameBytesAsEncodingJSON* hold the two to the same bytes.

// appendData appends d's JSON to dst. ok is false when encoding/json would
// fail (a time it cannot write) or when d is not a known type; the caller
// then lets encoding/json produce its error.
func appendData(dst []byte, d EventData) (out []byte, ok bool) {
	w := jsonWriter{b: dst, ok: true}
	switch d := d.(type) {
	case Registered:
		w.str(`{"reservation_id":`, d.ReservationID)
		w.str(`,"user_id":`, d.UserID)
		w.str(`,"out_trade_no":`, d.OutTradeNo)
		w.strOmit(`,"transaction_id":`, d.TransactionID)
		w.int(`,"amount":`, d.Amount)
		w.str(`,"currency":`, d.Currency)
		w.timeOmit(`,"paid_at":`, d.PaidAt)
		w.strOmit(`,"merchant":`, d.Merchant)
	case Canceled:
		w.int(`{"refunded":`, d.Refunded)
	case RefundRequested:
		w.str(`{"refund_no":`, d.RefundNo)
		w.int(`,"number":`, int64(d.Number))
		w.str(`,"idempotency_key":`, d.IdempotencyKey)
		w.str(`,"fingerprint":`, d.Fingerprint)
		w.int(`,"amount":`, d.Amount)
		w.strOmit(`,"reason":`, d.Reason)
		w.strOmit(`,"reason_code":`, d.ReasonCode)
		if !d.Metadata.IsZero() {
			w.b = d.Metadata.AppendJSON(append(w.b, `,"metadata":`...))
		}
	case SubmissionStarted:
		w.str(`{"refund_no":`, d.RefundNo)
		w.int(`,"attempt":`, int64(d.Attempt))
		if len(d.Request) > 0 {
			w.bytes(`,"request":`, d.Request)
		}
		w.time(`,"due_at":`, d.DueAt)
	case QueryStarted:
		w.str(`{"refund_no":`, d.RefundNo)
		w.int(`,"query":`, int64(d.Query))
		w.time(`,"due_at":`, d.DueAt)
	case ProviderResult:
		w.str(`{"refund_no":`, d.RefundNo)
		w.str(`,"source":`, string(d.Source))
		if d.Attempt != 0 {
			w.int(`,"attempt":`, int64(d.Attempt))
		}
		w.str(`,"outcome":`, string(d.Outcome))
		w.strOmit(`,"code":`, d.Code)
		w.strOmit(`,"message":`, d.Message)
		w.strOmit(`,"provider_id":`, d.ProviderID)
		w.str(`,"from":`, string(d.From))
		w.str(`,"to":`, string(d.To))
		w.timeOmit(`,"success_time":`, d.SuccessTime)
		w.timeOmit(`,"due_at":`, d.DueAt)
		if d.Retry {
			w.b = append(w.b, `,"retry":true`...)
		}
	case SubmissionScheduled:
		w.str(`{"refund_no":`, d.RefundNo)
		w.bytes(`,"request":`, d.Request)
		w.time(`,"due_at":`, d.DueAt)
	case Resolved:
		w.str(`{"refund_no":`, d.RefundNo)
		w.str(`,"reason":`, d.Reason)
	case Abandoned:
		w.str(`{"refund_no":`, d.RefundNo)
		w.strOmit(`,"reason":`, d.Reason)
	case Conflict:
		w.str(`{"refund_no":`, d.RefundNo)
		w.str(`,"state":`, string(d.State))
		w.str(`,"source":`, string(d.Source))
		w.str(`,"outcome":`, string(d.Outcome))
		w.strOmit(`,"code":`, d.Code)
		w.strOmit(`,"provider_id":`, d.ProviderID)
	case FlaggedStuck:
		w.str(`{"refund_no":`, d.RefundNo)
	case RefundRecovered:
		w.str(`{"refund_no":`, d.RefundNo)
		w.int(`,"number":`, int64(d.Number))
		w.int(`,"amount":`, d.Amount)
		w.str(`,"state":`, string(d.State))
		w.str(`,"provider_id":`, d.ProviderID)
		w.timeOmit(`,"success_time":`, d.SuccessTime)
		w.timeOmit(`,"due_at":`, d.DueAt)
	default:
		return dst, false
	}
	w.b = append(w.b, '}')
	return w.b, w.ok
}

// dataSizeHint is about the length of d's JSON: each case is the object's
// skeleton with every member present and its values empty, plus the
// values. It is exact when every member is present, no string needs
// escaping and the times are in UTC, and sizes the buffer Encode writes
// into.
func dataSizeHint(d EventData) int {
	switch d := d.(type) {
	case Registered:
		return len(`{"reservation_id":"","user_id":"","out_trade_no":"","transaction_id":"","amount":,"currency":"","paid_at":,"merchant":""}`) +
			len(d.ReservationID) + len(d.UserID) + len(d.OutTradeNo) + len(d.TransactionID) + intLen(d.Amount) + len(d.Currency) + timeLen(d.PaidAt) +
			len(d.Merchant)
	case Canceled:
		return len(`{"refunded":}`) + intLen(d.Refunded)
	case RefundRequested:
		return len(`{"refund_no":"","number":,"idempotency_key":"","fingerprint":"","amount":,"reason":"","reason_code":"","metadata":}`) +
			len(d.RefundNo) + intLen(int64(d.Number)) + len(d.IdempotencyKey) + len(d.Fingerprint) + intLen(d.Amount) + len(d.Reason) +
			len(d.ReasonCode) + len(d.Metadata.obj)
	case SubmissionStarted:
		return len(`{"refund_no":"","attempt":,"request":"","due_at":}`) +
			len(d.RefundNo) + intLen(int64(d.Attempt)) + base64.StdEncoding.EncodedLen(len(d.Request)) + timeLen(d.DueAt)
	case QueryStarted:
		return len(`{"refund_no":"","query":,"due_at":}`) + len(d.RefundNo) + intLen(int64(d.Query)) + timeLen(d.DueAt)
	case ProviderResult:
		return len(`{"refund_no":"","source":"","attempt":,"outcome":"","code":"","message":"","provider_id":"","from":"","to":"","success_time":,"due_at":,"retry":true}`) +
			len(d.RefundNo) + len(d.Source) + intLen(int64(d.Attempt)) + len(d.Outcome) + len(d.Code) + len(d.Message) + len(d.ProviderID) +
			len(d.From) + len(d.To) + timeLen(d.SuccessTime) + timeLen(d.DueAt)
	case SubmissionScheduled:
		return len(`{"refund_no":"","request":"","due_at":}`) + len(d.RefundNo) + base64.StdEncoding.EncodedLen(len(d.Request)) + timeLen(d.DueAt)
	case Resolved:
		return len(`{"refund_no":"","reason":""}`) + len(d.RefundNo) + len(d.Reason)
	case Abandoned:
		return len(`{"refund_no":"","reason":""}`) + len(d.RefundNo) + len(d.Reason)
	case Conflict:
		return len(`{"refund_no":"","state":"","source":"","outcome":"","code":"","provider_id":""}`) +
			len(d.RefundNo) + len(d.State) + len(d.Source) + len(d.Outcome) + len(d.Code) + len(d.ProviderID)
	case FlaggedStuck:
		return len(`{"refund_no":""}`) + len(d.RefundNo)
	case RefundRecovered:
		return len(`{"refund_no":"","number":,"amount":,"state":"","provider_id":"","success_time":,"due_at":}`) +
			len(d.RefundNo) + intLen(int64(d.Number)) + intLen(d.Amount) + len(d.State) + len(d.ProviderID) +
			timeLen(d.SuccessTime) + timeLen(d.DueAt)
	}
	return 64
}

// timeLen is the length of t's JSON when t is in UTC (and a little short
// otherwise): "2006-01-02T15:04:05Z" with the fraction of a second that
// RFC 3339 with nanoseconds writes.
func timeLen(t time.Time) int {
	n := len(`"2006-01-02T15:04:05Z"`)
	if ns := t.Nanosecond(); ns != 0 {
		n += 10 // ".999999999"
		for ; ns%10 == 0; ns /= 10 {
			n--
		}
	}
	return n
}

// intLen is the length of n in decimal.
func intLen(n int64) int {
	l := 1
	if n < 0 {
		l++
		if n == math.MinInt64 {
			return 20
		}
		n = -n
	}
	for ; n >= 10; n /= 10 {
		l++
	}
	return l
}

// jsonWriter appends one JSON object's members; key is the member's
// separator, quoted name and colon. ok turns false on a value encoding/json
// would refuse.
type jsonWriter struct {
	b  []byte
	ok bool
}

func (w *jsonWriter) str(key, s string) {
	w.b = jsontext.AppendString(append(w.b, key...), s)
}

// strOmit is str for a field tagged omitempty.
func (w *jsonWriter) strOmit(key, s string) {
	if s != "" {
		w.str(key, s)
	}
}

func (w *jsonWriter) int(key string, n int64) {
	w.b = strconv.AppendInt(append(w.b, key...), n, 10)
}

// bytes writes a []byte as encoding/json does: base64 (standard, padded),
// and null for a nil slice.
func (w *jsonWriter) bytes(key string, p []byte) {
	w.b = append(w.b, key...)
	if p == nil {
		w.b = append(w.b, "null"...)
		return
	}
	w.b = append(w.b, '"')
	w.b = base64.StdEncoding.AppendEncode(w.b, p)
	w.b = append(w.b, '"')
}

// time writes t as its MarshalJSON does: RFC 3339 with nanoseconds, in t's
// own zone. AppendText writes the same text, with the same checks.
func (w *jsonWriter) time(key string, t time.Time) {
	w.b = append(append(w.b, key...), '"')
	b, err := t.AppendText(w.b)
	if err != nil {
		w.ok = false
		return
	}
	w.b = append(b, '"')
}

// timeOmit is time for a field tagged omitzero.
func (w *jsonWriter) timeOmit(key string, t time.Time) {
	if !t.IsZero() {
		w.time(key, t)
	}
}
