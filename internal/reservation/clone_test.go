package reservation

import (
	"strconv"
	"testing"
)

// TestClone_LookupsWithoutMaps finds every refund of a copy, by number and
// key, at every size around indexFrom: the copy scans where the original
// has lookup maps, and must find its own refunds, not the original's.
func TestClone_LookupsWithoutMaps(t *testing.T) {
	s := &State{}
	run(t, s, Register{ReservationID: "r", UserID: testUser, OutTradeNo: "o", Amount: 1000, Currency: "CNY"}, testEnv(t0, "s"))
	for n := 1; n <= 2*indexFrom+1; n++ {
		run(t, s, RequestRefund{UserID: testUser, IdempotencyKey: "k" + strconv.Itoa(n), Amount: ptr(1)}, testEnv(t0, "u"))
		c := s.Clone()
		if c.byNo != nil || c.byKey != nil {
			t.Fatalf("%d refunds: the copy has lookup maps", n)
		}
		for i, r := range c.Refunds {
			if r == s.Refunds[i] {
				t.Fatalf("%d refunds: refund %d shared with the original", n, i)
			}
			if c.Refund(r.No) != r || c.RefundByKey(r.IdempotencyKey) != r {
				t.Fatalf("%d refunds: refund %d (%s, %s) not found in the copy", n, i, r.No, r.IdempotencyKey)
			}
		}
		if c.Refund("R-r-999") != nil || c.RefundByKey("nope") != nil {
			t.Fatal("found a refund that does not exist")
		}
		assertSameState(t, s, c)
	}
}
