package simprovider

import (
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/jsontext"
)

// The stub sits inside both services that bench/compare.sh measures
// (refundd and the PostgreSQL baseline), so whatever it costs is in both
// numbers; its encoding/json round trip of this small body was ~4% of
// refundd's CPU under load. So the body is written by hand, in exactly the
// bytes json.Marshal gives (they are journaled and compared byte for byte
// on resubmission), and read by hand in that one form. Anything else goes
// to json.Unmarshal, so every body reads as it did before: body_test.go
// holds both halves to encoding/json.

// appendBody appends json.Marshal(*b)'s bytes to dst: fields in struct
// order, out_trade_no, transaction_id and reason left out when empty.
func appendBody(dst []byte, b *body) []byte {
	dst = append(dst, '{')
	if b.OutTradeNo != "" {
		dst = append(dst, `"out_trade_no":`...)
		dst = append(jsontext.AppendString(dst, b.OutTradeNo), ',')
	}
	if b.TransactionID != "" {
		dst = append(dst, `"transaction_id":`...)
		dst = append(jsontext.AppendString(dst, b.TransactionID), ',')
	}
	dst = append(dst, `"out_refund_no":`...)
	dst = jsontext.AppendString(dst, b.OutRefundNo)
	if b.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = jsontext.AppendString(dst, b.Reason)
	}
	dst = append(dst, `,"amount":{"refund":`...)
	dst = strconv.AppendInt(dst, b.Amount.Refund, 10)
	dst = append(dst, `,"total":`...)
	dst = strconv.AppendInt(dst, b.Amount.Total, 10)
	dst = append(dst, `,"currency":`...)
	dst = jsontext.AppendString(dst, b.Amount.Currency)
	return append(dst, "}}"...)
}

// bodySize is the length of appendBody's output when no string needs an
// escape (longer otherwise; append then grows the buffer).
func bodySize(b *body) int {
	n := len(`{"out_refund_no":"","amount":{"refund":,"total":,"currency":""}}`) +
		len(b.OutRefundNo) + intLen(b.Amount.Refund) + intLen(b.Amount.Total) + len(b.Amount.Currency)
	if b.OutTradeNo != "" {
		n += len(`"out_trade_no":"",`) + len(b.OutTradeNo)
	}
	if b.TransactionID != "" {
		n += len(`"transaction_id":"",`) + len(b.TransactionID)
	}
	if b.Reason != "" {
		n += len(`,"reason":""`) + len(b.Reason)
	}
	return n
}

// intLen is the length of n in decimal.
func intLen(n int64) int {
	l := 1
	u := uint64(n)
	if n < 0 {
		l++
		u = -u // two's complement: right for math.MinInt64 too
	}
	for ; u >= 10; u /= 10 {
		l++
	}
	return l
}

// parseBody reads raw into *b as json.Unmarshal does, errors included.
func parseBody(raw []byte, b *body) error {
	if readCanonical(raw, b) {
		return nil
	}
	// A body of its own, so that only this path puts one on the heap.
	var v body
	err := json.Unmarshal(raw, &v)
	*b = v
	return err
}

// readCanonical reads raw when it is in appendBody's form, with plain
// strings (no backslash, no control byte, valid UTF-8) and integers of at
// most 18 digits, so that it can read them without escapes or overflow.
// It returns false, leaving *b partly set, for anything else.
func readCanonical(raw []byte, b *body) bool {
	r := reader{b: raw}
	var tradeNo, txID, refundNo, reason, currency span
	if !r.lit(`{`) {
		return false
	}
	if r.lit(`"out_trade_no":`) {
		tradeNo = r.str()
		r.must(`,`)
	}
	if r.lit(`"transaction_id":`) {
		txID = r.str()
		r.must(`,`)
	}
	r.must(`"out_refund_no":`)
	refundNo = r.str()
	if r.lit(`,"reason":`) {
		reason = r.str()
	}
	r.must(`,"amount":{"refund":`)
	refund := r.int()
	r.must(`,"total":`)
	total := r.int()
	r.must(`,"currency":`)
	currency = r.str()
	r.must(`}}`)
	if r.bad || r.i != len(raw) {
		return false
	}
	// One string for all the fields rather than one each.
	s := string(raw)
	b.OutTradeNo, b.TransactionID, b.OutRefundNo, b.Reason = tradeNo.of(s), txID.of(s), refundNo.of(s), reason.of(s)
	b.Amount.Refund, b.Amount.Total, b.Amount.Currency = refund, total, currency.of(s)
	return true
}

// span is a string's contents as raw[from:to].
type span struct{ from, to int }

func (p span) of(s string) string { return s[p.from:p.to] }

// reader walks raw; once bad, it reads nothing more.
type reader struct {
	b   []byte
	i   int
	bad bool
}

// lit consumes s if it comes next.
func (r *reader) lit(s string) bool {
	if r.bad || len(r.b)-r.i < len(s) || string(r.b[r.i:r.i+len(s)]) != s {
		return false
	}
	r.i += len(s)
	return true
}

// must consumes s, or marks r bad.
func (r *reader) must(s string) {
	if !r.lit(s) {
		r.bad = true
	}
}

// str consumes a plain quoted string and returns where its contents are.
func (r *reader) str() span {
	if r.bad || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.bad = true
		return span{}
	}
	from := r.i + 1
	ascii := true
	for j := from; j < len(r.b); j++ {
		c := r.b[j]
		if c == '"' {
			if ascii || utf8.Valid(r.b[from:j]) {
				r.i = j + 1
				return span{from, j}
			}
			break // invalid UTF-8: encoding/json substitutes U+FFFD
		}
		if c == '\\' || c < 0x20 {
			break
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	r.bad = true
	return span{}
}

// int consumes an integer -?(0|[1-9][0-9]*) of at most 18 digits, which
// cannot overflow int64. What follows is for the caller to check, so a
// fraction or an exponent leaves r bad there.
func (r *reader) int() int64 {
	if r.bad {
		return 0
	}
	j := r.i
	neg := j < len(r.b) && r.b[j] == '-'
	if neg {
		j++
	}
	start := j
	var n int64
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		n = n*10 + int64(r.b[j]-'0')
		j++
	}
	if d := j - start; d == 0 || d > 18 || d > 1 && r.b[start] == '0' {
		r.bad = true
		return 0
	}
	r.i = j
	if neg {
		return -n
	}
	return n
}
