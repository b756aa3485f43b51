package jsontext

import "unicode/utf8"

const hexDigits = "0123456789abcdef"

// AppendString appends s quoted as encoding/json quotes strings (its
// HTML-safe default): '"', '\\' and the short control escapes \b \f \n \r
// \t; other bytes below 0x20 and '<', '>', '&' as \u00xx; each invalid
// UTF-8 byte as \ufffd; U+2028 and U+2029 as \u2028 and \u2029. Everything
// else, 0x7f and valid multi-byte runes included, is copied as it is.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0 // s[start:i] is still to be copied
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// ValidString reports whether quoted, a JSON string with its quotes as
// encoding/json accepts it, decodes to exactly the text it spells: valid
// UTF-8, and every \u escape of a UTF-16 surrogate half paired (a high
// half followed at once by an escaped low half). encoding/json decodes an
// invalid byte and a lone half to U+FFFD instead, so the text kept would
// not be the text sent. Anything that is not a JSON string reports false.
func ValidString(quoted []byte) bool {
	end := len(quoted) - 1 // the closing quote
	if end < 1 || quoted[0] != '"' || quoted[end] != '"' {
		return false
	}
	for i := 1; i < end; {
		c := quoted[i]
		switch {
		case c == '\\':
			if i+1 >= end {
				return false
			}
			if quoted[i+1] != 'u' {
				i += 2
				continue
			}
			r := escapedUnit(quoted[:end], i)
			i += 6
			switch {
			case r < 0 || (r >= 0xDC00 && r <= 0xDFFF):
				return false // malformed, or a low half with no high half before it
			case r >= 0xD800 && r <= 0xDBFF:
				if low := escapedUnit(quoted[:end], i); low < 0xDC00 || low > 0xDFFF {
					return false
				}
				i += 6
			}
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(quoted[i:end])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			i += size
		}
	}
	return true
}

// escapedUnit returns the code unit of the escape \uXXXX at b[i], or -1
// when b has none there.
func escapedUnit(b []byte, i int) int {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return -1
	}
	u := 0
	for _, c := range b[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			u = u<<4 | int(c-'0')
		case c >= 'a' && c <= 'f':
			u = u<<4 | int(c-'a'+10)
		case c >= 'A' && c <= 'F':
			u = u<<4 | int(c-'A'+10)
		default:
			return -1
		}
	}
	return u
}
