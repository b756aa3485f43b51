package jsontext

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

func TestAppendString_Table(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", `""`},
		{"plain", "R-resv-1-1", `"R-resv-1-1"`},
		{"quote and backslash", `a"b\c`, `"a\"b\\c"`},
		{"short control escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other control bytes", "\x00\x01\x1f", `"\u0000\u0001\u001f"`},
		{"DEL is copied", "\x7f", "\"\x7f\""},
		{"html", "<a href=x>&amp;</a>", `"\u003ca href=x\u003e\u0026amp;\u003c/a\u003e"`},
		{"line and paragraph separators", "a\u2028b\u2029c", `"a\u2028b\u2029c"`},
		{"multi-byte runes copied", "用户 é \U0001F642", "\"用户 é \U0001F642\""},
		{"lone invalid byte", "\xff", `"\ufffd"`},
		{"truncated rune", "a\xe7\x94", `"a\ufffd\ufffd"`},
		{"surrogate half", "\xed\xa0\x80", `"\ufffd\ufffd\ufffd"`},
		{"overlong slash", "\xc0\xaf", `"\ufffd\ufffd"`},
		{"invalid between runes", "用\xff户", `"用\ufffd户"`},
		{"escape at both ends", "\n<x>\n", `"\n\u003cx\u003e\n"`},
		{"max rune", string(rune(utf8.MaxRune)), "\"\U0010FFFF\""},
		{"U+2027 and U+202A untouched", "\u2027\u202a", "\"\u2027\u202a\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendString(nil, tt.in)
			if string(got) != tt.want {
				t.Errorf("AppendString(%q) = %s, want %s", tt.in, got, tt.want)
			}
			if std, _ := json.Marshal(tt.in); !bytes.Equal(got, std) {
				t.Errorf("AppendString(%q) = %s, encoding/json %s", tt.in, got, std)
			}
		})
	}
}

// TestAppendString_KeepsPrefix checks that AppendString appends to dst
// rather than overwriting it.
func TestAppendString_KeepsPrefix(t *testing.T) {
	dst := make([]byte, 0, 4)
	dst = append(dst, `{"k":`...)
	got := append(AppendString(dst, "<v>"), '}')
	if want := `{"k":"\u003cv\u003e"}`; string(got) != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestAppendString_EveryByteAndRune compares with encoding/json for every
// byte alone and between ASCII, and for every rune of the BMP's edges.
func TestAppendString_EveryByteAndRune(t *testing.T) {
	var inputs []string
	for b := range 256 {
		inputs = append(inputs, string([]byte{byte(b)}), "x"+string([]byte{byte(b)})+"y")
	}
	for r := rune(0); r < 0x3000; r++ {
		inputs = append(inputs, string(r))
	}
	for r := rune(0xd700); r < 0x10000; r++ {
		inputs = append(inputs, "a"+string(r))
	}
	for _, s := range inputs {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	}
}

// pieces are what random strings are built from: every kind of byte and
// rune that AppendString treats differently.
var pieces = []string{
	"a", "Z", "0", " ", "~", "\x7f", "\"", "\\", "/", "<", ">", "&",
	"\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1b", "\x1f",
	"é", "用户", "\U0001F642", "\u2028", "\u2029", "\u2027", "\ufffd", "\ufeff",
	"\xff", "\x80", "\xc3", "\xe7\x94", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc0\xaf",
}

// TestAppendString_Random holds AppendString to encoding/json's bytes for
// random strings of those pieces and of random bytes.
func TestAppendString_Random(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	for range 20000 {
		var sb []byte
		n := rng.IntN(24)
		if rng.IntN(4) == 0 {
			for range n {
				sb = append(sb, byte(rng.IntN(256)))
			}
		} else {
			for range n {
				sb = append(sb, pieces[rng.IntN(len(pieces))]...)
			}
		}
		s := string(sb)
		want, _ := json.Marshal(s)
		prefix := []byte("p:")
		got := AppendString(prefix, s)
		if !bytes.Equal(got[len(prefix):], want) || string(got[:len(prefix)]) != "p:" {
			t.Fatalf("seed %d: AppendString(%q) = %s, encoding/json %s", seed, s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "<>&", "\"\\", "\x00\x1f\x7f", "\b\f\n\r\t",
		"用户", "\xff", "\u2028\u2029", "\xed\xa0\x80", "a\xe7\x94"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("AppendString(%q) = %s, encoding/json %s", s, got, want)
		}
	})
}
