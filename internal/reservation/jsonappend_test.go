package reservation

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
)

// randomText returns a string mixing what JSON escaping treats differently:
// plain ASCII, quotes and backslashes, control bytes, '<' '>' '&', DEL,
// multi-byte runes, U+2028/U+2029, U+FFFD itself and invalid UTF-8.
func randomText(r *rand.Rand) string {
	pieces := []string{"a", "Z", "0", " ", "-", "_", "/", ":", "\"", "\\", "<", ">", "&", "\x7f", "\x00", "\x01", "\b",
		"\f", "\n", "\r", "\t", "\x1f", "é", "中", "用户", "🙂", "\u2028", "\u2029", "\ufffd", "\xff", "\xc3", "\xe4\xb8",
		"\xed\xa0\x80", "\xf0\x9f\x99", "\xc0\xaf", "'", "+", "=", "%", "{", "}", "[", "]", ","}
	if r.IntN(8) == 0 {
		return ""
	}
	if r.IntN(2) == 0 {
		// Text that needs no escaping, as most stored strings.
		pieces = []string{"a", "Z", "0", "9", " ", "-", "_", "/", ":", "é", "中", "🙂", "", "�", "'", "+", "=", "{", "]"}
	}
	var b strings.Builder
	special := len(pieces) > 20
	for range r.IntN(24) {
		if special && r.IntN(4) == 0 {
			b.WriteByte(byte(r.IntN(256)))
			continue
		}
		b.WriteString(pieces[r.IntN(len(pieces))])
	}
	return b.String()
}

func randomInt(r *rand.Rand) int64 {
	switch r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxInt64 - r.Int64N(3)
	case 2:
		return math.MinInt64 + r.Int64N(3)
	case 3:
		return -r.Int64N(1_000_000)
	case 4:
		return r.Int64()
	}
	return r.Int64N(1_000_000)
}

func randomBytes(r *rand.Rand) []byte {
	switch r.IntN(5) {
	case 0:
		return nil
	case 1:
		return []byte{}
	}
	p := make([]byte, r.IntN(70))
	for i := range p {
		p[i] = byte(r.IntN(256))
	}
	return p
}

// randomTime covers zero times, every nanosecond precision, zones (UTC,
// fixed offsets including ones RFC 3339 cannot write), a monotonic reading
// and years outside what JSON can hold.
func randomTime(r *rand.Rand) time.Time {
	if r.IntN(5) == 0 {
		return time.Time{}
	}
	var year int
	switch r.IntN(10) {
	case 0:
		year = []int{-1, 0, 1, 9999, 10000, -400, 12000}[r.IntN(7)]
	default:
		year = 1970 + r.IntN(100)
	}
	nanos := 0
	switch r.IntN(4) {
	case 1:
		nanos = r.IntN(1000) * int(time.Millisecond)
	case 2:
		nanos = r.IntN(1e9)
	case 3:
		nanos = r.IntN(10) * 100
	}
	var loc *time.Location
	switch r.IntN(5) {
	case 0, 1:
		loc = time.UTC
	case 2:
		loc = time.FixedZone("CST", 8*3600)
	case 3:
		loc = time.FixedZone("X", (r.IntN(48*60)-24*60)*60+r.IntN(3)*17)
	default:
		loc = time.FixedZone("Far", []int{24 * 3600, -24 * 3600, 99 * 3600, -(23*3600 + 59*60)}[r.IntN(4)])
	}
	t := time.Date(year, time.Month(1+r.IntN(12)), 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), nanos, loc)
	if r.IntN(10) == 0 {
		t = time.Now().Add(time.Duration(r.Int64N(int64(time.Hour))))
	}
	return t
}

// randomEvent returns an event of any type with every field random.
func randomEvent(r *rand.Rand) Event {
	s, n, ts, bs := randomText, randomInt, randomTime, randomBytes
	var d EventData
	switch r.IntN(12) {
	case 0:
		d = Registered{ReservationID: s(r), UserID: s(r), OutTradeNo: s(r), TransactionID: s(r), Amount: n(r), Currency: s(r), PaidAt: ts(r), Merchant: s(r)}
	case 1:
		d = Canceled{Refunded: n(r)}
	case 2:
		d = RefundRequested{RefundNo: s(r), Number: int(n(r)), IdempotencyKey: s(r), Fingerprint: s(r), Amount: n(r), Reason: s(r),
			ReasonCode: s(r), Metadata: NewMetadata(map[string]string{s(r): s(r), s(r): s(r)})}
	case 3:
		d = SubmissionStarted{RefundNo: s(r), Attempt: int(n(r)), Request: bs(r), DueAt: ts(r)}
	case 4:
		d = QueryStarted{RefundNo: s(r), Query: int(n(r)), DueAt: ts(r)}
	case 5:
		d = ProviderResult{RefundNo: s(r), Source: Source(s(r)), Attempt: int(n(r)), Outcome: OutcomeKind(s(r)), Code: s(r),
			Message: s(r), ProviderID: s(r), From: RefundState(s(r)), To: RefundState(s(r)), SuccessTime: ts(r), DueAt: ts(r),
			Retry: r.IntN(2) == 0}
	case 6:
		d = SubmissionScheduled{RefundNo: s(r), Request: bs(r), DueAt: ts(r)}
	case 7:
		d = Resolved{RefundNo: s(r), Reason: s(r)}
	case 8:
		d = Abandoned{RefundNo: s(r), Reason: s(r)}
	case 9:
		d = Conflict{RefundNo: s(r), State: RefundState(s(r)), Source: Source(s(r)), Outcome: OutcomeKind(s(r)), Code: s(r), ProviderID: s(r)}
	case 10:
		d = RefundRecovered{RefundNo: s(r), Number: int(n(r)), Amount: n(r), State: RefundState(s(r)), ProviderID: s(r), SuccessTime: ts(r), DueAt: ts(r)}
	default:
		d = FlaggedStuck{RefundNo: s(r)}
	}
	return Event{At: ts(r), By: s(r), Data: d}
}

// checkSameAsEncodingJSON fails unless Encode and AppendEncoded give the
// bytes encoding/json gives e, or fail where it fails (with its error, for
// the data).
func checkSameAsEncodingJSON(t *testing.T, e Event) {
	t.Helper()
	want, wantErr := encodeViaJSON(e)
	_, _, got, err := Encode(e)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("%#v:\nEncode error %v, encoding/json error %v", e, err, wantErr)
	}
	if err != nil {
		if _, dataErr := json.Marshal(e.Data); dataErr != nil {
			if want := "reservation: encode " + e.Data.EventType() + ": " + dataErr.Error(); err.Error() != want {
				t.Fatalf("%#v:\nEncode error %q, want %q", e, err, want)
			}
		}
		return
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%#v:\nEncode wrote\n %s\nencoding/json writes\n %s", e, got, want)
	}
	prefix := []byte("prefix")
	appended, err := AppendEncoded(prefix, e)
	if err != nil || string(appended) != "prefix"+string(want) {
		t.Fatalf("AppendEncoded = %s, %v; want prefix then %s", appended, err, want)
	}
}

// TestEncode_SameBytesAsEncodingJSONRandom holds the hand-written encoder to
// encoding/json's bytes for many random events of every type.
func TestEncode_SameBytesAsEncodingJSONRandom(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	types := map[string]int{}
	failed := 0
	for range n {
		e := randomEvent(r)
		types[e.Data.EventType()]++
		checkSameAsEncodingJSON(t, e)
		if _, err := encodeViaJSON(e); err != nil {
			failed++
		}
	}
	for _, typ := range allTypes {
		if types[typ] == 0 {
			t.Errorf("no random event of type %s", typ)
		}
	}
	if failed == 0 || failed == n {
		t.Errorf("%d of %d random events fail to encode; want some of both", failed, n)
	}
}

// FuzzEncode builds every event type from fuzzed strings, bytes and numbers
// and holds Encode to encoding/json's bytes.
func FuzzEncode(f *testing.F) {
	f.Add("R-resv-1-1", "engine", []byte(`{"a":1}`), int64(42), int64(1700000000), int32(0))
	f.Add("<&>\u2028\xff\"\\", "\x00\n", []byte(nil), int64(-1), int64(-62167219200), int32(8*3600))
	f.Add("", "", []byte{}, int64(math.MaxInt64), int64(253402300800), int32(-86400))
	f.Fuzz(func(t *testing.T, s, by string, p []byte, n, unix int64, offset int32) {
		ts := time.Unix(unix, n%1e9).In(time.FixedZone("F", int(offset)))
		events := []EventData{
			Registered{ReservationID: s, UserID: by, OutTradeNo: s + by, TransactionID: s, Amount: n, Currency: by, PaidAt: ts, Merchant: by},
			Canceled{Refunded: n},
			RefundRequested{RefundNo: s, Number: int(n), IdempotencyKey: by, Fingerprint: s, Amount: -n, Reason: by,
				ReasonCode: s, Metadata: NewMetadata(map[string]string{s: by, by: s})},
			SubmissionStarted{RefundNo: s, Attempt: int(n), Request: p, DueAt: ts},
			QueryStarted{RefundNo: s, Query: int(n), DueAt: ts},
			ProviderResult{RefundNo: s, Source: Source(by), Attempt: int(n), Outcome: OutcomeKind(s), Code: by, Message: s,
				ProviderID: by, From: RefundState(s), To: RefundState(by), SuccessTime: ts, DueAt: ts, Retry: n%2 == 0},
			SubmissionScheduled{RefundNo: s, Request: p, DueAt: ts},
			Resolved{RefundNo: s, Reason: by},
			Abandoned{RefundNo: by, Reason: s},
			Conflict{RefundNo: s, State: RefundState(by), Source: Source(s), Outcome: OutcomeKind(by), Code: s, ProviderID: by},
			FlaggedStuck{RefundNo: s},
			RefundRecovered{RefundNo: s, Number: int(n), Amount: n, State: RefundState(by), ProviderID: s, SuccessTime: ts, DueAt: ts},
		}
		for _, d := range events {
			checkSameAsEncodingJSON(t, Event{At: ts, By: by, Data: d})
		}
	})
}

func TestIntLen(t *testing.T) {
	for _, n := range []int64{0, 1, 9, 10, -1, -9, -10, 99, 100, 123456789, math.MaxInt64, math.MinInt64, math.MinInt64 + 1} {
		if got, want := intLen(n), len(strconv.FormatInt(n, 10)); got != want {
			t.Errorf("intLen(%d) = %d, want %d", n, got, want)
		}
	}
}

// TestEncodedSizeHint_Exact checks the buffer Encode allocates against what
// it writes for events with every member present, no escaping and times in
// UTC: exactly their size.
func TestEncodedSizeHint_Exact(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(2025, 3, 1, 10, 0, 0, 0, time.UTC),
		time.Date(2025, 3, 1, 10, 0, 0, 123456789, time.UTC),
		time.Date(2025, 3, 1, 10, 0, 0, 120000000, time.UTC),
		time.Date(2025, 3, 1, 10, 0, 0, 5, time.UTC),
	} {
		full := map[string]EventData{
			"registered": Registered{ReservationID: "resv-1", UserID: "u", OutTradeNo: "OT1", TransactionID: "42", Amount: 10000, Currency: "CNY", PaidAt: at, Merchant: "m-1"},
			"canceled":   Canceled{Refunded: -5},
			"requested": RefundRequested{RefundNo: "R-1", Number: 12, IdempotencyKey: "k", Fingerprint: "fp", Amount: 100, Reason: "r",
				ReasonCode: ReasonOther, Metadata: NewMetadata(map[string]string{"order": "O-1", "b": "2"})},
			"submission": SubmissionStarted{RefundNo: "R-1", Attempt: 1, Request: []byte("{}x"), DueAt: at.Add(time.Second)},
			"query":      QueryStarted{RefundNo: "R-1", Query: 3, DueAt: at},
			"result": ProviderResult{RefundNo: "R-1", Source: SourceQuery, Attempt: 2, Outcome: OutcomeSucceeded, Code: "C", Message: "m",
				ProviderID: "p", From: Unknown, To: Succeeded, SuccessTime: at.Add(-time.Minute), DueAt: at, Retry: true},
			"scheduled": SubmissionScheduled{RefundNo: "R-1", Request: []byte("abcd"), DueAt: at},
			"resolved":  Resolved{RefundNo: "R-1", Reason: "x"},
			"abandoned": Abandoned{RefundNo: "R-1", Reason: "x"},
			"conflict":  Conflict{RefundNo: "R-1", State: Failed, Source: SourceQuery, Outcome: OutcomeSucceeded, Code: "c", ProviderID: "p"},
			"stuck":     FlaggedStuck{RefundNo: "R-1"},
			"recovered": RefundRecovered{RefundNo: "R-1", Number: 2, Amount: 5, State: Processing, ProviderID: "p", SuccessTime: at, DueAt: at},
		}
		if len(full) != len(allTypes) {
			t.Fatalf("%d types here, %d exist", len(full), len(allTypes))
		}
		for name, d := range full {
			e := Event{At: at, By: "engine", Data: d}
			_, _, data, err := Encode(e)
			if err != nil {
				t.Fatal(err)
			}
			if hint := EncodedSizeHint(e); hint != len(data) {
				t.Errorf("%s at %v: hint %d, encoded %d bytes: %s", name, at, hint, len(data), data)
			}
		}
	}
}
