package jsontext

import "testing"

// BenchmarkAppendString quotes the kind of strings the hot paths write:
// plain identifiers, a reason with a multi-byte rune, and one that needs
// escapes.
func BenchmarkAppendString(b *testing.B) {
	for _, bc := range []struct{ name, s string }{
		{"ascii", "R-resv-000123-1"},
		{"text", "change of plans, 改期 next week"},
		{"escapes", "<a href=\"x\">\n&amp;</a>"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 128)
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.s)))
			for b.Loop() {
				buf = AppendString(buf[:0], bc.s)
			}
		})
	}
}
