package reservation

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/jsontext"
)

// EventVersion is the schema version every event type is written with today.
// Decode upcasts older versions here, in one place, when there are any.
const EventVersion uint16 = 1

// envelope is an event's stored form; the type and version live beside it in
// the journal record. Encode writes it by hand (AppendEncoded); Decode reads
// the exact form Encode writes by hand too (decodeCanonical), and anything
// else with encoding/json, the data typed (envelopeOf).
//
//	{"at":"2025-03-01T10:00:00Z","by":"engine","data":{...}}

// Encode returns an event's type, schema version and stored bytes.
func Encode(e Event) (typ string, version uint16, data []byte, err error) {
	if e.Data == nil {
		return "", 0, nil, fmt.Errorf("reservation: encode: event has no data")
	}
	data, err = AppendEncoded(make([]byte, 0, EncodedSizeHint(e)), e)
	if err != nil {
		return "", 0, nil, err
	}
	return e.Data.EventType(), EventVersion, data, nil
}

// EncodedSizeHint is about the length of e's stored bytes (exact unless
// strings need escaping), to size a buffer for AppendEncoded.
func EncodedSizeHint(e Event) int {
	return len(`{"at":,"by":"","data":}`) + timeLen(e.At) + len(e.By) + dataSizeHint(e.Data)
}

// AppendEncoded appends e's stored bytes (what Encode returns) to dst, so
// that the events of one append can share a buffer. On error the returned
// slice is dst unchanged.
//
// The whole record is written by hand, in the exact bytes encoding/json
// gives it (see jsonappend.go): reflection and the copies of a
// json.RawMessage cost more than the encoding itself, on every append.
func AppendEncoded(dst []byte, e Event) ([]byte, error) {
	if e.Data == nil {
		return dst, fmt.Errorf("reservation: encode: event has no data")
	}
	n0 := len(dst)
	at := e.At.UTC()
	b := append(dst, `{"at":"`...)
	b = at.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","by":`...)
	b = jsontext.AppendString(b, e.By)
	b = append(b, `,"data":`...)
	pre := len(b)
	b, ok := appendData(b, e.Data)
	if !ok {
		b = b[:pre]
		// What encoding/json does with it: its error, or its bytes for a
		// type appendData does not know.
		raw, err := json.Marshal(e.Data)
		if err != nil {
			return dst[:n0], fmt.Errorf("reservation: encode %s: %w", e.Data.EventType(), err)
		}
		b = append(b, raw...)
	}
	if y := at.Year(); y < 0 || y > 9999 {
		// The error encoding/json gives, for the same times.
		return dst[:n0], fmt.Errorf("reservation: encode %s: at: year %d outside of range [0,9999]", e.Data.EventType(), y)
	}
	return append(b, '}'), nil
}

// ErrUnknownEvent is returned by Decode for a type or version this build does
// not know: a journal written by a newer refundd must be refused, not misread.
var ErrUnknownEvent = fmt.Errorf("reservation: unknown event type or version")

// Decode is the inverse of Encode: the one decoder of stored events, for
// every reader of journal records (the event store, the audit, the feed)
// and of the cluster's wire.
func Decode(typ string, version uint16, data []byte) (Event, error) {
	if version == 0 || version > EventVersion {
		return Event{}, fmt.Errorf("%w: %s v%d (this build reads up to v%d)", ErrUnknownEvent, typ, version, EventVersion)
	}
	if ev, ok := decodeCanonical(typ, data); ok {
		return ev, nil
	}
	return decodeJSON(typ, data)
}

// decodeJSON reads a record with encoding/json: whatever decodeCanonical
// does not take, and the reference it is tested against.
func decodeJSON(typ string, data []byte) (Event, error) {
	var (
		ev  Event
		err error
	)
	switch typ {
	case TypeRegistered:
		ev, err = decodeAs[Registered](data)
	case TypeCanceled:
		ev, err = decodeAs[Canceled](data)
	case TypeRefundRequested:
		ev, err = decodeAs[RefundRequested](data)
	case TypeSubmissionStarted:
		ev, err = decodeAs[SubmissionStarted](data)
	case TypeQueryStarted:
		ev, err = decodeAs[QueryStarted](data)
	case TypeProviderResult:
		ev, err = decodeAs[ProviderResult](data)
	case TypeAbandoned:
		ev, err = decodeAs[Abandoned](data)
	case TypeConflict:
		ev, err = decodeAs[Conflict](data)
	case TypeFlaggedStuck:
		ev, err = decodeAs[FlaggedStuck](data)
	case TypeSubmissionWaits:
		ev, err = decodeAs[SubmissionScheduled](data)
	case TypeResolved:
		ev, err = decodeAs[Resolved](data)
	case TypeRefundRecovered:
		ev, err = decodeAs[RefundRecovered](data)
	case TypeApprovalRequested:
		ev, err = decodeAs[ApprovalRequested](data)
	case TypeApproved:
		ev, err = decodeAs[Approved](data)
	case TypeApprovalRejected:
		ev, err = decodeAs[ApprovalRejected](data)
	case TypeApprovalExpired:
		ev, err = decodeAs[ApprovalExpired](data)
	case TypeAbnormalApplied:
		ev, err = decodeAs[AbnormalApplied](data)
	default:
		return Event{}, fmt.Errorf("%w: %s", ErrUnknownEvent, typ)
	}
	if err != nil {
		return Event{}, fmt.Errorf("reservation: decode %s: %w", typ, err)
	}
	return ev, nil
}

// envelopeOf is the stored envelope with its data typed, so that one pass
// of the decoder reads both.
type envelopeOf[T EventData] struct {
	At   time.Time `json:"at"`
	By   string    `json:"by"`
	Data *T        `json:"data"`
}

func decodeAs[T EventData](data []byte) (Event, error) {
	var env envelopeOf[T]
	if err := json.Unmarshal(data, &env); err != nil {
		return Event{}, err
	}
	if env.Data == nil {
		return Event{}, errors.New("no data")
	}
	return Event{At: env.At, By: env.By, Data: *env.Data}, nil
}
