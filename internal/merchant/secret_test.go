package merchant

import (
	"errors"
	"testing"
)

func TestParseSecret(t *testing.T) {
	cases := []struct {
		ref  string
		want Secret
		err  error
	}{
		{"env:APIV3_KEY", Secret{Env: "APIV3_KEY"}, nil},
		{"env:_K1", Secret{Env: "_K1"}, nil},
		{"file:/run/secrets/v3", Secret{File: "/run/secrets/v3"}, nil},
		{"file:relative/v3", Secret{File: "relative/v3"}, nil},
		{"file:C:x", Secret{File: "C:x"}, nil},
		{"env:", Secret{}, ErrInvalid},
		{"env:1KEY", Secret{}, ErrInvalid},
		{"env:key", Secret{}, ErrInvalid},
		{"env:A-B", Secret{}, ErrInvalid},
		{"file:", Secret{}, ErrInvalid},
		{"file:-----BEGIN PRIVATE KEY-----", Secret{}, ErrInlineSecret},
		{"file:a\nb", Secret{}, ErrInlineSecret},
		{"0123456789abcdefghijABCDEFGHIJ01", Secret{}, ErrInlineSecret},
		{"ENV:KEY", Secret{}, ErrInlineSecret},
		{"/run/secrets/v3", Secret{}, ErrInlineSecret},
		{"", Secret{}, ErrInlineSecret},
	}
	for _, tc := range cases {
		got, err := ParseSecret(tc.ref)
		if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("ParseSecret(%q) = %+v, %v; want %+v, %v", tc.ref, got, err, tc.want, tc.err)
		}
		if err == nil && got.String() != tc.ref {
			t.Errorf("%q: String() = %q", tc.ref, got.String())
		}
	}
	if s := (Secret{}); !s.IsZero() || s.String() != "" {
		t.Errorf("zero Secret: %v %q", s.IsZero(), s.String())
	}
}
