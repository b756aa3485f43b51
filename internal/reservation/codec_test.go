package reservation

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// allTypes lists every event type this build writes.
var allTypes = []string{TypeRegistered, TypeCanceled, TypeRefundRequested, TypeSubmissionStarted, TypeQueryStarted,
	TypeProviderResult, TypeAbandoned, TypeConflict, TypeFlaggedStuck, TypeSubmissionWaits, TypeResolved, TypeRefundRecovered}

// sampleEvents holds every event type, once with every field set and once
// with only what is required.
func sampleEvents() map[string]Event {
	at := time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC)
	due := at.Add(30 * time.Second)
	return map[string]Event{
		"registered full": {At: at, By: "system:booking", Data: Registered{ReservationID: "resv-1", UserID: "用户-42",
			OutTradeNo: "OT|1*", TransactionID: "4200001234", Amount: 10000, Currency: "CNY", PaidAt: at.Add(-time.Hour), Merchant: "hotel-sh"}},
		"registered minimal": {At: at, By: "system:booking", Data: Registered{ReservationID: "r", UserID: "u",
			OutTradeNo: "o", Amount: 1, Currency: "CNY"}},
		"canceled": {At: at, By: "provider:wechatpay", Data: Canceled{Refunded: 10000}},
		"requested full": {At: at, By: "user:u-42", Data: RefundRequested{RefundNo: "R-resv-1-1", Number: 1,
			IdempotencyKey: "key-1", Fingerprint: "ab12", Amount: 10000, Reason: "行程取消 \"quoted\"", ReasonCode: ReasonCanceledByMerchant,
			Metadata: NewMetadata(map[string]string{"order": "O-1", "<&>": "\"q\" \u2028 订单", "a": "z"})}},
		"requested minimal": {At: at, By: "user:u-42", Data: RefundRequested{RefundNo: "R-resv-1-2", Number: 2,
			IdempotencyKey: "k", Fingerprint: "f", Amount: 1}},
		"submission first": {At: at, By: "engine", Data: SubmissionStarted{RefundNo: "R-resv-1-1", Attempt: 1,
			Request: []byte("{\"out_refund_no\":\"R-resv-1-1\"}\x00\xff"), DueAt: due}},
		"submission retry": {At: at, By: "engine", Data: SubmissionStarted{RefundNo: "R-resv-1-1", Attempt: 7, DueAt: due}},
		"query":            {At: at, By: "engine", Data: QueryStarted{RefundNo: "R-resv-1-1", Query: 3, DueAt: due}},
		"result full": {At: at, By: "provider:wechatpay", Data: ProviderResult{RefundNo: "R-resv-1-1", Source: SourceQuery,
			Attempt: 2, Outcome: OutcomeSucceeded, Code: "SUCCESS", Message: "ok", ProviderID: "50300001",
			From: Unknown, To: Succeeded, SuccessTime: at.Add(-time.Minute), DueAt: due}},
		"result minimal": {At: at, By: "provider:wechatpay", Data: ProviderResult{RefundNo: "R-resv-1-1",
			Source: SourceResponse, Outcome: OutcomeUnknown, From: Processing, To: Unknown}},
		"result retry": {At: at, By: "provider:wechatpay", Data: ProviderResult{RefundNo: "R-resv-1-1", Source: SourceResponse,
			Attempt: 4, Outcome: OutcomeUnknown, Code: "SYSTEM_ERROR", From: Processing, To: Processing, DueAt: due, Retry: true}},
		"scheduled": {At: at, By: "engine", Data: SubmissionScheduled{RefundNo: "R-resv-1-2",
			Request: []byte("{\"out_refund_no\":\"R-resv-1-2\"}\x00\xff"), DueAt: due.Add(59*time.Second + 999999999)}},
		"resolved":          {At: at, By: "operator:alice", Data: Resolved{RefundNo: "R-resv-1-1", Reason: "退款已线下完成 \"ticket\" #42"}},
		"abandoned full":    {At: at, By: "operator:alice", Data: Abandoned{RefundNo: "R-resv-1-1", Reason: "gave up"}},
		"abandoned minimal": {At: at, By: "operator:alice", Data: Abandoned{RefundNo: "R-resv-1-1"}},
		"conflict full": {At: at, By: "provider:wechatpay", Data: Conflict{RefundNo: "R-resv-1-1", State: Failed,
			Source: SourceNotification, Outcome: OutcomeSucceeded, Code: "SUCCESS", ProviderID: "50300001"}},
		"conflict minimal": {At: at, By: "provider:wechatpay", Data: Conflict{RefundNo: "R-resv-1-1", State: Succeeded,
			Source: SourceQuery, Outcome: OutcomeFailed}},
		"stuck": {At: at, By: "engine", Data: FlaggedStuck{RefundNo: "R-resv-1-1"}},
		"recovered full": {At: at, By: "engine", Data: RefundRecovered{RefundNo: "R-resv-1-3", Number: 3, Amount: 2500,
			State: Succeeded, ProviderID: "50300001", SuccessTime: at.Add(-time.Hour), DueAt: due}},
		"recovered minimal": {At: at, By: "engine", Data: RefundRecovered{RefundNo: "R-resv-1-3", Number: 3, Amount: 1,
			State: Failed, ProviderID: "p"}},
		"empty by":      {At: at, Data: FlaggedStuck{RefundNo: "R-resv-1-1"}},
		"zero at":       {By: "engine", Data: Canceled{Refunded: 1}},
		"max amount":    {At: at, By: "u", Data: RefundRequested{RefundNo: "R-r-99", Number: 99, IdempotencyKey: "k", Fingerprint: "f", Amount: MaxAmount}},
		"newline in by": {At: at, By: "user:a\nb", Data: Canceled{Refunded: 5}},
	}
}

func TestEncode_RoundTrip(t *testing.T) {
	covered := map[string]bool{}
	for name, e := range sampleEvents() {
		t.Run(name, func(t *testing.T) {
			typ, ver, data, err := Encode(e)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			if typ != e.Data.EventType() || ver != EventVersion {
				t.Fatalf("Encode gave type %q v%d, want %q v%d", typ, ver, e.Data.EventType(), EventVersion)
			}
			got, err := Decode(typ, ver, data)
			if err != nil {
				t.Fatalf("Decode(%s): %v", data, err)
			}
			if !reflect.DeepEqual(got, e) {
				t.Fatalf("round trip:\n got %#v\nwant %#v\nbytes %s", got, e, data)
			}
		})
		covered[e.Data.EventType()] = true
	}
	for _, typ := range allTypes {
		if !covered[typ] {
			t.Errorf("no round-trip sample for %s", typ)
		}
	}
}

func TestEncode_TimesStoredInUTC(t *testing.T) {
	cst := time.FixedZone("CST", 8*3600)
	at := time.Date(2025, 3, 1, 18, 0, 0, 5, cst)
	e := Event{At: at, By: "engine", Data: QueryStarted{RefundNo: "R-r-1", Query: 1, DueAt: at.Add(time.Minute)}}
	typ, ver, data, err := Encode(e)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(typ, ver, data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.At.Equal(at) || got.At.Location() != time.UTC {
		t.Fatalf("At = %v, want %v in UTC", got.At, at)
	}
	if due := got.Data.(QueryStarted).DueAt; !due.Equal(at.Add(time.Minute)) {
		t.Fatalf("DueAt = %v, want the same instant as %v", due, at.Add(time.Minute))
	}
	// The monotonic clock reading is not stored; the instant is.
	now := time.Now()
	typ, ver, data, _ = Encode(Event{At: now, Data: Canceled{Refunded: 1}})
	if got, err := Decode(typ, ver, data); err != nil || !got.At.Equal(now) {
		t.Fatalf("time.Now() round trip: %v, %v", got.At, err)
	}
}

// TestDecode_Golden pins the stored format: journals written today must be
// read the same way by every later build.
func TestDecode_Golden(t *testing.T) {
	at := time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		typ  string
		data string
		want EventData
	}{
		{TypeRegistered,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"reservation_id":"resv-1","user_id":"u-42","out_trade_no":"OT1","transaction_id":"42","amount":10000,"currency":"CNY","paid_at":"2025-03-01T09:00:00Z"}}`,
			Registered{ReservationID: "resv-1", UserID: "u-42", OutTradeNo: "OT1", TransactionID: "42", Amount: 10000, Currency: "CNY", PaidAt: at.Add(-time.Hour)}},
		{TypeCanceled, `{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refunded":10000}}`, Canceled{Refunded: 10000}},
		{TypeRefundRequested,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","number":1,"idempotency_key":"k","fingerprint":"fp","amount":100,"reason":"r"}}`,
			RefundRequested{RefundNo: "R-resv-1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "fp", Amount: 100, Reason: "r"}},
		{TypeRefundRequested,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","number":1,"idempotency_key":"k","fingerprint":"fp","amount":100,"reason":"r","reason_code":"duplicate","metadata":{"a":"1","order":"O-9"}}}`,
			RefundRequested{RefundNo: "R-resv-1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "fp", Amount: 100, Reason: "r",
				ReasonCode: ReasonDuplicate, Metadata: NewMetadata(map[string]string{"order": "O-9", "a": "1"})}},
		{TypeSubmissionStarted,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","attempt":1,"request":"e30=","due_at":"2025-03-01T10:00:30Z"}}`,
			SubmissionStarted{RefundNo: "R-resv-1-1", Attempt: 1, Request: []byte("{}"), DueAt: at.Add(30 * time.Second)}},
		{TypeQueryStarted,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","query":2,"due_at":"2025-03-01T10:05:00Z"}}`,
			QueryStarted{RefundNo: "R-resv-1-1", Query: 2, DueAt: at.Add(5 * time.Minute)}},
		{TypeProviderResult,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","source":"notification","outcome":"SUCCEEDED","provider_id":"503","from":"PROCESSING","to":"SUCCEEDED","success_time":"2025-03-01T09:59:00Z"}}`,
			ProviderResult{RefundNo: "R-resv-1-1", Source: SourceNotification, Outcome: OutcomeSucceeded, ProviderID: "503",
				From: Processing, To: Succeeded, SuccessTime: at.Add(-time.Minute)}},
		{TypeAbandoned, `{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","reason":"x"}}`,
			Abandoned{RefundNo: "R-resv-1-1", Reason: "x"}},
		{TypeConflict,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","state":"FAILED","source":"query","outcome":"SUCCEEDED"}}`,
			Conflict{RefundNo: "R-resv-1-1", State: Failed, Source: SourceQuery, Outcome: OutcomeSucceeded}},
		{TypeFlaggedStuck, `{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1"}}`,
			FlaggedStuck{RefundNo: "R-resv-1-1"}},
		{TypeProviderResult,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","source":"response","attempt":2,"outcome":"UNKNOWN","code":"SYSTEM_ERROR","from":"PROCESSING","to":"PROCESSING","due_at":"2025-03-01T10:00:01.5Z","retry":true}}`,
			ProviderResult{RefundNo: "R-resv-1-1", Source: SourceResponse, Attempt: 2, Outcome: OutcomeUnknown, Code: "SYSTEM_ERROR",
				From: Processing, To: Processing, DueAt: at.Add(1500 * time.Millisecond), Retry: true}},
		{TypeSubmissionWaits,
			`{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-2","request":"eyJhIjoxfQ==","due_at":"2025-03-01T10:00:50Z"}}`,
			SubmissionScheduled{RefundNo: "R-resv-1-2", Request: []byte(`{"a":1}`), DueAt: at.Add(50 * time.Second)}},
		{TypeResolved, `{"at":"2025-03-01T10:00:00Z","by":"system","data":{"refund_no":"R-resv-1-1","reason":"settled at WeChat"}}`,
			Resolved{RefundNo: "R-resv-1-1", Reason: "settled at WeChat"}},
	}
	for _, tc := range cases {
		t.Run(tc.typ, func(t *testing.T) {
			got, err := Decode(tc.typ, 1, []byte(tc.data))
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			want := Event{At: at, By: "system", Data: tc.want}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v\nwant %#v", got, want)
			}
			// And today's encoder writes exactly these bytes.
			_, _, data, err := Encode(want)
			if err != nil || string(data) != tc.data {
				t.Fatalf("Encode = %s, %v\nwant    %s", data, err, tc.data)
			}
		})
	}
}

func TestDecode_UnknownEvent(t *testing.T) {
	_, _, data, err := Encode(Event{At: t0, By: "engine", Data: FlaggedStuck{RefundNo: "R-r-1"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		typ     string
		version uint16
	}{
		{"unknown type", "refund.teleported", EventVersion},
		{"empty type", "", EventVersion},
		{"type case differs", strings.ToUpper(TypeFlaggedStuck), EventVersion},
		{"version 0", TypeFlaggedStuck, 0},
		{"newer version", TypeFlaggedStuck, EventVersion + 1},
		{"much newer version", TypeFlaggedStuck, 65535},
	}
	for _, typ := range allTypes {
		cases = append(cases, struct {
			name    string
			typ     string
			version uint16
		}{"newer " + typ, typ, EventVersion + 1})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e, err := Decode(tc.typ, tc.version, data)
			if !errors.Is(err, ErrUnknownEvent) {
				t.Fatalf("Decode(%q, %d) error = %v, want ErrUnknownEvent", tc.typ, tc.version, err)
			}
			if e.Data != nil || !strings.HasPrefix(err.Error(), "reservation: ") {
				t.Fatalf("Decode returned %+v, %q", e, err)
			}
		})
	}
}

func TestDecode_Malformed(t *testing.T) {
	cases := map[string]string{
		"not json":           `{"at":`,
		"empty":              ``,
		"bad time":           `{"at":"yesterday","by":"x","data":{"refunded":1}}`,
		"data of wrong type": `{"at":"2025-03-01T10:00:00Z","by":"x","data":{"refunded":"all"}}`,
		"data not object":    `{"at":"2025-03-01T10:00:00Z","by":"x","data":[1]}`,
		// Never written (Encode refuses an event without data); refused
		// rather than read as an event with every field zero.
		"data missing": `{"at":"2025-03-01T10:00:00Z","by":"x"}`,
		"data null":    `{"at":"2025-03-01T10:00:00Z","by":"x","data":null}`,
	}
	for name, data := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Decode(TypeCanceled, EventVersion, []byte(data))
			if err == nil || errors.Is(err, ErrUnknownEvent) {
				t.Fatalf("Decode = %v, want a decode error that is not ErrUnknownEvent", err)
			}
			if !strings.HasPrefix(err.Error(), "reservation: decode "+TypeCanceled) {
				t.Fatalf("error %q does not say what failed", err)
			}
		})
	}
}

// encodeViaJSON is how Encode wrote events before it wrote the envelope by
// hand: encoding/json around a json.RawMessage. Encode must give the same
// bytes, so that hashes over stored records and the golden files hold.
func encodeViaJSON(e Event) ([]byte, error) {
	raw, err := json.Marshal(e.Data)
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		At   time.Time       `json:"at"`
		By   string          `json:"by"`
		Data json.RawMessage `json:"data"`
	}{e.At.UTC(), e.By, raw})
}

func TestEncode_SameBytesAsEncodingJSON(t *testing.T) {
	events := sampleEvents()
	odd := []string{"", "<script>&amp;</script>", "line\nbreak\t\"q\"", "\u2028\u2029", "bad utf8 \xff\xfe", "控制\x01\x1f", "emoji 🙂"}
	for i, by := range odd {
		events["odd by "+strconv.Itoa(i)] = Event{At: t0, By: by, Data: Abandoned{RefundNo: "R-r-1", Reason: by}}
	}
	cst := time.FixedZone("CST", 8*3600)
	events["zone and nanos"] = Event{At: time.Date(2025, 3, 1, 18, 0, 0, 120, cst), By: "x", Data: Canceled{Refunded: 1}}
	events["year 9999"] = Event{At: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), By: "x", Data: Canceled{Refunded: 1}}
	events["year 0"] = Event{At: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), By: "x", Data: Canceled{Refunded: 1}}
	for name, e := range events {
		t.Run(name, func(t *testing.T) {
			_, _, got, err := Encode(e)
			if err != nil {
				t.Fatalf("Encode: %v", err)
			}
			want, err := encodeViaJSON(e)
			if err != nil {
				t.Fatalf("encoding/json: %v", err)
			}
			if string(got) != string(want) {
				t.Fatalf("Encode wrote\n %s\nencoding/json writes\n %s", got, want)
			}
		})
	}
}

func TestEncode_TimeOutOfRange(t *testing.T) {
	for _, at := range []time.Time{time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, err := encodeViaJSON(Event{At: at, Data: Canceled{Refunded: 1}}); err == nil {
			t.Fatalf("encoding/json accepted %v; the test assumes it does not", at)
		}
		_, _, _, err := Encode(Event{At: at, By: "x", Data: Canceled{Refunded: 1}})
		if err == nil || !strings.HasPrefix(err.Error(), "reservation: encode") {
			t.Fatalf("Encode(at %v) = %v, want an error like encoding/json's", at, err)
		}
	}
}

// decodeTwoPass is how Decode read events before it decoded the envelope
// and the data in one pass: the envelope with the data as raw bytes, then
// the data. FuzzDecode checks the two agree.
func decodeTwoPass(typ string, data []byte) (Event, error) {
	var env struct {
		At   time.Time       `json:"at"`
		By   string          `json:"by"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(data, &env); err != nil {
		return Event{}, err
	}
	var d EventData
	var err error
	switch typ {
	case TypeRegistered:
		d, err = twoPassAs[Registered](env.Data)
	case TypeCanceled:
		d, err = twoPassAs[Canceled](env.Data)
	case TypeRefundRequested:
		d, err = twoPassAs[RefundRequested](env.Data)
	case TypeSubmissionStarted:
		d, err = twoPassAs[SubmissionStarted](env.Data)
	case TypeQueryStarted:
		d, err = twoPassAs[QueryStarted](env.Data)
	case TypeProviderResult:
		d, err = twoPassAs[ProviderResult](env.Data)
	case TypeAbandoned:
		d, err = twoPassAs[Abandoned](env.Data)
	case TypeConflict:
		d, err = twoPassAs[Conflict](env.Data)
	case TypeFlaggedStuck:
		d, err = twoPassAs[FlaggedStuck](env.Data)
	case TypeSubmissionWaits:
		d, err = twoPassAs[SubmissionScheduled](env.Data)
	case TypeResolved:
		d, err = twoPassAs[Resolved](env.Data)
	case TypeRefundRecovered:
		d, err = twoPassAs[RefundRecovered](env.Data)
	default:
		return Event{}, ErrUnknownEvent
	}
	if err != nil {
		return Event{}, err
	}
	return Event{At: env.At, By: env.By, Data: d}, nil
}

func twoPassAs[T EventData](raw json.RawMessage) (EventData, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// FuzzDecode feeds stored bytes to Decode and to the two-pass decoder it
// replaced: both must refuse the same inputs and read the same events,
// except that a missing or null "data" is now refused, and whatever
// decodes must encode, decode and encode again to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, e := range sampleEvents() {
		typ, _, data, err := Encode(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(typ, data)
	}
	f.Add(TypeCanceled, []byte(`{"at":"2025-03-01T10:00:00Z","by":"x","data":null}`))
	f.Add(TypeCanceled, []byte(`{"AT":"2025-03-01T10:00:00Z","By":"x","DATA":{"Refunded":3},"data":{"refunded":4}}`))
	f.Fuzz(func(t *testing.T, typ string, data []byte) {
		got, err := Decode(typ, EventVersion, data)
		if dataKeys(data) > 1 {
			// Two "data" keys (matched without case, as encoding/json
			// does): the two-pass decoder kept the last, Decode merges
			// them into one value. Never written; records are checksummed.
			return
		}
		old, oldErr := decodeTwoPass(typ, data)
		switch {
		case err != nil && oldErr == nil:
			if !strings.HasSuffix(err.Error(), "no data") || !reflect.ValueOf(old.Data).IsZero() {
				t.Fatalf("Decode refused what the two-pass decoder read as %#v: %v", old, err)
			}
			return
		case err == nil && oldErr != nil:
			t.Fatalf("Decode read %#v where the two-pass decoder refused: %v", got, oldErr)
		case err != nil:
			return
		}
		if !reflect.DeepEqual(got, old) {
			t.Fatalf("Decode read %#v, the two-pass decoder %#v", got, old)
		}
		typ2, ver, again, err := Encode(got)
		if err != nil {
			return // a time outside what JSON can hold was read; nothing to round-trip
		}
		// Compared as bytes: an empty and a nil request both encode to
		// nothing (omitempty).
		back, err := Decode(typ2, ver, again)
		if err != nil {
			t.Fatalf("re-encoded %s does not decode: %v", again, err)
		}
		if _, _, third, err := Encode(back); err != nil || string(third) != string(again) {
			t.Fatalf("encoding is not stable: %s then %s (%v)", again, third, err)
		}
	})
}

// dataKeys counts the top-level keys of a JSON object that encoding/json
// would match to the envelope's "data" field.
func dataKeys(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return 0
	}
	n := 0
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		if k, ok := tok.(string); ok && strings.EqualFold(k, "data") {
			n++
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return n
		}
	}
	return n
}

func TestEncode_NoData(t *testing.T) {
	if _, _, _, err := Encode(Event{At: t0, By: "x"}); err == nil || !strings.HasPrefix(err.Error(), "reservation: ") {
		t.Fatalf("Encode without data = %v, want an error", err)
	}
}

func TestEventType_Names(t *testing.T) {
	seen := map[string]bool{}
	for _, typ := range allTypes {
		if seen[typ] || !strings.Contains(typ, ".") {
			t.Fatalf("event type %q duplicated or malformed", typ)
		}
		seen[typ] = true
	}
	data := map[EventData]string{
		Registered{}: TypeRegistered, Canceled{}: TypeCanceled, RefundRequested{}: TypeRefundRequested,
		QueryStarted{}: TypeQueryStarted, Abandoned{}: TypeAbandoned, Conflict{}: TypeConflict,
		FlaggedStuck{}: TypeFlaggedStuck, ProviderResult{}: TypeProviderResult, Resolved{}: TypeResolved,
		RefundRecovered{}: TypeRefundRecovered,
	}
	for d, want := range data {
		if d.EventType() != want {
			t.Errorf("%T.EventType() = %q, want %q", d, d.EventType(), want)
		}
	}
	if (SubmissionStarted{}).EventType() != TypeSubmissionStarted {
		t.Error("SubmissionStarted has the wrong type")
	}
	if (SubmissionScheduled{}).EventType() != TypeSubmissionWaits {
		t.Error("SubmissionScheduled has the wrong type")
	}
	// The names are stored in journals: they never change.
	stored := map[string]string{
		TypeRegistered: "reservation.registered", TypeCanceled: "reservation.canceled", TypeRefundRequested: "refund.requested",
		TypeSubmissionStarted: "refund.submission_started", TypeQueryStarted: "refund.query_started",
		TypeProviderResult: "refund.provider_result", TypeAbandoned: "refund.abandoned", TypeConflict: "refund.conflict",
		TypeFlaggedStuck: "refund.flagged_stuck", TypeSubmissionWaits: "refund.submission_scheduled", TypeResolved: "refund.resolved",
		TypeRefundRecovered: "refund.recovered",
	}
	if len(stored) != len(allTypes) {
		t.Fatalf("%d stored names for %d types", len(stored), len(allTypes))
	}
	for typ, want := range stored {
		if typ != want {
			t.Errorf("event type %q, stored journals say %q", typ, want)
		}
	}
}

// TestReplay_ThroughCodec replays a realistic journal after a codec round
// trip and gets the same state as applying the events directly.
func TestReplay_ThroughCodec(t *testing.T) {
	s := &State{}
	var journal []Event
	step := func(cmd Command, env Env) {
		t.Helper()
		journal = append(journal, run(t, s, cmd, env)...)
	}
	step(validRegister(), testEnv(t0, "system:booking"))
	step(RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(3000), Reason: "partial"}, testEnv(t0, "user:u-42"))
	step(StartSubmission{RefundNo: "R-resv-1-1", Request: []byte(`{"a":1}`)}, testEnv(t0, "engine"))
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeRejected, Code: "NOT_ENOUGH"}}, providerEnv)
	step(Resubmit{RefundNo: "R-resv-1-1"}, testEnv(t0.Add(time.Hour), "operator:alice"))
	step(FireTimer{RefundNo: "R-resv-1-1", DueAt: s.Refund("R-resv-1-1").DueAt}, testEnv(t0.Add(2*time.Hour), "engine"))
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceQuery, Outcome: Outcome{Kind: OutcomeNotFound}}, providerEnv)
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceNotification, Outcome: Outcome{Kind: OutcomeSucceeded, ProviderID: "503", SuccessTime: t0.Add(3 * time.Hour)}}, providerEnv)
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceQuery, Outcome: Outcome{Kind: OutcomeFailed}}, providerEnv)
	step(RequestRefund{UserID: testUser, IdempotencyKey: "k2"}, testEnv(t0, "user:u-42"))
	step(StartSubmission{RefundNo: "R-resv-1-2", Request: []byte(`{"a":2}`)}, testEnv(t0, "engine"))
	step(RecordOutcome{RefundNo: "R-resv-1-2", Source: SourceNotification, Outcome: Outcome{Kind: OutcomeSucceeded}}, providerEnv)

	var stored []Event
	for _, e := range journal {
		typ, ver, data, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(typ, ver, data)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, back)
	}
	replayed := Replay(stored)
	assertSameState(t, s, replayed)
	if replayed.Status != StatusCanceled || replayed.Refund("R-resv-1-1").Conflicts != 1 || replayed.RefundByKey("k2").No != "R-resv-1-2" ||
		string(replayed.Refund("R-resv-1-1").Request) != `{"a":1}` || replayed.Version != uint64(len(journal)) {
		t.Fatalf("replayed state %s", dump(replayed))
	}
	// The replayed state keeps deciding like the live one.
	mustNoop(t, replayed, RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(3000), Reason: "partial"}, testEnv(t0, "u"))
	mustFail(t, replayed, RequestRefund{UserID: testUser, IdempotencyKey: "k3"}, testEnv(t0, "u"), ErrCanceled)
}

// TestReplay_ThroughCodecRetriesAndSpacing replays a journal with every
// event the retry, spacing and resolve rules write, through the codec, and
// gets the same state, which then decides like the live one.
func TestReplay_ThroughCodecRetriesAndSpacing(t *testing.T) {
	s := &State{}
	var journal []Event
	policy := Policy{RefundSpacing: time.Minute, MaxAttempts: 2}
	at := func(d time.Duration, by string) Env {
		return Env{Now: t0.Add(d), By: by, Policy: policy, Jitter: 0.37}
	}
	step := func(cmd Command, env Env) {
		t.Helper()
		journal = append(journal, run(t, s, cmd, env)...)
	}
	step(validRegister(), at(0, "system:booking"))
	step(RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(3000)}, at(0, "user:u-42"))
	step(StartSubmission{RefundNo: "R-resv-1-1", Request: []byte(`{"a":1}`)}, at(0, "user:u-42"))
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceResponse, Attempt: 1, Outcome: Outcome{Kind: OutcomeUnknown, Code: "SYSTEM_ERROR"}}, at(time.Second, "provider:wechatpay"))
	retry := s.Refund("R-resv-1-1").DueAt
	step(FireTimer{RefundNo: "R-resv-1-1", DueAt: retry}, Env{Now: retry, By: "engine", Policy: policy})
	// The retry went at 1m (the spacing): the second refund waits for 2m.
	step(RequestRefund{UserID: testUser, IdempotencyKey: "k2", Amount: ptr(7000)}, at(70*time.Second, "user:u-42"))
	step(StartSubmission{RefundNo: "R-resv-1-2", Request: []byte(`{"a":2}`)}, at(70*time.Second, "user:u-42"))
	waiting := *s.Refund("R-resv-1-2")
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceResponse, Attempt: 2, Outcome: Outcome{Kind: OutcomeUnknown}}, at(80*time.Second, "provider:wechatpay"))
	step(FireTimer{RefundNo: "R-resv-1-2", DueAt: waiting.DueAt}, Env{Now: waiting.DueAt, By: "engine", Policy: policy})
	step(RecordOutcome{RefundNo: "R-resv-1-2", Source: SourceNotification, Outcome: Outcome{Kind: OutcomeAbnormal, ProviderID: "503"}}, at(2*time.Minute, "provider:wechatpay"))
	abnormal := s.Refund("R-resv-1-2").DueAt
	step(FireTimer{RefundNo: "R-resv-1-2", DueAt: abnormal}, Env{Now: abnormal, By: "engine", Policy: policy})
	step(Resolve{RefundNo: "R-resv-1-2", Reason: "settled at WeChat"}, at(time.Hour, "operator:alice"))
	step(RecordOutcome{RefundNo: "R-resv-1-1", Source: SourceQuery, Outcome: Outcome{Kind: OutcomeSucceeded}}, at(2*time.Hour, "provider:wechatpay"))

	seen := map[string]bool{}
	var stored []Event
	for _, e := range journal {
		typ, ver, data, err := Encode(e)
		if err != nil {
			t.Fatal(err)
		}
		back, err := Decode(typ, ver, data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, e) {
			t.Fatalf("round trip:\n got %#v\nwant %#v", back, e)
		}
		seen[typ] = true
		stored = append(stored, back)
	}
	for _, typ := range []string{TypeSubmissionWaits, TypeResolved, TypeProviderResult, TypeQueryStarted, TypeCanceled} {
		if !seen[typ] {
			t.Fatalf("the journal has no %s event", typ)
		}
	}
	replayed := Replay(stored)
	assertSameState(t, s, replayed)
	r1, r2 := replayed.Refund("R-resv-1-1"), replayed.Refund("R-resv-1-2")
	if r1.State != Succeeded || r1.Attempts != 2 || !r1.SubmittedAt.Equal(t0) || string(r1.Request) != `{"a":1}` ||
		r2.State != Succeeded || r2.Code != "RESOLVED_BY_OPERATOR" || r2.Attempts != 1 || !r2.SubmittedAt.Equal(t0.Add(2*time.Minute)) ||
		string(r2.Request) != `{"a":2}` || replayed.Status != StatusCanceled || replayed.Version != uint64(len(journal)) {
		t.Fatalf("replayed state %s", dump(replayed))
	}
	mustFail(t, replayed, RequestRefund{UserID: testUser, IdempotencyKey: "k3"}, at(3*time.Hour, "u"), ErrCanceled)
	mustNoop(t, replayed, RequestRefund{UserID: testUser, IdempotencyKey: "k2", Amount: ptr(7000)}, at(3*time.Hour, "u"))
}
