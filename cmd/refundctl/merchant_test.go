package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal/journaltest"
)

// merchantsJournal writes a closed journal with reservations of three
// merchants: r-old from before merchants (the default one), r-sh and r-sh2
// of hotel-sh, r-bj of hotel-bj.
func merchantsJournal(t *testing.T) string {
	t.Helper()
	db := journaltest.Open(t)
	h := feedtest.New(t, db, 5)
	h.Register("r-old", 1000)
	h.Result("r-old", h.Request("r-old", 400), reservation.Succeeded)
	h.RegisterFor("r-sh", "hotel-sh", 2000)
	h.Result("r-sh", h.Request("r-sh", 500), reservation.Succeeded)
	h.RegisterFor("r-sh2", "hotel-sh", 700)
	h.Request("r-sh2", 200)
	h.RegisterFor("r-bj", "hotel-bj", 3000)
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMerchantFlag_ExportAndStats(t *testing.T) {
	path := merchantsJournal(t)
	csvRows := func(args ...string) [][]string {
		t.Helper()
		r := ctl(t, append([]string{"journal", "export", "--file", path, "--format", "csv"}, args...)...)
		rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
		if r.code != exitOK || err != nil || len(rows) == 0 || rows[0][2] != "merchant" {
			t.Fatalf("export %v: %v %s", args, err, r)
		}
		return rows[1:]
	}
	byMerchant := map[string]int{}
	for _, row := range csvRows() {
		byMerchant[row[2]]++
	}
	if len(byMerchant) != 3 || byMerchant[reservation.DefaultMerchant] == 0 {
		t.Fatalf("export of every merchant: rows by merchant %v", byMerchant)
	}
	type stats struct {
		Merchant     string `json:"merchant"`
		Records      int    `json:"records"`
		Reservations int    `json:"reservations"`
		Paid         int64  `json:"paid"`
		InFlight     int64  `json:"in_flight"`
		Merchants    map[string]struct {
			Reservations int   `json:"reservations"`
			Paid         int64 `json:"paid"`
		} `json:"merchants"`
	}
	all := decode[stats](t, ctl(t, "journal", "stats", "--file", path, "--json"))
	if all.Reservations != 4 || all.Merchants["hotel-sh"].Reservations != 2 || all.Merchants["hotel-sh"].Paid != 2700 ||
		all.Merchants[reservation.DefaultMerchant].Paid != 1000 || all.Merchants["hotel-bj"].Paid != 3000 {
		t.Fatalf("stats by merchant: %+v", all)
	}
	tests := []struct {
		merchant     string
		reservations int
		paid         int64
		inFlight     int64
	}{
		{reservation.DefaultMerchant, 1, 1000, 0},
		{"hotel-sh", 2, 2700, 200},
		{"hotel-bj", 1, 3000, 0},
		{"hotel-gz", 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.merchant, func(t *testing.T) {
			rows := csvRows("--merchant", tt.merchant)
			for _, row := range rows {
				if row[2] != tt.merchant {
					t.Errorf("export --merchant %s has a row of %s: %v", tt.merchant, row[2], row)
				}
			}
			if len(rows) != byMerchant[tt.merchant] {
				t.Errorf("export --merchant %s: %d rows, want %d", tt.merchant, len(rows), byMerchant[tt.merchant])
			}
			st := decode[stats](t, ctl(t, "journal", "stats", "--file", path, "--json", "--merchant", tt.merchant))
			if st.Merchant != tt.merchant || st.Reservations != tt.reservations || st.Paid != tt.paid || st.InFlight != tt.inFlight ||
				st.Records != byMerchant[tt.merchant] {
				t.Errorf("stats --merchant %s: %+v", tt.merchant, st)
			}
		})
	}
	r := ctl(t, "journal", "stats", "--file", path, "--merchant", "hotel-sh")
	if r.code != exitOK || !strings.Contains(r.stdout, "merchant      hotel-sh") || !strings.Contains(r.stdout, "hotel-sh") ||
		strings.Contains(r.stdout, "hotel-bj") {
		t.Fatalf("stats --merchant hotel-sh, text: %s", r)
	}
	r = ctl(t, "journal", "stats", "--file", path)
	for _, m := range []string{reservation.DefaultMerchant, "hotel-sh", "hotel-bj"} {
		if !strings.Contains(r.stdout, "  "+m+" ") {
			t.Errorf("stats text lists no line for %s: %s", m, r)
		}
	}
}

// TestMerchantFlag_ShowAndState: with --merchant, another merchant's
// reservation reads as one the journal does not hold.
func TestMerchantFlag_ShowAndState(t *testing.T) {
	path := merchantsJournal(t)
	tests := []struct {
		id, merchant string
		want         int
	}{
		{"r-sh", "hotel-sh", exitOK},
		{"r-old", reservation.DefaultMerchant, exitOK},
		{"r-sh", "hotel-bj", exitProblems},
		{"r-old", "hotel-sh", exitProblems},
		{"r-nope", "hotel-sh", exitProblems},
	}
	for _, tt := range tests {
		for _, cmd := range [][]string{{"journal", "show", tt.id}, {"journal", "state", tt.id, "--seq", "1"}} {
			r := ctl(t, append(cmd, "--file", path, "--merchant", tt.merchant)...)
			if r.code != tt.want || (tt.want == exitProblems && !strings.Contains(r.stderr, "is not in")) {
				t.Errorf("%v --merchant %s: %s, want exit %d", cmd, tt.merchant, r, tt.want)
			}
		}
	}
}

// TestMerchantFlag_Reconcile: a bill is compared with the named merchant's
// refunds only.
func TestMerchantFlag_Reconcile(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "T"})
	w.Register("a", 10000)
	w.Settle("a", w.Refund("a", 3000))
	date, raw := w.Bill()
	billFile := filepath.Join(t.TempDir(), "refund-bill.csv")
	if err := os.WriteFile(billFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, w)
	for _, tt := range []struct {
		merchant        string
		journal, agreed int
	}{{"", 1, 1}, {reservation.DefaultMerchant, 1, 1}, {"hotel-sh", 0, 0}} {
		args := []string{"reconcile", "--server", srv.URL, "--bill", billFile, "--date", date, "--json"}
		if tt.merchant != "" {
			args = append(args, "--merchant", tt.merchant)
		}
		r := ctl(t, args...)
		v := decode[struct {
			Bill struct {
				JournalRefunds int `json:"journal_refunds"`
				Matched        int `json:"matched"`
			} `json:"bill"`
		}](t, r)
		if v.Bill.JournalRefunds != tt.journal || v.Bill.Matched != tt.agreed {
			t.Errorf("--merchant %q: journal refunds %d, matched %d; want %d, %d\n%s", tt.merchant,
				v.Bill.JournalRefunds, v.Bill.Matched, tt.journal, tt.agreed, r)
		}
	}
}
