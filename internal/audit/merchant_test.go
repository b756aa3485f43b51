package audit_test

import (
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal/journaltest"
)

// TestExportAndStats_Merchant: the export and the stats keep one
// merchant's reservations when asked, and the stats split every figure by
// merchant, the old reservations under the default one.
func TestExportAndStats_Merchant(t *testing.T) {
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 3)
	h.Register("r-old", 1000)
	h.Result("r-old", h.Request("r-old", 400), reservation.Succeeded)
	h.RegisterFor("r-sh", "hotel-sh", 2000)
	h.Result("r-sh", h.Request("r-sh", 500), reservation.Succeeded)
	h.Result("r-sh", h.Request("r-sh", 300), reservation.Failed)
	h.RegisterFor("r-sh2", "hotel-sh", 700)
	h.Request("r-sh2", 200)
	h.RegisterFor("r-bj", "hotel-bj", 3000)

	records := map[string]int{}
	err := audit.Export(bg, db, audit.ExportOptions{}, func(r audit.Row) error {
		records[r.Merchant]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		merchant string
		want     audit.MerchantStats
		res      map[string]bool
	}{
		{reservation.DefaultMerchant, audit.MerchantStats{Reservations: 1, Refunds: 1, Paid: 1000, Refunded: 400}, map[string]bool{"r-old": true}},
		{"hotel-sh", audit.MerchantStats{Reservations: 2, Refunds: 3, Paid: 2700, Refunded: 500, InFlight: 200, Released: 300},
			map[string]bool{"r-sh": true, "r-sh2": true}},
		{"hotel-bj", audit.MerchantStats{Reservations: 1, Paid: 3000}, map[string]bool{"r-bj": true}},
		{"hotel-gz", audit.MerchantStats{}, nil},
	}
	all, err := audit.ComputeStats(bg, db, audit.StatsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Reservations != 4 || all.Paid != 6700 || len(all.Merchants) != 3 || all.Merchant != "" {
		t.Fatalf("whole journal: %+v", all)
	}
	for _, tt := range tests {
		t.Run(tt.merchant, func(t *testing.T) {
			if got := all.Merchants[tt.merchant]; (got == nil) != (tt.res == nil) || got != nil && *got != tt.want {
				t.Errorf("whole journal's figures for %s = %+v, want %+v", tt.merchant, got, tt.want)
			}
			n := 0
			err := audit.Export(bg, db, audit.ExportOptions{Merchant: tt.merchant}, func(r audit.Row) error {
				n++
				if r.Merchant != tt.merchant || !tt.res[r.Reservation] {
					t.Errorf("export for %s has row %d of %s (merchant %s)", tt.merchant, r.Global, r.Reservation, r.Merchant)
				}
				return nil
			})
			if err != nil || n != records[tt.merchant] {
				t.Fatalf("export for %s: %d rows, want %d; %v", tt.merchant, n, records[tt.merchant], err)
			}
			st, err := audit.ComputeStats(bg, db, audit.StatsOptions{Merchant: tt.merchant})
			if err != nil {
				t.Fatal(err)
			}
			got := audit.MerchantStats{Reservations: st.Reservations, Canceled: st.Canceled, Refunds: st.Refunds,
				Paid: st.Paid, Refunded: st.Refunded, InFlight: st.InFlight, Released: st.Released}
			if got != tt.want || st.Records != uint64(records[tt.merchant]) || st.Merchant != tt.merchant {
				t.Errorf("stats for %s: %+v (%d records), want %+v (%d records)", tt.merchant, got, st.Records, tt.want, records[tt.merchant])
			}
			if tt.res == nil && len(st.Merchants) != 0 {
				t.Errorf("stats for %s split into %v", tt.merchant, st.Merchants)
			}
		})
	}
}
