package reservation

import (
	"encoding/json"
	"fmt"
	"time"
)

// EventVersion is the schema version every event type is written with today.
// Decode upcasts older versions here, in one place, when there are any.
const EventVersion uint16 = 1

// envelope is an event's stored form; the type and version live beside it in
// the journal record.
type envelope struct {
	At   time.Time       `json:"at"`
	By   string          `json:"by"`
	Data json.RawMessage `json:"data"`
}

// Encode returns an event's type, schema version and stored bytes.
func Encode(e Event) (typ string, version uint16, data []byte, err error) {
	if e.Data == nil {
		return "", 0, nil, fmt.Errorf("reservation: encode: event has no data")
	}
	raw, err := json.Marshal(e.Data)
	if err != nil {
		return "", 0, nil, fmt.Errorf("reservation: encode %s: %w", e.Data.EventType(), err)
	}
	data, err = json.Marshal(envelope{At: e.At.UTC(), By: e.By, Data: raw})
	if err != nil {
		return "", 0, nil, fmt.Errorf("reservation: encode %s: %w", e.Data.EventType(), err)
	}
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
	var env envelope
	if err := json.Unmarshal(data, &env); err != nil {
		return Event{}, fmt.Errorf("reservation: decode %s: %w", typ, err)
	}
	var d EventData
	var err error
	switch typ {
	case TypeRegistered:
		d, err = decodeAs[Registered](env.Data)
	case TypeCanceled:
		d, err = decodeAs[Canceled](env.Data)
	case TypeRefundRequested:
		d, err = decodeAs[RefundRequested](env.Data)
	case TypeSubmissionStarted:
		d, err = decodeAs[SubmissionStarted](env.Data)
	case TypeQueryStarted:
		d, err = decodeAs[QueryStarted](env.Data)
	case TypeProviderResult:
		d, err = decodeAs[ProviderResult](env.Data)
	case TypeAbandoned:
		d, err = decodeAs[Abandoned](env.Data)
	case TypeConflict:
		d, err = decodeAs[Conflict](env.Data)
	case TypeFlaggedStuck:
		d, err = decodeAs[FlaggedStuck](env.Data)
	case TypeSubmissionWaits:
		d, err = decodeAs[SubmissionScheduled](env.Data)
	case TypeResolved:
		d, err = decodeAs[Resolved](env.Data)
	default:
		return Event{}, fmt.Errorf("%w: %s", ErrUnknownEvent, typ)
	}
	if err != nil {
		return Event{}, fmt.Errorf("reservation: decode %s: %w", typ, err)
	}
	return Event{At: env.At, By: env.By, Data: d}, nil
}

func decodeAs[T EventData](raw json.RawMessage) (EventData, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}
