package merchant

import (
	"bytes"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// FuzzParse: the merchants file is outside input. Parse must not panic;
// its errors are Errors whose every problem wraps a sentinel; what it
// accepts encodes to a file that parses back to the same registry, and
// every merchant is found by each of its keys.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../examples/merchants.toml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example), base, credFile, "", strings.Replace(base, "serial", "seriall", 2),
		"[[accounts]\n", "version = 1\n", "[[merchants]]\nname = 1\n",
		"[[merchants]]\nname = \"m\"\nkind = \"direct\"\naccount = \"a\"\nrefund_prefix = \"R\"\n[merchants.policy]\nrefund_window = \"1h\"\n",
		"[[merchants]]\nname = \"m\"\nkind = \"direct\"\naccount = \"a\"\nrefund_prefix = \"R\"\n[merchants.policy]\napprove_all = false\n" +
			"approve_above = 0\napprove_above_percent = 100\napprove_non_service = true\napproval_timeout = \"30m\"\n",
		"accounts = [{name = \"a\", kind = \"direct\", apiv3_key = \"k\"}]\n",
		"[[accounts]]\nprivate_key = \"file:-----BEGIN\"\n[accounts.policy]\n",
	} {
		f.Add([]byte(seed))
	}
	sentinels := []error{ErrSyntax, ErrUnknownKey, ErrInlineSecret, ErrMissing, ErrInvalid, ErrConflict}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data, "")
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("%T %v: not Errors", err, err)
			}
			for _, e := range es {
				known := false
				for _, s := range sentinels {
					known = known || errors.Is(e, s)
				}
				if !known {
					t.Fatalf("%q wraps no sentinel", e)
				}
			}
			return
		}
		for _, m := range r.Merchants() {
			if got, ok := r.ByName(m.Name); !ok || got != m {
				t.Fatalf("ByName(%q) = %v", m.Name, got)
			}
			if got, ok := r.ByRefundNo(reservation.RefundNo(m.RefundNoPrefix, "r", 1)); !ok || got != m {
				t.Fatalf("ByRefundNo of %q = %v", m.Name, got)
			}
			if got, ok := r.ByMchID(m.Account.MchID, m.SubMchID); !ok || got != m {
				t.Fatalf("ByMchID of %q = %v", m.Name, got)
			}
		}
		out, err := r.Encode()
		if err != nil {
			t.Fatalf("Encode: %v", err)
		}
		r2, err := Parse(out, "")
		if err != nil {
			t.Fatalf("the encoded file does not parse: %v\n%s", err, out)
		}
		out2, err := r2.Encode()
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("not stable (%v):\n%s\n---\n%s", err, out, out2)
		}
	})
}
