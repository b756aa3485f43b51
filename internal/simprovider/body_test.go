package simprovider

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/reservation"
)

// newBody is a body with every field set from its arguments.
func newBody(tradeNo, txID, refundNo, reason string, refund, total int64, currency string) body {
	b := body{OutTradeNo: tradeNo, TransactionID: txID, OutRefundNo: refundNo, Reason: reason}
	b.Amount.Refund, b.Amount.Total, b.Amount.Currency = refund, total, currency
	return b
}

// pieces are what random strings are built from: plain text, everything
// encoding/json escapes, multi-byte runes and invalid UTF-8.
var pieces = []string{
	"R-resv-1-1", "ORD", "a", "9", " ", "_", "-", "\x7f", "\"", "\\", "/", "<", ">", "&",
	"\b", "\f", "\n", "\r", "\t", "\x00", "\x1f", "é", "用户", "\U0001F642", "\u2028", "\u2029",
	"\ufffd", "\xff", "\xe7\x94", "\xed\xa0\x80",
}

// randString is empty, plain or a mix of pieces.
func randString(rng *rand.Rand) string {
	switch rng.IntN(4) {
	case 0:
		return ""
	case 1:
		return fmt.Sprintf("R-resv-%d-%d", rng.IntN(1e6), 1+rng.IntN(9))
	}
	var sb strings.Builder
	for range 1 + rng.IntN(6) {
		sb.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return sb.String()
}

// randAmount favours the edges: zero, negative, 18 and 19 digits, the
// int64 limits.
func randAmount(rng *rand.Rand) int64 {
	switch rng.IntN(8) {
	case 0:
		return 0
	case 1:
		return -rng.Int64N(1e6)
	case 2:
		return []int64{math.MaxInt64, math.MinInt64, 999_999_999_999_999_999, -999_999_999_999_999_999,
			1_000_000_000_000_000_000, -1_000_000_000_000_000_000}[rng.IntN(6)]
	case 3:
		return int64(rng.Uint64())
	}
	return rng.Int64N(1e7)
}

func randBody(rng *rand.Rand) body {
	return newBody(randString(rng), randString(rng), randString(rng), randString(rng),
		randAmount(rng), randAmount(rng), []string{"CNY", "", "人民币", "<\xff>"}[rng.IntN(4)])
}

func newRNG(t testing.TB) (*rand.Rand, uint64) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, seed)), seed
}

func TestAppendBody_Table(t *testing.T) {
	tests := []struct {
		name string
		b    body
		want string
	}{
		{"only required", newBody("", "", "R-1", "", 100, 200, "CNY"),
			`{"out_refund_no":"R-1","amount":{"refund":100,"total":200,"currency":"CNY"}}`},
		{"every field", newBody("ORD-1", "tx1", "R-1", "change of plans", 3000, 10000, "CNY"),
			`{"out_trade_no":"ORD-1","transaction_id":"tx1","out_refund_no":"R-1","reason":"change of plans","amount":{"refund":3000,"total":10000,"currency":"CNY"}}`},
		{"escapes and limits", newBody("<a&b>", "", "", "用户\n\xff", math.MinInt64, 0, ""),
			`{"out_trade_no":"\u003ca\u0026b\u003e","out_refund_no":"","reason":"用户\n\ufffd","amount":{"refund":-9223372036854775808,"total":0,"currency":""}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := appendBody(nil, &tt.b)
			if string(got) != tt.want {
				t.Errorf("got  %s\nwant %s", got, tt.want)
			}
			if std, _ := json.Marshal(tt.b); !bytes.Equal(got, std) {
				t.Errorf("got  %s\nencoding/json %s", got, std)
			}
		})
	}
}

// TestAppendBody_Random holds appendBody to json.Marshal's bytes, and
// bodySize to their length when nothing needed an escape.
func TestAppendBody_Random(t *testing.T) {
	rng, seed := newRNG(t)
	for range 20000 {
		b := randBody(rng)
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		got := appendBody([]byte("x"), &b)
		if !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("seed %d: %#v\n got %s\nwant %s", seed, b, got[1:], want)
		}
		n := bodySize(&b)
		if bytes.IndexByte(want, '\\') < 0 && n != len(want) || n > len(want) {
			t.Fatalf("seed %d: bodySize %d for %d bytes: %s", seed, n, len(want), want)
		}
	}
}

// TestRequestBody_SameBytesAsEncodingJSON checks the provider's method:
// the bytes json.Marshal gave for the body it builds, in a buffer of just
// that size when nothing needed an escape.
func TestRequestBody_SameBytesAsEncodingJSON(t *testing.T) {
	rng, seed := newRNG(t)
	p := New(Options{})
	for range 5000 {
		r := reservation.RefundRequest{RefundNo: randString(rng), OutTradeNo: randString(rng), TransactionID: randString(rng),
			Amount: randAmount(rng), Total: randAmount(rng), Currency: randString(rng), Reason: randString(rng)}
		got, err := p.RequestBody(r)
		if err != nil {
			t.Fatal(err)
		}
		// What RequestBody did before: the transaction id is not sent.
		want, _ := json.Marshal(newBody(r.OutTradeNo, "", r.RefundNo, r.Reason, r.Amount, r.Total, r.Currency))
		if !bytes.Equal(got, want) {
			t.Fatalf("seed %d: %#v\n got %s\nwant %s", seed, r, got, want)
		}
		if bytes.IndexByte(got, '\\') < 0 && cap(got) != len(got) {
			t.Fatalf("seed %d: cap %d for %d bytes", seed, cap(got), len(got))
		}
	}
}

// sameAsUnmarshal fails t unless parseBody and json.Unmarshal agree on
// raw: both refuse it, or both give the same body.
func sameAsUnmarshal(t *testing.T, raw []byte) (body, error) {
	t.Helper()
	var got, want body
	err := parseBody(raw, &got)
	wantErr := json.Unmarshal(raw, &want)
	if (err == nil) != (wantErr == nil) || err == nil && got != want {
		t.Fatalf("%q:\nparseBody %#v, %v\nUnmarshal %#v, %v", raw, got, err, want, wantErr)
	}
	return got, err
}

// plainAmount is whether readCanonical reads n itself.
func plainAmount(n int64) bool { return n > -1e18 && n < 1e18 }

// TestParseBody_Canonical parses appendBody's bytes of random bodies: the
// result is json.Unmarshal's, and the hand reader takes every body without
// escapes or 19-digit amounts.
func TestParseBody_Canonical(t *testing.T) {
	rng, seed := newRNG(t)
	fast := 0
	for range 20000 {
		b := randBody(rng)
		raw := appendBody(nil, &b)
		sameAsUnmarshal(t, raw)
		var got body
		plain := bytes.IndexByte(raw, '\\') < 0 && plainAmount(b.Amount.Refund) && plainAmount(b.Amount.Total)
		if ok := readCanonical(raw, &got); ok != plain {
			t.Fatalf("seed %d: readCanonical(%s) = %v, want %v", seed, raw, ok, plain)
		}
		if plain {
			fast++
			if got != b {
				t.Fatalf("seed %d: readCanonical(%s) = %#v, want %#v", seed, raw, got, b)
			}
		}
	}
	if fast < 500 {
		t.Errorf("only %d plain bodies of 20000", fast)
	}
}

// member is one name and JSON value of a body written by variant.
type member struct{ key, val string }

// quoteEscaped writes s with every rune as a \u escape (a pair for runes
// beyond the BMP), which encoding/json reads back as s for valid UTF-8.
func quoteEscaped(s string) string {
	var sb strings.Builder
	sb.WriteByte('"')
	for _, r := range s {
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&sb, `\u%04X`, u)
		}
	}
	sb.WriteByte('"')
	return sb.String()
}

// variants writes b in forms that are not appendBody's: whitespace,
// members reordered, escaped strings, unknown members, keys in another
// case, nulls, repeated keys, trailing whitespace.
func variants(b body) []string {
	q := func(s string) string { return string(appendStringTo(nil, s)) }
	object := func(sep string, ms ...member) string {
		parts := make([]string, len(ms))
		for i, m := range ms {
			parts[i] = fmt.Sprintf("%q:%s%s", m.key, sep, m.val)
		}
		return "{" + strings.Join(parts, ","+sep) + "}"
	}
	ref, tot := fmt.Sprint(b.Amount.Refund), fmt.Sprint(b.Amount.Total)
	canonAmount := object("", member{"refund", ref}, member{"total", tot}, member{"currency", q(b.Amount.Currency)})
	all := []member{{"out_trade_no", q(b.OutTradeNo)}, {"transaction_id", q(b.TransactionID)},
		{"out_refund_no", q(b.OutRefundNo)}, {"reason", q(b.Reason)}, {"amount", canonAmount}}
	rev := make([]member, len(all))
	for i, m := range all {
		rev[len(all)-1-i] = m
	}
	escaped := []member{{"out_trade_no", quoteEscaped(b.OutTradeNo)}, {"out_refund_no", quoteEscaped(b.OutRefundNo)},
		{"reason", quoteEscaped(b.Reason)},
		{"amount", object("", member{"refund", ref}, member{"total", tot}, member{"currency", quoteEscaped(b.Amount.Currency)})}}
	upper := make([]member, len(all))
	for i, m := range all {
		upper[i] = member{strings.ToUpper(m.key), m.val}
	}
	return []string{
		object(" ", all...),
		object("\n\t", all...),
		" " + object("", all...) + " \n",
		object("", rev...),
		object("", all[2], all[4], all[0]),
		object("", all[2], member{"amount", object("", member{"currency", q(b.Amount.Currency)}, member{"total", tot}, member{"refund", ref})}),
		object("", escaped...),
		object("", append([]member{{"notify_url", `"https://x/\u003c"`}, {"extra", `{"a":[1,2.5,null,true]}`}}, all...)...),
		object("", append(all, member{"funds_account", `"AVAILABLE"`})...),
		object("", upper...),
		object("", all[0], all[1], member{"out_refund_no", "null"}, all[3], all[4]),
		object("", all[0], member{"out_refund_no", `"first"`}, all[2], all[4]),
		object("", all[2], all[4], member{"amount", `{"refund":7}`}),
		object("", all[2], member{"amount", "null"}),
		object("", all[2], member{"amount", object("", member{"refund", ref + ".0"}, member{"total", tot})}),
		object("", all[2], member{"amount", object("", member{"refund", ref + "e0"}, member{"total", tot})}),
		object("", all[2], member{"amount", object("", member{"refund", `"` + ref + `"`})}),
	}
}

// appendStringTo quotes s as json.Marshal does.
func appendStringTo(dst []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(dst, q...)
}

// TestParseBody_Variants checks that every other way of writing a body
// reads as json.Unmarshal reads it.
func TestParseBody_Variants(t *testing.T) {
	rng, _ := newRNG(t)
	bodies := []body{newBody("ORD-1", "tx", "R-resv-1-1", "change of plans", 3000, 10000, "CNY"),
		newBody("", "", "R-1", "", 0, -5, "")}
	for range 2000 {
		bodies = append(bodies, randBody(rng))
	}
	accepted := 0
	for _, b := range bodies {
		for _, v := range variants(b) {
			if _, err := sameAsUnmarshal(t, []byte(v)); err == nil {
				accepted++
			}
		}
	}
	// The plain body's variants that keep its members read back as it.
	b := bodies[0]
	for i, v := range variants(b)[:10] {
		got, err := sameAsUnmarshal(t, []byte(v))
		if err != nil || got.OutRefundNo != b.OutRefundNo || got.Amount != b.Amount {
			t.Errorf("variant %d %s: %#v, %v", i, v, got, err)
		}
	}
	if accepted == 0 {
		t.Error("no variant was accepted")
	}
}

// TestReadCanonical_Table shows which bodies of appendBody's shape the
// hand reader takes and which it leaves to encoding/json; either way the
// result is json.Unmarshal's.
func TestReadCanonical_Table(t *testing.T) {
	canon := func(tradeNo, refund string) string {
		return `{"out_trade_no":"` + tradeNo + `","out_refund_no":"R-1","amount":{"refund":` + refund + `,"total":2,"currency":"CNY"}}`
	}
	tests := []struct {
		name  string
		raw   string
		takes bool
	}{
		{"plain", canon("ORD-1", "1"), true},
		{"raw multi-byte runes", canon("用户\U0001F642", "1"), true},
		{"raw separators and DEL", canon("\u2028\u2029\x7f<&>", "1"), true},
		{"empty optional member", canon("", "1"), true},
		{"negative zero", canon("x", "-0"), true},
		{"18 digits", canon("x", "-999999999999999999"), true},
		{"19 digits", canon("x", "1000000000000000000"), false},
		{"invalid UTF-8", canon("\xff", "1"), false},
		{"surrogate half", canon("\xed\xa0\x80", "1"), false},
		{"escaped", canon(`\u004f`, "1"), false},
		{"escaped quote", canon(`\"`, "1"), false},
		{"control byte", canon("\x1f", "1"), false},
		{"leading zero", canon("x", "01"), false},
		{"fraction", canon("x", "1.0"), false},
		{"exponent", canon("x", "1e2"), false},
		{"trailing newline", canon("x", "1") + "\n", false},
		{"space after colon", strings.Replace(canon("x", "1"), `"total":`, `"total": `, 1), false},
		{"reason before out_refund_no", `{"reason":"r","out_refund_no":"R-1","amount":{"refund":1,"total":2,"currency":"CNY"}}`, false},
		{"no currency", `{"out_refund_no":"R-1","amount":{"refund":1,"total":2}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got body
			if ok := readCanonical([]byte(tt.raw), &got); ok != tt.takes {
				t.Fatalf("readCanonical(%q) = %v, want %v", tt.raw, ok, tt.takes)
			}
			parsed, _ := sameAsUnmarshal(t, []byte(tt.raw))
			if tt.takes && got != parsed {
				t.Fatalf("readCanonical(%q) = %#v, want %#v", tt.raw, got, parsed)
			}
		})
	}
}

// TestParseBody_Invalid feeds bodies encoding/json refuses: parseBody
// refuses them too.
func TestParseBody_Invalid(t *testing.T) {
	canon := `{"out_trade_no":"ORD-1","out_refund_no":"R-1","amount":{"refund":1,"total":2,"currency":"CNY"}}`
	tests := []string{
		"", " ", "{", "[]", `"R-1"`, "nul",
		canon + "x", canon + "}", canon + "{}",
		strings.Replace(canon, `"refund":1`, `"refund":01`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":-`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":1.5`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":9223372036854775808`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":-9223372036854775809`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":"1"`, 1),
		strings.Replace(canon, `"refund":1`, `"refund":+1`, 1),
		strings.Replace(canon, `ORD-1`, "ORD\x01", 1),
		strings.Replace(canon, `ORD-1`, "ORD\n", 1),
		strings.Replace(canon, `ORD-1`, `ORD\x`, 1),
		strings.Replace(canon, `ORD-1`, `ORD\`, 1),
		strings.Replace(canon, `"currency":"CNY"`, `"currency":CNY`, 1),
		strings.Replace(canon, `,"amount"`, `"amount"`, 1),
	}
	for i := range len(canon) {
		tests = append(tests, canon[:i])
	}
	for _, raw := range tests {
		if _, err := sameAsUnmarshal(t, []byte(raw)); err == nil {
			t.Errorf("%q: accepted", raw)
		}
	}
	// Amounts that need 19 digits still read, through encoding/json.
	big := strings.Replace(canon, `"refund":1`, `"refund":-9223372036854775808`, 1)
	if got, err := sameAsUnmarshal(t, []byte(big)); err != nil || got.Amount.Refund != math.MinInt64 {
		t.Errorf("%s: %#v, %v", big, got, err)
	}
}

func FuzzParseBody(f *testing.F) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, b := range []body{newBody("ORD-1", "", "R-resv-1-1", "change of plans", 3000, 10000, "CNY"),
		newBody("<&>", "tx", "用户", "\xff\n", -1, math.MaxInt64, ""), randBody(rng)} {
		f.Add(appendBody(nil, &b))
		for _, v := range variants(b)[:8] {
			f.Add([]byte(v))
		}
	}
	f.Add([]byte(`{"out_refund_no":"R-1","amount":{"refund":01,"total":2,"currency":"CNY"}}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fast body
		if readCanonical(raw, &fast) {
			var std body
			if err := json.Unmarshal(raw, &std); err != nil {
				t.Fatalf("%q: the hand reader took what encoding/json refuses: %v", raw, err)
			}
			if fast != std {
				t.Fatalf("%q:\nhand reader %#v\nUnmarshal   %#v", raw, fast, std)
			}
			if !utf8.Valid(raw) {
				t.Fatalf("%q: the hand reader took invalid UTF-8", raw)
			}
		}
		got, err := sameAsUnmarshal(t, raw)
		if err != nil {
			return
		}
		// Whatever reads also writes as encoding/json writes it, and
		// reads back the same.
		enc := appendBody(nil, &got)
		if want, _ := json.Marshal(got); !bytes.Equal(enc, want) {
			t.Fatalf("appendBody %s, json.Marshal %s", enc, want)
		}
		if again, _ := sameAsUnmarshal(t, enc); again != got {
			t.Fatalf("%s reads back as %#v, want %#v", enc, again, got)
		}
	})
}
