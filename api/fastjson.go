package api

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/jsontext"
	"github.com/refundd/refundd/internal/reservation"
)

// The lifecycle's bodies are small and plain, and encoding/json's decoder
// and reflection were a large part of the API's cost per request. The fast
// paths here handle the plain case only and leave everything else to
// encoding/json, so what a client sees never depends on which path ran;
// fastjson_test.go compares them.

// fastBodyMax is how much of a body decodeStrict reads before handing it
// to encoding/json: far above any plain request, far below maxBody.
const fastBodyMax = 4 << 10

// maxPooled keeps buffers that grew for an unusual body out of the pool.
const maxPooled = 64 << 10

// buffer is a pooled byte slice (a pointer, so that pooling it does not
// allocate).
type buffer struct{ b []byte }

func (s *Server) getBuf() *buffer {
	if b, _ := s.bufs.Get().(*buffer); b != nil {
		b.b = b.b[:0]
		return b
	}
	return &buffer{b: make([]byte, 0, 1024)}
}

// putBuf returns b to the pool emptied: nothing of one request is read by
// another.
func (s *Server) putBuf(b *buffer) {
	if cap(b.b) > maxPooled {
		return
	}
	b.b = b.b[:0]
	s.bufs.Put(b)
}

// readBody appends up to limit bytes of body to buf. It reports whether the
// body ended within them, and a read error other than io.EOF.
func readBody(buf []byte, body io.Reader, limit int) ([]byte, bool, error) {
	for len(buf) < limit {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, 512)
		}
		n, err := body.Read(buf[len(buf):min(cap(buf), limit)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, true, nil
		}
		if err != nil {
			return buf, false, err
		}
	}
	return buf, false, nil
}

// errReader replays a read error after the bytes read before it.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// flatObject takes the members of a plain JSON object from scanFlat.
type flatObject interface {
	// member sets the field named key from val: a string's contents
	// without its quotes when quoted, an integer literal otherwise. It
	// returns false for a key or kind it does not take.
	member(key, val []byte, quoted bool) bool
}

// decodeFlat decodes b into v when v has a fast path and b is plain;
// otherwise it returns false and leaves v as it was.
func decodeFlat(b []byte, v any) bool {
	switch v := v.(type) {
	case *registerRequest:
		return scanInto(b, v)
	case *refundRequest:
		return scanInto(b, v)
	case *operatorRequest:
		return scanInto(b, v)
	}
	return false
}

func scanInto[T any, P interface {
	*T
	flatObject
}](b []byte, v P) bool {
	saved := *v
	if scanFlat(b, v) {
		return true
	}
	*v = saved
	return false
}

// scanFlat reads b as one JSON object, and nothing after it but
// whitespace, whose members are plain strings (no escapes or control
// characters, valid UTF-8) or integers, each named once, and gives each
// member to o in order. It returns false for anything else (a repeated
// name too: decodeJSON refuses it with its error), leaving o partly set.
func scanFlat(b []byte, o flatObject) bool {
	var seen [8][]byte // the request types have at most 7 members
	n := 0
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		key, j, ok := scanString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return false
		}
		quoted := b[i] == '"'
		var val []byte
		if quoted {
			val, j, ok = scanString(b, i)
		} else {
			val, j, ok = scanInt(b, i)
		}
		if !ok || !o.member(key, val, quoted) || n == len(seen) {
			return false
		}
		for _, k := range seen[:n] {
			if string(k) == string(key) {
				return false
			}
		}
		seen[n] = key
		n++
		i = skipSpace(b, j)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

// skipSpace skips JSON whitespace from b[i].
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// scanString returns the contents of the plain string that starts at b[i]
// and the index after its closing quote.
func scanString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, 0, false
	}
	ascii := true
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			s := b[i+1 : j]
			if !ascii && !utf8.Valid(s) {
				return nil, 0, false // encoding/json substitutes U+FFFD
			}
			return s, j + 1, true
		case c == '\\' || c < 0x20:
			return nil, 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	return nil, 0, false
}

// scanInt returns the integer literal -?(0|[1-9][0-9]*) at b[i] and the
// index after it. Whatever follows must end the member, so a fraction or an
// exponent is left to encoding/json.
func scanInt(b []byte, i int) ([]byte, int, bool) {
	j := i
	if j < len(b) && b[j] == '-' {
		j++
	}
	switch {
	case j >= len(b):
		return nil, 0, false
	case b[j] == '0':
		j++
	case b[j] >= '1' && b[j] <= '9':
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
	default:
		return nil, 0, false
	}
	return b[i:j], j, true
}

// setInt sets *p from an integer literal as encoding/json does for an
// *int64 field: out of range is for encoding/json to refuse.
func setInt(p **int64, lit []byte) bool {
	n, err := strconv.ParseInt(string(lit), 10, 64)
	if err != nil {
		return false
	}
	if *p == nil {
		*p = new(int64)
	}
	**p = n
	return true
}

func (q *registerRequest) member(key, val []byte, quoted bool) bool {
	if string(key) == "amount" {
		return !quoted && setInt(&q.Amount, val)
	}
	if !quoted {
		return false
	}
	switch string(key) {
	case "id":
		q.ID = string(val)
	case "user_id":
		q.UserID = string(val)
	case "out_trade_no":
		q.OutTradeNo = string(val)
	case "transaction_id":
		q.TransactionID = string(val)
	case "currency":
		q.Currency = string(val)
	case "paid_at":
		if q.PaidAt == nil {
			q.PaidAt = new(string)
		}
		*q.PaidAt = string(val)
	case "merchant":
		q.Merchant = string(val)
	default:
		return false
	}
	return true
}

func (q *refundRequest) member(key, val []byte, quoted bool) bool {
	if string(key) == "amount" {
		return !quoted && setInt(&q.Amount, val)
	}
	if !quoted {
		return false
	}
	switch string(key) {
	case "user_id":
		q.UserID = string(val)
	case "reason":
		q.Reason = string(val)
	case "reason_code":
		q.ReasonCode = string(val)
	default:
		return false // metadata, an object, is for encoding/json
	}
	return true
}

func (q *operatorRequest) member(key, val []byte, quoted bool) bool {
	if string(key) != "reason" || !quoted {
		return false
	}
	q.Reason = string(val)
	return true
}

// Header values of every JSON answer. Assigning them saves Header.Set's
// allocation per value; they are never modified (net/http only reads
// them, and a slice of capacity one is copied by any append).
var (
	headerJSON    = []string{"application/json"}
	headerNoStore = []string{"no-store"}
)

// writeEncoded sends body, JSON encoded by one of the append functions
// below, as writeJSON sends a value.
func writeEncoded(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["Cache-Control"] = headerNoStore
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRefund answers viewRefund(st, ref, s.viewAt(st)).
func (s *Server) writeRefund(w http.ResponseWriter, status int, st *reservation.State, ref *reservation.Refund) {
	buf := s.getBuf()
	defer s.putBuf(buf)
	va := s.viewAt(st)
	b, ok := appendRefund(buf.b, st, ref, va)
	if !ok {
		writeJSON(w, status, viewRefund(st, ref, va))
		return
	}
	buf.b = append(b, '\n')
	writeEncoded(w, status, buf.b)
}

// writeReservation answers viewReservation(st, s.viewAt(st)).
func (s *Server) writeReservation(w http.ResponseWriter, status int, st *reservation.State) {
	buf := s.getBuf()
	defer s.putBuf(buf)
	va := s.viewAt(st)
	b, ok := appendReservation(buf.b, st, va)
	if !ok {
		writeJSON(w, status, viewReservation(st, va))
		return
	}
	buf.b = append(b, '\n')
	writeEncoded(w, status, buf.b)
}

// writeErrorBody answers errorBody{Error: d}.
func (s *Server) writeErrorBody(w http.ResponseWriter, status int, d errorDetail) {
	buf := s.getBuf()
	defer s.putBuf(buf)
	buf.b = append(d.appendJSON(buf.b), '\n')
	writeEncoded(w, status, buf.b)
}

// The append functions encode exactly what encoding/json encodes for the
// views (views.go), fields in order, omitempty and HTML-safe strings
// included, straight from the state without building the view. ok is
// false only where encoding/json fails (a time it cannot encode); the
// caller then lets encoding/json answer.

func (d *errorDetail) appendJSON(b []byte) []byte {
	b = append(b, `{"error":{"code":`...)
	b = jsontext.AppendString(b, d.Code)
	b = append(b, `,"message":`...)
	b = jsontext.AppendString(b, d.Message)
	if d.Field != "" {
		b = append(b, `,"field":`...)
		b = jsontext.AppendString(b, d.Field)
	}
	return append(b, "}}"...)
}

// appendReservation encodes viewReservation(st, va).
func appendReservation(b []byte, st *reservation.State, va viewAt) ([]byte, bool) {
	ok := true
	b = append(b, `{"id":`...)
	b = jsontext.AppendString(b, st.ID)
	b = append(b, `,"merchant":`...)
	b = jsontext.AppendString(b, st.Merchant)
	b = append(b, `,"user_id":`...)
	b = jsontext.AppendString(b, st.UserID)
	b = append(b, `,"out_trade_no":`...)
	b = jsontext.AppendString(b, st.OutTradeNo)
	if st.TransactionID != "" {
		b = append(b, `,"transaction_id":`...)
		b = jsontext.AppendString(b, st.TransactionID)
	}
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, st.Amount, 10)
	b = append(b, `,"currency":`...)
	b = jsontext.AppendString(b, st.Currency)
	if !st.PaidAt.IsZero() {
		b = append(b, `,"paid_at":`...)
		b, ok = appendTime(b, st.PaidAt, ok)
	}
	b = append(b, `,"status":`...)
	b = jsontext.AppendString(b, string(st.Status))
	b = append(b, `,"refunded":`...)
	b = strconv.AppendInt(b, st.Refunded(), 10)
	b = append(b, `,"in_flight":`...)
	b = strconv.AppendInt(b, st.InFlight(), 10)
	b = append(b, `,"refundable":`...)
	b = strconv.AppendInt(b, st.Refundable(), 10)
	b = append(b, `,"refunds":[`...)
	for i, r := range st.Refunds {
		if i > 0 {
			b = append(b, ',')
		}
		var rok bool
		b, rok = appendRefund(b, st, r, va)
		ok = ok && rok
	}
	b = append(b, `],"registered_at":`...)
	b, ok = appendTime(b, st.RegisteredAt, ok)
	return append(b, '}'), ok
}

// appendRefund encodes viewRefund(st, r, va).
func appendRefund(b []byte, st *reservation.State, r *reservation.Refund, va viewAt) ([]byte, bool) {
	ok := true
	b = append(b, `{"refund_no":`...)
	b = jsontext.AppendString(b, r.No)
	b = append(b, `,"reservation_id":`...)
	b = jsontext.AppendString(b, st.ID)
	b = append(b, `,"merchant":`...)
	b = jsontext.AppendString(b, st.Merchant)
	b = append(b, `,"amount":`...)
	b = strconv.AppendInt(b, r.Amount, 10)
	b = append(b, `,"state":`...)
	b = jsontext.AppendString(b, string(r.State))
	if r.Reason != "" {
		b = append(b, `,"reason":`...)
		b = jsontext.AppendString(b, r.Reason)
	}
	if r.ReasonCode != "" {
		b = append(b, `,"reason_code":`...)
		b = jsontext.AppendString(b, r.ReasonCode)
	}
	if !r.Metadata.IsZero() {
		b = r.Metadata.AppendJSON(append(b, `,"metadata":`...))
	}
	if r.Code != "" {
		b = append(b, `,"code":`...)
		b = jsontext.AppendString(b, r.Code)
	}
	if r.Message != "" {
		b = append(b, `,"message":`...)
		b = jsontext.AppendString(b, r.Message)
	}
	if r.ProviderID != "" {
		b = append(b, `,"provider_refund_id":`...)
		b = jsontext.AppendString(b, r.ProviderID)
	}
	b = append(b, `,"attempts":`...)
	b = strconv.AppendInt(b, int64(r.Attempts), 10)
	if r.Stuck && !r.State.Terminal() { // as the attention index: a settled refund is not stuck
		b = append(b, `,"stuck":true`...)
	}
	if !r.DueAt.IsZero() {
		b = append(b, `,"next_check_at":`...)
		b, ok = appendTime(b, r.DueAt, ok)
	}
	if r.Conflicts != 0 {
		b = append(b, `,"conflicts":`...)
		b = strconv.AppendInt(b, int64(r.Conflicts), 10)
	}
	if r.PaidAfterFailed {
		b = append(b, `,"paid_after_failed":true`...)
	}
	if r.Recovered {
		b = append(b, `,"recovered":true`...)
	}
	b = append(b, `,"created_at":`...)
	b, ok = appendTime(b, r.CreatedAt, ok)
	b = append(b, `,"updated_at":`...)
	b, ok = appendTime(b, r.UpdatedAt, ok)
	if !r.SucceededAt.IsZero() {
		b = append(b, `,"succeeded_at":`...)
		b, ok = appendTime(b, r.SucceededAt, ok)
	}
	if r.AbnormalType != "" {
		b = append(b, `,"abnormal_type":`...)
		b = jsontext.AppendString(b, r.AbnormalType)
	}
	if r.ApprovalRequired {
		b, ok = appendApproval(b, r, ok)
	}
	b, ok = appendNextStep(b, reservation.NextOf(r, va.policy, va.now), ok)
	return append(b, '}'), ok
}

// appendNextStep appends the next_step member of refundView.
func appendNextStep(b []byte, n reservation.NextStep, ok bool) ([]byte, bool) {
	b = append(b, `,"next_step":{"kind":`...)
	b = jsontext.AppendString(b, string(n.Kind))
	if !n.At.IsZero() {
		b = append(b, `,"at":`...)
		b, ok = appendTime(b, n.At, ok)
	}
	b = append(b, `,"attempts_left":`...)
	b = strconv.AppendInt(b, int64(n.AttemptsLeft), 10)
	if !n.AbandonFrom.IsZero() {
		b = append(b, `,"abandon_from":`...)
		b, ok = appendTime(b, n.AbandonFrom, ok)
	}
	b = append(b, `,"actions":[`...)
	for i, a := range n.Actions {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, a)
	}
	b = append(b, `],"why":`...)
	b = jsontext.AppendString(b, n.Why)
	return append(b, '}'), ok
}

// appendApproval appends the approval members of refundView.
func appendApproval(b []byte, r *reservation.Refund, ok bool) ([]byte, bool) {
	b = append(b, `,"approval_required":true,"requested_by":`...)
	b = jsontext.AppendString(b, r.RequestedBy)
	if r.ApprovedBy != "" {
		b = append(b, `,"approved_by":`...)
		b = jsontext.AppendString(b, r.ApprovedBy)
	}
	if !r.ApprovedAt.IsZero() {
		b = append(b, `,"approved_at":`...)
		b, ok = appendTime(b, r.ApprovedAt, ok)
	}
	if r.RejectedBy != "" {
		b = append(b, `,"rejected_by":`...)
		b = jsontext.AppendString(b, r.RejectedBy)
	}
	if r.State == reservation.PendingApproval && !r.DueAt.IsZero() {
		b = append(b, `,"approval_expires_at":`...)
		b, ok = appendTime(b, r.DueAt, ok)
	}
	return b, ok
}

// appendTime encodes t as time.Time.MarshalJSON does; ok becomes false
// where that fails (a year outside 0..9999).
func appendTime(b []byte, t time.Time, ok bool) ([]byte, bool) {
	b = append(b, '"')
	out, err := t.AppendText(b)
	if err != nil {
		return b, false
	}
	return append(out, '"'), ok
}
