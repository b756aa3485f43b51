package reservation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestValidateRequestRefund_ReasonCodeAndMetadata(t *testing.T) {
	many := map[string]string{}
	for i := range MaxMetadataKeys + 1 {
		many[strings.Repeat("k", i+1)] = "v"
	}
	full := map[string]string{}
	for i := range MaxMetadataKeys {
		full[strings.Repeat("k", i+1)] = strings.Repeat("v", MaxMetadataValueLen)
	}
	for _, tt := range []struct {
		name      string
		code      string
		md        map[string]string
		wantField string // "" accepts
	}{
		{"none", "", nil, ""},
		{"every code", "", nil, ""},
		{"at the limits", ReasonOther, full, ""},
		{"key of 40 bytes", "", map[string]string{strings.Repeat("k", 40): "v"}, ""},
		{"unknown code", "customer", nil, "reason_code"},
		{"code in another case", "DUPLICATE", nil, "reason_code"},
		{"too many keys", "", many, "metadata"},
		{"empty key", "", map[string]string{"": "v"}, `metadata[""]`},
		{"key of 41 bytes", "", map[string]string{strings.Repeat("k", 41): "v"}, `metadata["` + strings.Repeat("k", 41) + `"]`},
		{"control in key", "", map[string]string{"a\nb": "v"}, `metadata["a\nb"]`},
		{"empty value", "", map[string]string{"order": ""}, `metadata["order"]`},
		{"value of 501 bytes", "", map[string]string{"order": strings.Repeat("v", 501)}, `metadata["order"]`},
		{"control in value", "", map[string]string{"order": "a\tb"}, `metadata["order"]`},
		{"invalid UTF-8 value", "", map[string]string{"order": "\xff"}, `metadata["order"]`},
		{"first bad key in order", "", map[string]string{"b": "", "a": ""}, `metadata["a"]`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := validateRequestRefund(RequestRefund{UserID: testUser, IdempotencyKey: "k", ReasonCode: tt.code, Metadata: tt.md})
			var de *Error
			switch {
			case tt.wantField == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.wantField == "":
			case !errors.As(err, &de) || de.Code != CodeInvalid || de.Field != tt.wantField:
				t.Fatalf("error = %v, want invalid_argument on %s", err, tt.wantField)
			}
		})
	}
	for _, code := range ReasonCodes() {
		if err := validateRequestRefund(RequestRefund{UserID: testUser, IdempotencyKey: "k", ReasonCode: code}); err != nil {
			t.Errorf("reason code %q refused: %v", code, err)
		}
	}
}

// TestFingerprint_OldRequestsUnchanged: a request without a reason code or
// metadata has the fingerprint refundd journaled before they existed, so a
// client retrying such a request across an upgrade gets a replay, not a
// conflict.
func TestFingerprint_OldRequestsUnchanged(t *testing.T) {
	old := func(user, amount, reason string) string {
		h := sha256.Sum256([]byte(user + "\x00" + amount + "\x00" + reason))
		return hex.EncodeToString(h[:])
	}
	if got, want := Fingerprint(RequestRefund{UserID: "u", Amount: ptr(5), Reason: "r"}), old("u", "5", "r"); got != want {
		t.Fatalf("Fingerprint = %s, want the old %s", got, want)
	}
	if got, want := Fingerprint(RequestRefund{UserID: "u", Metadata: map[string]string{}}), old("u", "all", ""); got != want {
		t.Fatalf("empty metadata: Fingerprint = %s, want the old %s", got, want)
	}
}

func TestFingerprint_ReasonCodeAndMetadata(t *testing.T) {
	base := RequestRefund{UserID: "u", Amount: ptr(5), Reason: "r"}
	with := func(code string, md map[string]string) RequestRefund {
		c := base
		c.ReasonCode, c.Metadata = code, md
		return c
	}
	distinct := []RequestRefund{
		base,
		with(ReasonOther, nil),
		with(ReasonDuplicate, nil),
		with("", map[string]string{"a": "b"}),
		with("", map[string]string{"a": "c"}),
		with("", map[string]string{"b": "b"}),
		with("", map[string]string{"ab": "c"}),
		with("", map[string]string{"a": "bc"}),
		with("", map[string]string{"a": "b", "c": "d"}),
		with(ReasonOther, map[string]string{"a": "b"}),
	}
	seen := map[string]int{}
	for i, c := range distinct {
		fp := Fingerprint(c)
		if j, ok := seen[fp]; ok {
			t.Fatalf("requests %d (%+v) and %d (%+v) share a fingerprint", j, distinct[j], i, c)
		}
		seen[fp] = i
	}
	// Map order is not content.
	a := with(ReasonOther, map[string]string{"x": "1", "y": "2", "z": "3"})
	b := with(ReasonOther, map[string]string{"z": "3", "y": "2", "x": "1"})
	if Fingerprint(a) != Fingerprint(b) {
		t.Fatal("the same metadata gives two fingerprints")
	}
}

func TestRequestRefund_MetadataReplayAndConflict(t *testing.T) {
	s := &State{}
	run(t, s, validRegister(), testEnv(t0, "s"))
	md := map[string]string{"order": "O-1", "agent": "a-7"}
	req := RequestRefund{UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), ReasonCode: ReasonDuplicate, Metadata: md}
	ev := run(t, s, req, testEnv(t0, "u"))
	d := ev[0].Data.(RefundRequested)
	if d.ReasonCode != ReasonDuplicate || d.Metadata != NewMetadata(md) {
		t.Fatalf("journaled %+v, want the code and metadata", d)
	}
	r := s.RefundByKey("k1")
	if r.ReasonCode != ReasonDuplicate || len(r.Metadata.Map()) != 2 || r.Metadata.Map()["order"] != "O-1" {
		t.Fatalf("refund has %q %v", r.ReasonCode, r.Metadata.Map())
	}
	// The caller's map is not journaled by reference.
	md["order"] = "changed"
	if got := s.RefundByKey("k1").Metadata.Map()["order"]; got != "O-1" {
		t.Fatalf("metadata changed with the caller's map: %q", got)
	}
	replay := req
	replay.Metadata = map[string]string{"agent": "a-7", "order": "O-1"}
	if ev, err := Decide(s, replay, testEnv(t0, "u")); err != nil || len(ev) != 0 {
		t.Fatalf("replay = %v, %v; want no events", ev, err)
	}
	for name, c := range map[string]RequestRefund{
		"other value":    {UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), ReasonCode: ReasonDuplicate, Metadata: map[string]string{"order": "O-2", "agent": "a-7"}},
		"fewer keys":     {UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), ReasonCode: ReasonDuplicate, Metadata: map[string]string{"order": "O-1"}},
		"no metadata":    {UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), ReasonCode: ReasonDuplicate},
		"other code":     {UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), ReasonCode: ReasonOther, Metadata: map[string]string{"order": "O-1", "agent": "a-7"}},
		"no reason code": {UserID: testUser, IdempotencyKey: "k1", Amount: ptr(100), Metadata: map[string]string{"order": "O-1", "agent": "a-7"}},
	} {
		if _, err := Decide(s, c, testEnv(t0, "u")); !errors.Is(err, ErrIdempotencyKeyReused) {
			t.Errorf("%s: err = %v, want %v", name, err, ErrIdempotencyKeyReused)
		}
	}
}

// TestRequestRefund_MetadataNeverSentToProvider: the provider's request
// bytes of a refund with a reason code and metadata are those of the same
// refund without them. The encoder here writes every field it is given, so
// a field added to RefundRequest to carry them would show.
func TestRequestRefund_MetadataNeverSentToProvider(t *testing.T) {
	encode := func(r RefundRequest) ([]byte, error) { return json.Marshal(r) }
	body := func(c RequestRefund) []byte {
		s := &State{}
		run(t, s, validRegister(), testEnv(t0, "s"))
		env := testEnv(t0, "u")
		env.Encode = encode
		run(t, s, c, env)
		return s.Refund(s.Refunds[0].No).Request
	}
	plain := body(RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "trip canceled"})
	with := body(RequestRefund{UserID: testUser, IdempotencyKey: "k", Amount: ptr(100), Reason: "trip canceled",
		ReasonCode: ReasonFraudulent, Metadata: map[string]string{"secret-ref": "do-not-send-me"}})
	if len(plain) == 0 || string(plain) != string(with) {
		t.Fatalf("request bytes differ:\nwithout: %s\nwith:    %s", plain, with)
	}
	if strings.Contains(string(with), "do-not-send-me") || strings.Contains(string(with), ReasonFraudulent) {
		t.Fatalf("request bytes carry the metadata or reason code: %s", with)
	}
}

// TestDecode_RefundRequestedWithoutCodeOrMetadata: a journal written before
// reason codes and metadata reads them as empty, and a refund rebuilt from
// it has none.
func TestDecode_RefundRequestedWithoutCodeOrMetadata(t *testing.T) {
	old := `{"at":"2025-03-01T10:00:00Z","by":"user:u","data":{"refund_no":"R-r-1","number":1,"idempotency_key":"k","fingerprint":"fp","amount":100,"reason":"r"}}`
	for name, data := range map[string]string{"canonical": old, "spaced": strings.ReplaceAll(old, ",", ", ")} {
		ev, err := Decode(TypeRefundRequested, 1, []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		d := ev.Data.(RefundRequested)
		if d.ReasonCode != "" || !d.Metadata.IsZero() || d.Metadata.Map() != nil {
			t.Fatalf("%s: old event decoded with %q %v", name, d.ReasonCode, d.Metadata.Map())
		}
		s := &State{}
		Apply(s, Event{Data: Registered{ReservationID: "r", UserID: "u", OutTradeNo: "o", Amount: 100, Currency: "CNY"}})
		Apply(s, ev)
		if r := s.Refund("R-r-1"); r == nil || r.ReasonCode != "" || !r.Metadata.IsZero() {
			t.Fatalf("%s: refund %+v", name, r)
		}
	}
}

// TestDecode_MetadataNotCanonical: metadata Encode would not write (keys
// out of order, repeated, escaped, or an empty object) still reads as
// encoding/json reads it, into the same canonical metadata.
func TestDecode_MetadataNotCanonical(t *testing.T) {
	pre := `{"at":"2025-03-01T10:00:00Z","by":"u","data":{"refund_no":"R","number":1,"idempotency_key":"k","fingerprint":"f","amount":1,"metadata":`
	for _, tt := range []struct {
		md   string
		want map[string]string
	}{
		{`{"b":"2","a":"1"}`, map[string]string{"a": "1", "b": "2"}},
		{`{"a":"1","a":"2"}`, map[string]string{"a": "2"}},
		{`{"\u0061":"\u00e9"}`, map[string]string{"a": "é"}},
		{`{}`, nil},
		{`null`, nil},
	} {
		ev, err := Decode(TypeRefundRequested, 1, []byte(pre+tt.md+"}}"))
		if err != nil {
			t.Fatalf("%s: %v", tt.md, err)
		}
		if got := ev.Data.(RefundRequested).Metadata; got != NewMetadata(tt.want) {
			t.Errorf("%s: decoded %v, want %v", tt.md, got.Map(), tt.want)
		}
	}
}

func TestMetadata_JSON(t *testing.T) {
	m := NewMetadata(map[string]string{"z": "<&>", "a": "订单 \"1\""})
	b, err := json.Marshal(struct {
		M Metadata `json:"m,omitzero"`
		N Metadata `json:"n,omitzero"`
	}{M: m})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"m":{"a":"订单 \"1\"","z":"\u003c\u0026\u003e"}}`
	if string(b) != want {
		t.Fatalf("Marshal = %s, want %s", b, want)
	}
	plain, _ := json.Marshal(map[string]string{"z": "<&>", "a": "订单 \"1\""})
	if string(m.AppendJSON(nil)) != string(plain) {
		t.Fatalf("AppendJSON = %s, encoding/json writes %s", m.AppendJSON(nil), plain)
	}
	var back Metadata
	if err := json.Unmarshal(plain, &back); err != nil || back != m {
		t.Fatalf("Unmarshal = %v, %v; want %v", back.Map(), err, m.Map())
	}
	if string(Metadata{}.AppendJSON(nil)) != "{}" {
		t.Fatalf("zero metadata is %s", Metadata{}.AppendJSON(nil))
	}
}
