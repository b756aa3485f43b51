package sandbox

import (
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestCreate_MinRefundSpacing(t *testing.T) {
	var offset atomic.Int64 // added to the real time; within MaxSkew
	at := func(d time.Duration) { offset.Store(int64(d)) }
	f := newFixture(t, func(c *Config) {
		c.MinRefundSpacing = time.Minute
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	f.order(t, "O1", 1000)
	f.order(t, "O2", 1000)
	steps := []struct {
		at     time.Duration
		order  string
		no     string
		refund int64
		status int
		code   string
	}{
		{0, "O1", "R1", 100, 200, ""},
		{30 * time.Second, "O1", "R2", 100, 429, "FREQUENCY_LIMITED"}, // a new number too soon
		{30 * time.Second, "O1", "R1", 100, 200, ""},                  // resubmission: not affected
		{30 * time.Second, "O2", "S1", 100, 200, ""},                  // another order has its own clock
		{59 * time.Second, "O1", "R2", 100, 429, "FREQUENCY_LIMITED"}, // measured from R1, the refusal does not count
		{60 * time.Second, "O1", "R2", 100, 200, ""},
		{61 * time.Second, "O1", "R3", 100, 429, "FREQUENCY_LIMITED"}, // now measured from R2
		{61 * time.Second, "O1", "R9", 5000, 400, "INVALID_REQUEST"},  // business errors come first
		{121 * time.Second, "O1", "R3", 100, 200, ""},
	}
	for i, s := range steps {
		at(s.at)
		r := f.m.create(s.order, s.no, s.refund, 1000, "")
		if r.status != s.status || r.code() != s.code {
			t.Fatalf("step %d (%s at +%s): %d %s, want %d %s", i, s.no, s.at, r.status, r.body, s.status, s.code)
		}
		if s.code == "FREQUENCY_LIMITED" && !strings.Contains(string(r.body), "1分钟") {
			t.Fatalf("message does not explain the rule: %s", r.body)
		}
	}
	if f.sb.Refunded("O1") != 300 || f.sb.Refunded("O2") != 100 {
		t.Fatalf("refunded O1 %d O2 %d", f.sb.Refunded("O1"), f.sb.Refunded("O2"))
	}
	// A refused submission is still recorded as submitted.
	if got := f.sb.Submissions("R2"); len(got) != 1 {
		t.Fatalf("submissions of R2: %v", got)
	}
}

// TestCreate_MinRefundSpacingAfterReload: the spacing clock is rebuilt
// from the saved acceptance times.
func TestCreate_MinRefundSpacingAfterReload(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	base := func(c *Config) { c.StateFile = state; c.MinRefundSpacing = time.Hour }
	f := newFixture(t, base)
	f.order(t, "O1", 1000)
	decodeRefund(t, f.m.create("O1", "R1", 100, 1000, ""))
	g := reopen(t, f, false, base, nil)
	if r := g.m.create("O1", "R2", 100, 1000, ""); r.status != http.StatusTooManyRequests || r.code() != "FREQUENCY_LIMITED" {
		t.Fatalf("second refund right after reload: %d %s", r.status, r.body)
	}
}

// TestFrequencyLimited_OneStatus: the spacing refusal and the
// frequency_limited fault are the same answer (PARTNER.md §4-5: WeChat Pay
// documents rate limiting as 429), and the client maps both, and the
// over-refund and balance answers, to the outcome the engine needs.
func TestFrequencyLimited_OneStatus(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.MinRefundSpacing = time.Hour })
	f.order(t, "O1", 1000)
	f.order(t, "O2", 1000)
	decodeRefund(t, f.m.create("O1", "R1", 100, 1000, ""))
	spacing := f.m.create("O1", "R2", 100, 1000, "")
	if err := f.sb.SetFault(Fault{Kind: FaultFrequencyLimited, OutRefundNo: "S1", Count: 1}); err != nil {
		t.Fatal(err)
	}
	fault := f.m.create("O2", "S1", 100, 1000, "")
	if spacing.status != fault.status || spacing.code() != fault.code() || fault.status != http.StatusTooManyRequests {
		t.Fatalf("spacing %d %s, fault %d %s; want both 429 FREQUENCY_LIMITED", spacing.status, spacing.code(), fault.status, fault.code())
	}
	over := f.m.create("O2", "S2", 1001, 1000, "")
	if over.status != http.StatusBadRequest || over.code() != "INVALID_REQUEST" {
		t.Fatalf("over-refund: %d %s, want 400 INVALID_REQUEST", over.status, over.body)
	}
	if err := f.sb.SetFault(Fault{Kind: FaultNotEnough, OutRefundNo: "S3", Count: 1}); err != nil {
		t.Fatal(err)
	}
	balance := f.m.create("O2", "S3", 100, 1000, "")
	if balance.status != http.StatusForbidden || balance.code() != "NOT_ENOUGH" {
		t.Fatalf("balance fault: %d %s, want 403 NOT_ENOUGH", balance.status, balance.body)
	}
	if _, ok := f.sb.Refund("S3"); ok {
		t.Fatal("the balance fault applied the refund")
	}
}
