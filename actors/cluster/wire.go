package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// Messages between nodes travel as JSON inside a protobuf BytesValue:
// protoactor-go's remote serializes protobuf messages only (its JSON
// serializer is jsonpb, for protobuf messages too), and a well-known type
// needs neither generated code nor a registration of our own. wireVersion
// lets a node refuse a message from a newer build instead of misreading it.
const wireVersion = 1

// Operations a grain serves.
const (
	opExecute = "execute" // run a command
	opGet     = "get"     // a snapshot of the state
	opWatch   = "watch"   // the state once its version passes After, or when Wait runs out
)

// request is one call to a reservation grain.
type request struct {
	V  int    `json:"v"`
	Op string `json:"op"`
	ID string `json:"id"`
	// CmdID identifies one Execute across re-deliveries: the owner answers a
	// repeated CmdID with the first answer instead of running it again.
	CmdID   string          `json:"cmd_id,omitempty"`
	By      string          `json:"by,omitempty"`
	Cmd     string          `json:"cmd,omitempty"`
	Data    json.RawMessage `json:"data,omitempty"`
	After   uint64          `json:"after,omitempty"`
	WaitMS  int64           `json:"wait_ms,omitempty"`
	Timeout int64           `json:"timeout_ms,omitempty"` // the caller's remaining time
}

// reply is a grain's answer.
type reply struct {
	V int `json:"v"`
	// NotOwner: this node does not own the reservation (its view of the
	// membership moved it, or it is leaving). Nothing was done; the caller
	// asks the placement again.
	NotOwner bool            `json:"not_owner,omitempty"`
	State    json.RawMessage `json:"state,omitempty"`
	Refunds  []refundIndex   `json:"refund_index,omitempty"`
	Events   []wireEvent     `json:"events,omitempty"`
	Err      *wireError      `json:"err,omitempty"`

	// The answer as Go values. A caller in the same process gets them as
	// they are (no encoding); wire fills the fields above for another node.
	st     *reservation.State
	events []reservation.Event
	err    error
	// remote: the wire fields were decoded from another node.
	remote bool
}

// wire encodes the Go values into the wire fields.
func (r *reply) wire() error {
	r.V = wireVersion
	r.Err = encodeError(r.err)
	r.State, r.Refunds, r.Events = nil, nil, nil
	if err := encodeState(r.st, r); err != nil {
		return err
	}
	return encodeEvents(r.events, r)
}

// values returns the answer: the Go values of a local reply (the state
// cloned: a de-duplicated answer is shared), or the decoded wire fields.
func (r *reply) values() (*reservation.State, []reservation.Event, error) {
	if !r.remote {
		st := r.st
		if st != nil {
			st = st.Clone()
		}
		return st, r.events, r.err
	}
	st, err := decodeState(r)
	if err != nil {
		return nil, nil, err
	}
	events, err := decodeEvents(r)
	if err != nil {
		return nil, nil, err
	}
	return st, events, decodeError(r.Err)
}

// refundIndex carries what reservation.State indexes privately, so the
// receiver can rebuild a State whose Refund and RefundByKey work.
type refundIndex struct {
	No  string `json:"no"`
	Key string `json:"key"`
}

type wireEvent struct {
	Type    string          `json:"type"`
	Version uint16          `json:"version"`
	Data    json.RawMessage `json:"data"`
}

// Error kinds on the wire. A domain error keeps its code, field and message;
// the engine's sentinels come back as themselves.
const (
	errDomain      = "domain"
	errUnavailable = "unavailable"
	errClosed      = "closed"
	errOther       = "other"
)

type wireError struct {
	Kind    string           `json:"kind"`
	Code    reservation.Code `json:"code,omitempty"`
	Field   string           `json:"field,omitempty"`
	Message string           `json:"message"`
}

// Command names on the wire, stable across builds.
var commandNames = map[string]func() reservation.Command{
	"register":         func() reservation.Command { return &reservation.Register{} },
	"request_refund":   func() reservation.Command { return &reservation.RequestRefund{} },
	"start_submission": func() reservation.Command { return &reservation.StartSubmission{} },
	"resubmit":         func() reservation.Command { return &reservation.Resubmit{} },
	"abandon":          func() reservation.Command { return &reservation.Abandon{} },
	"record_outcome":   func() reservation.Command { return &reservation.RecordOutcome{} },
	"fire_timer":       func() reservation.Command { return &reservation.FireTimer{} },
	"resolve":          func() reservation.Command { return &reservation.Resolve{} },
	"check_provider":   func() reservation.Command { return &reservation.CheckProvider{} },
}

func commandName(c reservation.Command) (string, error) {
	switch c.(type) {
	case reservation.Register:
		return "register", nil
	case reservation.RequestRefund:
		return "request_refund", nil
	case reservation.StartSubmission:
		return "start_submission", nil
	case reservation.Resubmit:
		return "resubmit", nil
	case reservation.Abandon:
		return "abandon", nil
	case reservation.RecordOutcome:
		return "record_outcome", nil
	case reservation.FireTimer:
		return "fire_timer", nil
	case reservation.Resolve:
		return "resolve", nil
	case reservation.CheckProvider:
		return "check_provider", nil
	}
	return "", fmt.Errorf("cluster: command %T cannot be sent to another node", c)
}

func encodeCommand(c reservation.Command) (string, json.RawMessage, error) {
	name, err := commandName(c)
	if err != nil {
		return "", nil, err
	}
	data, err := json.Marshal(c)
	if err != nil {
		return "", nil, fmt.Errorf("cluster: encode %s: %w", name, err)
	}
	return name, data, nil
}

func decodeCommand(name string, data json.RawMessage) (reservation.Command, error) {
	mk, ok := commandNames[name]
	if !ok {
		return nil, fmt.Errorf("%w: unknown command %q", ErrWire, name)
	}
	p := mk()
	if err := json.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("%w: command %s: %v", ErrWire, name, err)
	}
	// The engine matches commands by value type.
	switch c := p.(type) {
	case *reservation.Register:
		return *c, nil
	case *reservation.RequestRefund:
		return *c, nil
	case *reservation.StartSubmission:
		return *c, nil
	case *reservation.Resubmit:
		return *c, nil
	case *reservation.Abandon:
		return *c, nil
	case *reservation.RecordOutcome:
		return *c, nil
	case *reservation.FireTimer:
		return *c, nil
	case *reservation.Resolve:
		return *c, nil
	case *reservation.CheckProvider:
		return *c, nil
	}
	return nil, fmt.Errorf("%w: command %s", ErrWire, name)
}

func encodeState(st *reservation.State, r *reply) error {
	if st == nil {
		return nil
	}
	b, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("cluster: encode state: %w", err)
	}
	r.State = b
	for _, rf := range st.Refunds {
		r.Refunds = append(r.Refunds, refundIndex{No: rf.No, Key: rf.IdempotencyKey})
	}
	return nil
}

// decodeState rebuilds a State with its private indexes: a RefundRequested
// applied for every refund creates the index entries the same way replay
// does, then the refunds' full records and every exported field of the
// state are copied over from the wire (reflection, so a field added to
// State later is carried too; TestWire_StateRoundTrip checks the result).
func decodeState(r *reply) (*reservation.State, error) {
	if len(r.State) == 0 {
		return nil, nil
	}
	var flat reservation.State
	if err := json.Unmarshal(r.State, &flat); err != nil {
		return nil, fmt.Errorf("%w: state: %v", ErrWire, err)
	}
	if len(r.Refunds) != len(flat.Refunds) {
		return nil, fmt.Errorf("%w: state has %d refunds, index %d", ErrWire, len(flat.Refunds), len(r.Refunds))
	}
	st := &reservation.State{}
	for i, ix := range r.Refunds {
		if flat.Refunds[i] == nil || flat.Refunds[i].No != ix.No || flat.Refunds[i].IdempotencyKey != ix.Key {
			return nil, fmt.Errorf("%w: refund %d does not match its index", ErrWire, i)
		}
		reservation.Apply(st, reservation.Event{Data: reservation.RefundRequested{RefundNo: ix.No, IdempotencyKey: ix.Key}})
		*st.Refunds[i] = *flat.Refunds[i]
	}
	dst, src := reflect.ValueOf(st).Elem(), reflect.ValueOf(&flat).Elem()
	for i := 0; i < dst.NumField(); i++ {
		if f := dst.Type().Field(i); f.IsExported() && f.Name != "Refunds" {
			dst.Field(i).Set(src.Field(i))
		}
	}
	// A node of a release before merchants sends no merchant: every
	// reservation it knows is the default merchant's.
	if st.Registered() {
		st.Merchant = reservation.MerchantOf(st.Merchant)
	}
	return st, nil
}

func encodeEvents(events []reservation.Event, r *reply) error {
	for _, e := range events {
		typ, ver, data, err := reservation.Encode(e)
		if err != nil {
			return err
		}
		r.Events = append(r.Events, wireEvent{Type: typ, Version: ver, Data: data})
	}
	return nil
}

func decodeEvents(r *reply) ([]reservation.Event, error) {
	if len(r.Events) == 0 {
		return nil, nil
	}
	out := make([]reservation.Event, len(r.Events))
	for i, w := range r.Events {
		e, err := reservation.Decode(w.Type, w.Version, w.Data)
		if err != nil {
			return nil, fmt.Errorf("%w: event: %v", ErrWire, err)
		}
		out[i] = e
	}
	return out, nil
}

func encodeError(err error) *wireError {
	if err == nil {
		return nil
	}
	var de *reservation.Error
	switch {
	case errors.As(err, &de):
		return &wireError{Kind: errDomain, Code: de.Code, Field: de.Field, Message: de.Message}
	case errors.Is(err, actors.ErrClosed):
		return &wireError{Kind: errClosed, Message: err.Error()}
	case errors.Is(err, actors.ErrUnavailable):
		return &wireError{Kind: errUnavailable, Message: err.Error()}
	}
	return &wireError{Kind: errOther, Message: err.Error()}
}

func decodeError(w *wireError) error {
	if w == nil {
		return nil
	}
	switch w.Kind {
	case errDomain:
		return &reservation.Error{Code: w.Code, Field: w.Field, Message: w.Message}
	case errClosed:
		return fmt.Errorf("%w: %s", ErrUnavailable, w.Message)
	case errUnavailable:
		return fmt.Errorf("%w (owner: %s)", actors.ErrUnavailable, w.Message)
	}
	return fmt.Errorf("%w: owner: %s", actors.ErrUnavailable, w.Message)
}

func marshal(v any) (*wrapperspb.BytesValue, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("cluster: encode message: %w", err)
	}
	return wrapperspb.Bytes(b), nil
}

func unmarshal(m *wrapperspb.BytesValue, v any, version *int) error {
	if err := json.Unmarshal(m.GetValue(), v); err != nil {
		return fmt.Errorf("%w: %v", ErrWire, err)
	}
	if *version != wireVersion {
		return fmt.Errorf("%w: message version %d, this build speaks %d", ErrWire, *version, wireVersion)
	}
	return nil
}
