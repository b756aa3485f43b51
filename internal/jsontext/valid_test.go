package jsontext

import (
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

func TestValidString_Table(t *testing.T) {
	for _, tt := range []struct {
		name, quoted string
		want         bool
	}{
		{"empty", `""`, true},
		{"plain", `"late refund"`, true},
		{"short escapes", `"\"\\\/\b\f\n\r\t"`, true},
		{"BMP escape", `"\u00e9\u9000"`, true},
		{"surrogate pair", `"\ud83d\ude00"`, true},
		{"surrogate pair upper case", `"\uD83D\uDE00"`, true},
		{"extremes of the pairs", `"\ud800\udc00\udbff\udfff"`, true},
		{"U+FFFD escaped", `"\ufffd"`, true},
		{"U+FFFD as it is", "\"\ufffd\"", true},
		{"multi-byte runes", "\"用户 \U0001F642\"", true},
		{"escaped backslash before u", `"\\ud800"`, true},
		{"lone high half", `"\ud800"`, false},
		{"lone low half", `"\udc00"`, false},
		{"high half then a letter", `"\ud800\u0041"`, false},
		{"high half then text", `"\ud800x"`, false},
		{"two high halves", `"\ud800\ud800\udc00"`, false},
		{"halves reversed", `"\udc00\ud800"`, false},
		{"high half then escaped backslash", `"\ud800\\udc00"`, false},
		{"high half then a short escape", `"\ud800\n"`, false},
		{"high half at the end after text", `"late \uDBFF"`, false},
		{"low half after a pair", `"\ud83d\ude00\ude00"`, false},
		{"invalid byte", "\"\xff\"", false},
		{"truncated rune", "\"a\xe7\x94\"", false},
		{"encoded surrogate", "\"\xed\xa0\x80\"", false},
		{"overlong", "\"\xc0\xaf\"", false},
		{"above U+10FFFF", "\"\xf4\x90\x80\x80\"", false},
		{"not quoted", `abc`, false},
		{"one quote", `"`, false},
		{"unterminated escape", `"\"`, false},
		{"short u escape", `"\u12"`, false},
		{"bad hex", `"\u12g4"`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := ValidString([]byte(tt.quoted)); got != tt.want {
				t.Errorf("ValidString(%s) = %v, want %v", tt.quoted, got, tt.want)
			}
		})
	}
}

// units decodes the JSON string quoted, which encoding/json accepts, to
// UTF-16 code units as they are written, escapes and raw UTF-8 alike
// (valid tells whether the raw bytes were valid UTF-8). It is a second,
// unit-by-unit reading to hold ValidString's look-ahead to.
func units(quoted []byte) (u []uint16, valid bool) {
	s := quoted[1 : len(quoted)-1]
	valid = true
	for i := 0; i < len(s); {
		if s[i] == '\\' {
			if s[i+1] == 'u' {
				n, _ := strconv.ParseUint(string(s[i+2:i+6]), 16, 16)
				u = append(u, uint16(n))
				i += 6
				continue
			}
			c := map[byte]uint16{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}[s[i+1]]
			u = append(u, c)
			i += 2
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			valid = false
		}
		u = utf16.AppendRune(u, r)
		i += size
	}
	return u, valid
}

// wellFormed reports whether u pairs every surrogate half.
func wellFormed(u []uint16) bool {
	for i := 0; i < len(u); i++ {
		switch {
		case utf16.IsSurrogate(rune(u[i])) && u[i] >= 0xdc00:
			return false
		case utf16.IsSurrogate(rune(u[i])):
			if i+1 == len(u) || u[i+1] < 0xdc00 || u[i+1] > 0xdfff {
				return false
			}
			i++
		}
	}
	return true
}

// FuzzValidString holds ValidString to a unit-by-unit reading of what
// encoding/json accepts as a string, and checks that what it calls valid
// encoding/json decodes to exactly those units.
func FuzzValidString(f *testing.F) {
	for _, s := range []string{`""`, `"a"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
		`"\ud800\\udc00"`, `"\ufffd"`, "\"\xff\"", "\"\xed\xa0\x80\"", `"\"\\\/\b\f\n\r\t"`, `"\u12"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, quoted []byte) {
		got := ValidString(quoted)
		var text string
		// Only a string token itself, without the white space
		// encoding/json allows around it.
		if json.Unmarshal(quoted, &text) != nil || len(quoted) < 2 || quoted[0] != '"' || quoted[len(quoted)-1] != '"' {
			if got && json.Valid(quoted) {
				t.Fatalf("ValidString(%q) = true for a JSON value that is not a string", quoted)
			}
			return
		}
		u, rawValid := units(quoted)
		if want := rawValid && wellFormed(u); got != want {
			t.Fatalf("ValidString(%q) = %v, want %v (units %x)", quoted, got, want, u)
		}
		if got && text != string(utf16.Decode(u)) {
			t.Fatalf("ValidString(%q) = true, but encoding/json decodes %q, not %q", quoted, text, string(utf16.Decode(u)))
		}
	})
}
