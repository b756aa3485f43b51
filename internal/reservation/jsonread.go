package reservation

import (
	"encoding/base64"
	"math"
	"time"
	"unicode/utf8"
)

// decodeCanonical reads a record in the exact form Encode writes: the
// envelope's members in order, the data's in field order (any of them
// absent), no whitespace, strings without escapes, integers without
// fraction or exponent. ok is false for anything else, and Decode then
// reads the record with encoding/json: what this accepts, it reads to the
// same event encoding/json would (FuzzDecode and
// TestDecodeCanonical_SameAsEncodingJSON hold it to that), without
// reflection and with an allocation per string rather than several per
// value. Journals hold only records Encode wrote, whose strings rarely need
// escaping.
func decodeCanonical(typ string, data []byte) (ev Event, ok bool) {
	r := jsonReader{b: data, ok: true}
	r.expect(`{"at":`)
	ev.At = r.time()
	r.expect(`,"by":`)
	ev.By = r.word()
	r.expect(`,"data":`)
	r.open()
	switch typ {
	case TypeRegistered:
		var d Registered
		if r.member("reservation_id") {
			d.ReservationID = r.str()
		}
		if r.member("user_id") {
			d.UserID = r.str()
		}
		if r.member("out_trade_no") {
			d.OutTradeNo = r.str()
		}
		if r.member("transaction_id") {
			d.TransactionID = r.str()
		}
		if r.member("amount") {
			d.Amount = r.int64()
		}
		if r.member("currency") {
			d.Currency = r.str()
		}
		if r.member("paid_at") {
			d.PaidAt = r.time()
		}
		if r.member("merchant") {
			d.Merchant = r.str()
		}
		ev.Data = d
	case TypeCanceled:
		var d Canceled
		if r.member("refunded") {
			d.Refunded = r.int64()
		}
		ev.Data = d
	case TypeRefundRequested:
		var d RefundRequested
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("number") {
			d.Number = r.int()
		}
		if r.member("idempotency_key") {
			d.IdempotencyKey = r.str()
		}
		if r.member("fingerprint") {
			d.Fingerprint = r.str()
		}
		if r.member("amount") {
			d.Amount = r.int64()
		}
		if r.member("reason") {
			d.Reason = r.str()
		}
		if r.member("reason_code") {
			d.ReasonCode = r.str()
		}
		if r.member("metadata") {
			d.Metadata = NewMetadata(r.strMap())
		}
		ev.Data = d
	case TypeSubmissionStarted:
		var d SubmissionStarted
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("attempt") {
			d.Attempt = r.int()
		}
		if r.member("request") {
			d.Request = r.bytes()
		}
		if r.member("due_at") {
			d.DueAt = r.time()
		}
		ev.Data = d
	case TypeQueryStarted:
		var d QueryStarted
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("query") {
			d.Query = r.int()
		}
		if r.member("due_at") {
			d.DueAt = r.time()
		}
		ev.Data = d
	case TypeProviderResult:
		var d ProviderResult
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("source") {
			d.Source = Source(r.word())
		}
		if r.member("attempt") {
			d.Attempt = r.int()
		}
		if r.member("outcome") {
			d.Outcome = OutcomeKind(r.word())
		}
		if r.member("code") {
			d.Code = r.str()
		}
		if r.member("message") {
			d.Message = r.str()
		}
		if r.member("provider_id") {
			d.ProviderID = r.str()
		}
		if r.member("from") {
			d.From = RefundState(r.word())
		}
		if r.member("to") {
			d.To = RefundState(r.word())
		}
		if r.member("success_time") {
			d.SuccessTime = r.time()
		}
		if r.member("due_at") {
			d.DueAt = r.time()
		}
		if r.member("retry") {
			d.Retry = r.bool()
		}
		ev.Data = d
	case TypeAbandoned:
		var d Abandoned
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("reason") {
			d.Reason = r.str()
		}
		ev.Data = d
	case TypeConflict:
		var d Conflict
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("state") {
			d.State = RefundState(r.word())
		}
		if r.member("source") {
			d.Source = Source(r.word())
		}
		if r.member("outcome") {
			d.Outcome = OutcomeKind(r.word())
		}
		if r.member("code") {
			d.Code = r.str()
		}
		if r.member("provider_id") {
			d.ProviderID = r.str()
		}
		ev.Data = d
	case TypeFlaggedStuck:
		var d FlaggedStuck
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		ev.Data = d
	case TypeSubmissionWaits:
		var d SubmissionScheduled
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("request") {
			d.Request = r.bytes()
		}
		if r.member("due_at") {
			d.DueAt = r.time()
		}
		ev.Data = d
	case TypeResolved:
		var d Resolved
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("reason") {
			d.Reason = r.str()
		}
		ev.Data = d
	case TypeRefundRecovered:
		var d RefundRecovered
		if r.member("refund_no") {
			d.RefundNo = r.str()
		}
		if r.member("number") {
			d.Number = r.int()
		}
		if r.member("amount") {
			d.Amount = r.int64()
		}
		if r.member("state") {
			d.State = RefundState(r.word())
		}
		if r.member("provider_id") {
			d.ProviderID = r.str()
		}
		if r.member("success_time") {
			d.SuccessTime = r.time()
		}
		if r.member("due_at") {
			d.DueAt = r.time()
		}
		ev.Data = d
	default:
		return Event{}, false
	}
	r.expect("}}")
	if !r.ok || r.i != len(r.b) {
		return Event{}, false
	}
	return ev, true
}

// jsonReader reads the canonical JSON decodeCanonical accepts. Once ok is
// false every method does nothing.
type jsonReader struct {
	b     []byte
	i     int
	ok    bool
	first bool // no member read yet in the current object
}

// expect consumes s.
func (r *jsonReader) expect(s string) {
	if !r.ok || len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		r.ok = false
		return
	}
	r.i += len(s)
}

// open consumes the '{' of an object.
func (r *jsonReader) open() {
	r.expect("{")
	r.first = true
}

// member consumes the separator and key of the object's next member if its
// key is name; the caller then reads the value.
func (r *jsonReader) member(name string) bool {
	if !r.ok {
		return false
	}
	j := r.i
	if !r.first {
		if j >= len(r.b) || r.b[j] != ',' {
			return false
		}
		j++
	}
	end := j + len(name) + 3 // "name":
	if end > len(r.b) || r.b[j] != '"' || string(r.b[j+1:j+1+len(name)]) != name || r.b[end-2] != '"' || r.b[end-1] != ':' {
		return false
	}
	r.i, r.first = end, false
	return true
}

// rawString consumes a string literal without escapes or control bytes
// and returns its contents; ascii says every byte is below 0x80.
func (r *jsonReader) rawString() (s []byte, ascii bool) {
	if !r.ok || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.ok = false
		return nil, false
	}
	ascii = true
	for j := r.i + 1; j < len(r.b); j++ {
		switch c := r.b[j]; {
		case c == '"':
			s = r.b[r.i+1 : j]
			r.i = j + 1
			return s, ascii
		case c == '\\' || c < 0x20:
			r.ok = false
			return nil, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	r.ok = false
	return nil, false
}

// str reads a string. Invalid UTF-8 is left to encoding/json, which
// replaces it.
func (r *jsonReader) str() string {
	s, ascii := r.rawString()
	if !r.ok || (!ascii && !utf8.Valid(s)) {
		r.ok = false
		return ""
	}
	return string(s)
}

// word reads a string that is usually one of a closed set (states,
// outcomes, sources, the engine's principals): those are not allocated
// again for every event.
func (r *jsonReader) word() string {
	s, _ := r.rawString()
	if !r.ok {
		return ""
	}
	switch string(s) { // compared without allocating
	case "PROCESSING":
		return "PROCESSING"
	case "SUCCEEDED":
		return "SUCCEEDED"
	case "FAILED":
		return "FAILED"
	case "UNKNOWN":
		return "UNKNOWN"
	case "REJECTED":
		return "REJECTED"
	case "ABNORMAL":
		return "ABNORMAL"
	case "NOT_FOUND":
		return "NOT_FOUND"
	case "response":
		return "response"
	case "notification":
		return "notification"
	case "query":
		return "query"
	case "engine":
		return "engine"
	case "provider":
		return "provider"
	}
	if !utf8.Valid(s) {
		r.ok = false
		return ""
	}
	return string(s)
}

// strMap reads a non-empty object of strings whose keys are in strictly
// increasing order, as Encode writes a map[string]string; anything else
// (an empty object, a repeated or unsorted key) is left to encoding/json.
func (r *jsonReader) strMap() map[string]string {
	r.expect("{")
	m := map[string]string{}
	prev := ""
	for r.ok {
		if len(m) > 0 {
			if r.i < len(r.b) && r.b[r.i] == '}' {
				r.i++
				return m
			}
			r.expect(",")
		}
		k := r.str()
		r.expect(":")
		v := r.str()
		if !r.ok || (len(m) > 0 && k <= prev) {
			r.ok = false
			break
		}
		m[k], prev = v, k
	}
	return nil
}

// int64 reads an integer: -?(0|[1-9][0-9]*), within int64.
func (r *jsonReader) int64() int64 {
	if !r.ok {
		return 0
	}
	j, neg := r.i, false
	if j < len(r.b) && r.b[j] == '-' {
		j, neg = j+1, true
	}
	start := j
	var mag uint64
	for ; j < len(r.b) && '0' <= r.b[j] && r.b[j] <= '9'; j++ {
		if mag > (math.MaxUint64-9)/10 {
			r.ok = false
			return 0
		}
		mag = mag*10 + uint64(r.b[j]-'0')
	}
	switch {
	case j == start, j-start > 1 && r.b[start] == '0':
		r.ok = false // no digits, or a leading zero: not JSON
		return 0
	case neg && mag <= 1<<63:
		r.i = j
		return int64(-mag) // -(1<<63) wraps to itself, math.MinInt64
	case !neg && mag <= math.MaxInt64:
		r.i = j
		return int64(mag)
	}
	r.ok = false // out of range: encoding/json refuses it
	return 0
}

// int reads an integer within int.
func (r *jsonReader) int() int {
	n := r.int64()
	if int64(int(n)) != n {
		r.ok = false
		return 0
	}
	return int(n)
}

// bool reads true or false.
func (r *jsonReader) bool() bool {
	if !r.ok {
		return false
	}
	if len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "true" {
		r.i += 4
		return true
	}
	r.expect("false")
	return false
}

// time reads a time as encoding/json does: the quoted literal, as is, to
// time.Time's UnmarshalJSON.
func (r *jsonReader) time() time.Time {
	start := r.i
	_, ascii := r.rawString()
	if !r.ok || !ascii {
		r.ok = false
		return time.Time{}
	}
	var t time.Time
	if err := t.UnmarshalJSON(r.b[start:r.i]); err != nil {
		r.ok = false
		return time.Time{}
	}
	return t
}

// bytes reads a []byte as encoding/json does: null as nil, a string as
// standard padded base64, into a buffer of its decoded length's bound.
func (r *jsonReader) bytes() []byte {
	if r.ok && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return nil
	}
	s, _ := r.rawString()
	if !r.ok {
		return nil
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, s)
	if err != nil {
		r.ok = false
		return nil
	}
	return b[:n]
}
