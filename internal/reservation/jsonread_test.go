package reservation

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

// checkCanonicalAgrees fails if decodeCanonical reads data where
// encoding/json refuses it or reads another event. It reports whether
// decodeCanonical took data.
func checkCanonicalAgrees(t *testing.T, typ string, data []byte) bool {
	t.Helper()
	got, ok := decodeCanonical(typ, data)
	if !ok {
		return false
	}
	want, err := decodeJSON(typ, data)
	if err != nil {
		t.Fatalf("decodeCanonical read %s %s, encoding/json refuses it: %v", typ, data, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s %s:\ndecodeCanonical %#v\nencoding/json   %#v", typ, data, got, want)
	}
	return true
}

// TestDecodeCanonical_SameAsEncodingJSON decodes what Encode writes for
// many random events, and random corruptions of it: wherever the fast
// reader takes a record it must read what encoding/json reads, and it must
// take the records Encode writes whose strings need no escaping.
func TestDecodeCanonical_SameAsEncodingJSON(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewPCG(seed, 0xdec0de))
	n := 20000
	if testing.Short() {
		n = 2000
	}
	taken, plain, mutatedTaken := 0, 0, 0
	for range n {
		e := randomEvent(r)
		typ, _, data, err := Encode(e)
		if err != nil {
			continue
		}
		if checkCanonicalAgrees(t, typ, data) {
			taken++
		} else if !bytes.ContainsRune(data, '\\') {
			t.Fatalf("decodeCanonical refused what Encode wrote without escapes: %s %s", typ, data)
		}
		if !bytes.ContainsRune(data, '\\') {
			plain++
		}
		for range 4 {
			if checkCanonicalAgrees(t, typ, mutate(r, data)) {
				mutatedTaken++
			}
		}
		// A record read as another type is refused or read alike too.
		checkCanonicalAgrees(t, allTypes[r.IntN(len(allTypes))], data)
	}
	t.Logf("%d records taken (%d without escapes), %d corrupted ones", taken, plain, mutatedTaken)
	if taken == 0 || taken != plain || mutatedTaken == 0 {
		t.Fatalf("decodeCanonical took %d records of %d without escapes and %d corrupted ones", taken, plain, mutatedTaken)
	}
}

// mutate returns a copy of data with one random corruption: a byte
// changed, removed or repeated, whitespace, a digit, a quote or a backslash
// put in, or a member's key changed in case.
func mutate(r *rand.Rand, data []byte) []byte {
	out := bytes.Clone(data)
	if len(out) == 0 {
		return out
	}
	i := r.IntN(len(out))
	insert := func(s string) []byte {
		return append(append(append([]byte{}, out[:i]...), s...), out[i:]...)
	}
	switch r.IntN(9) {
	case 0:
		out[i] = byte(r.IntN(256))
	case 1:
		return append(out[:i], out[i+1:]...)
	case 2:
		return insert(string(out[i]))
	case 3:
		return insert(" ")
	case 4:
		return insert(string(rune('0' + r.IntN(10))))
	case 5:
		return insert(`"`)
	case 6:
		return insert(`\`)
	case 7:
		if c := out[i]; 'a' <= c && c <= 'z' {
			out[i] = c - 'a' + 'A'
		}
	default:
		return insert([]string{"-", ".5", "e3", "null", "true", "{}", `,"x":1`, "\x00", "\xff"}[r.IntN(9)])
	}
	return out
}

// TestDecodeCanonical_Numbers reads integers at and beyond int64's range,
// and number forms JSON allows but Encode never writes.
func TestDecodeCanonical_Numbers(t *testing.T) {
	cases := []struct {
		n    string
		took bool // else encoding/json reads it, or refuses it
	}{
		{"0", true}, {"-0", true}, {"7", true}, {"-7", true},
		{"9223372036854775807", true}, {"-9223372036854775808", true},
		{"9223372036854775808", false}, {"-9223372036854775809", false}, {"18446744073709551615", false},
		{"18446744073709551616", false}, {"99999999999999999999999", false},
		{"01", false}, {"-01", false}, {"1.0", false}, {"1e3", false}, {"-", false}, {"+1", false},
		{"1 ", false}, {`"1"`, false}, {"null", false}, {"0x10", false},
	}
	for _, tc := range cases {
		data := []byte(`{"at":"2025-03-01T10:00:00Z","by":"x","data":{"refunded":` + tc.n + `}}`)
		if took := checkCanonicalAgrees(t, TypeCanceled, data); took != tc.took {
			t.Errorf("%s: decodeCanonical took it = %v, want %v", tc.n, took, tc.took)
		}
	}
}
