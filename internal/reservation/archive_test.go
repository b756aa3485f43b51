package reservation

import (
	"strings"
	"testing"
	"time"
)

func TestArchiveBlocker(t *testing.T) {
	paid := time.Date(2025, 1, 10, 8, 0, 0, 0, time.UTC)
	day := 24 * time.Hour
	later := paid.Add(500 * day)
	state := func(refunds ...RefundState) *State {
		s := &State{ID: "r1", PaidAt: paid, Amount: 100}
		for i, st := range refunds {
			s.Refunds = append(s.Refunds, &Refund{No: "R-r1-" + string(rune('1'+i)), State: st})
		}
		return s
	}
	for _, tc := range []struct {
		name              string
		s                 *State
		now               time.Time
		window, retention time.Duration
		want              string // "" eligible, else a part of the reason
	}{
		{"finished, old", state(Succeeded, Failed), later, 0, 0, ""},
		{"no refunds, old", state(), later, 0, 0, ""},
		{"refund in flight", state(Succeeded, Processing), later, 0, 0, "is PROCESSING"},
		{"refund unknown", state(Unknown), later, 0, 0, "is UNKNOWN"},
		{"refund rejected", state(Rejected), later, 0, 0, "is REJECTED"},
		{"refund abnormal", state(Abnormal), later, 0, 0, "is ABNORMAL"},
		{"window open (default 365 days)", state(Succeeded), paid.Add(300 * day), 0, 10 * day, "refund window open"},
		{"window open (longer policy)", state(Succeeded), later, 600 * day, 0, "refund window open"},
		{"too recent (default 400 days)", state(Succeeded), paid.Add(380 * day), 0, 0, "retained until"},
		{"too recent (longer retention)", state(Succeeded), later, 0, 800 * day, "retained until"},
		{"exactly at the retention", state(Succeeded), paid.Add(400 * day), 0, 0, "retained until"},
		{"not registered", &State{}, later, 0, 0, "not registered"},
		{"payment time unknown", &State{ID: "r2"}, later, 0, 0, "payment time unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.s.ArchiveBlocker(tc.now, tc.window, tc.retention)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Fatalf("ArchiveBlocker = %q, want %q", got, tc.want)
			}
		})
	}
}
