package reservation

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// EventVersion is the schema version every event type is written with today.
// Decode upcasts older versions here, in one place, when there are any.
const EventVersion uint16 = 1

// envelope is an event's stored form; the type and version live beside it in
// the journal record. Encode writes it by hand (see there); Decode reads it
// with the data typed (envelopeOf).
//
//	{"at":"2025-03-01T10:00:00Z","by":"engine","data":{...}}

// Encode returns an event's type, schema version and stored bytes.
//
// The envelope is written by hand around the marshaled data, in the exact
// bytes encoding/json would give it: marshaling a json.RawMessage field
// re-scans and copies the data, which cost more than encoding it.
func Encode(e Event) (typ string, version uint16, data []byte, err error) {
	if e.Data == nil {
		return "", 0, nil, fmt.Errorf("reservation: encode: event has no data")
	}
	raw, err := json.Marshal(e.Data)
	if err != nil {
		return "", 0, nil, fmt.Errorf("reservation: encode %s: %w", e.Data.EventType(), err)
	}
	at := e.At.UTC()
	if y := at.Year(); y < 0 || y > 9999 {
		// The error encoding/json gives, for the same times.
		return "", 0, nil, fmt.Errorf("reservation: encode %s: at: year %d outside of range [0,9999]", e.Data.EventType(), y)
	}
	by, err := json.Marshal(e.By)
	if err != nil {
		return "", 0, nil, fmt.Errorf("reservation: encode %s: %w", e.Data.EventType(), err)
	}
	data = make([]byte, 0, len(`{"at":"","by":,"data":}`)+len(time.RFC3339Nano)+len(by)+len(raw))
	data = append(data, `{"at":"`...)
	data = at.AppendFormat(data, time.RFC3339Nano)
	data = append(data, `","by":`...)
	data = append(data, by...)
	data = append(data, `,"data":`...)
	data = append(data, raw...)
	data = append(data, '}')
	return e.Data.EventType(), EventVersion, data, nil
}

// ErrUnknownEvent is returned by Decode for a type or version this build does
// not know: a journal written by a newer refundd must be refused, not misread.
var ErrUnknownEvent = fmt.Errorf("reservation: unknown event type or version")

// Decode is the inverse of Encode.
func Decode(typ string, version uint16, data []byte) (Event, error) {
	if version == 0 || version > EventVersion {
		return Event{}, fmt.Errorf("%w: %s v%d (this build reads up to v%d)", ErrUnknownEvent, typ, version, EventVersion)
	}
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
