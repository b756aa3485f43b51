package eventstore_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal/journaltest"
)

// TestReader_Find: every kind of id finds its reservation (and refund)
// through the indexes written with the append, on both journals; an order
// number, user id, transaction_id and WeChat refund_id are found only
// under the merchants asked about.
func TestReader_Find(t *testing.T) {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	for _, be := range backends {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db := be.open(t)
			s := eventstore.New(db)
			reg := func(id, merchant, user, tx string) {
				t.Helper()
				if _, _, err := s.Load(ctx, id); err != nil {
					t.Fatal(err)
				}
				if err := s.Append(ctx, id, nil, []reservation.Event{{At: at, By: "test", Data: reservation.Registered{
					ReservationID: id, UserID: user, OutTradeNo: "O1", TransactionID: tx, Amount: 100, Currency: "CNY", Merchant: merchant}}}); err != nil {
					t.Fatal(err)
				}
			}
			reg("r1", "hotel-sh", "guest/7", "4200001")
			reg("r2", "hotel-bj", "guest/7", "4200002")
			events := []reservation.Event{
				{At: at, By: "test", Data: reservation.RefundRequested{RefundNo: "T-r1-1", Number: 1, IdempotencyKey: "k", Fingerprint: "f", Amount: 100}},
				{At: at, By: "test", Data: reservation.SubmissionStarted{RefundNo: "T-r1-1", Attempt: 1, Request: []byte(`{}`), DueAt: at.Add(time.Minute)}},
			}
			st := &reservation.State{ID: "r1", Merchant: "hotel-sh", Version: 1}
			if err := s.Append(ctx, "r1", st, events); err != nil {
				t.Fatal(err)
			}
			st = &reservation.State{ID: "r1", Merchant: "hotel-sh", Version: 3, Refunds: []*reservation.Refund{{No: "T-r1-1", State: reservation.Processing}}}
			if err := s.Append(ctx, "r1", st, []reservation.Event{{At: at, By: "provider:test", Data: reservation.ProviderResult{
				RefundNo: "T-r1-1", Source: reservation.SourceResponse, Outcome: reservation.OutcomeProcessing, ProviderID: "50300/9",
				From: reservation.Processing, To: reservation.Processing}}}); err != nil {
				t.Fatal(err)
			}
			r := eventstore.Reader{DB: db}
			both := []string{"hotel-sh", "hotel-bj"}
			ref := func(by, id, no string) reservation.Found {
				return reservation.Found{By: by, ReservationID: id, RefundNo: no}
			}
			tests := []struct {
				value     string
				merchants []string
				limit     int
				want      []reservation.Found
			}{
				{"T-r1-1", both, 10, []reservation.Found{ref("refund_no", "r1", "T-r1-1")}},
				{"O1", both, 10, []reservation.Found{ref("out_trade_no", "r1", ""), ref("out_trade_no", "r2", "")}},
				{"O1", []string{"hotel-bj"}, 10, []reservation.Found{ref("out_trade_no", "r2", "")}},
				{"guest/7", both, 10, []reservation.Found{ref("user_id", "r1", ""), ref("user_id", "r2", "")}},
				{"guest/7", both, 1, []reservation.Found{ref("user_id", "r1", "")}},
				{"guest/7", []string{"hotel-bj"}, 1, []reservation.Found{ref("user_id", "r2", "")}},
				{"4200001", []string{"hotel-bj"}, 10, nil},
				{"50300/9", []string{"hotel-bj"}, 10, nil},
				{"T-r1-1", []string{"hotel-bj"}, 10, []reservation.Found{ref("refund_no", "r1", "T-r1-1")}}, // global: the API's scoped engine hides it
				{"guest", both, 10, nil}, // a prefix of an id is not that id
				{"4200002", both, 10, []reservation.Found{ref("transaction_id", "r2", "")}},
				{"50300/9", both, 10, []reservation.Found{ref("refund_id", "r1", "T-r1-1")}},
				{"nothing", both, 10, nil},
				{"", both, 10, nil}, // no id is empty
			}
			for _, tt := range tests {
				got, err := r.Find(ctx, tt.merchants, tt.value, tt.limit)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("Find(%v, %q, %d) = %v, want %v", tt.merchants, tt.value, tt.limit, got, tt.want)
				}
			}
		})
	}
}

// FuzzReader_Find: a user id is found exactly, whatever bytes it holds
// ('/', '%', the escape of another id, invalid UTF-8): never by a prefix,
// an extension or another id whose escaped form could be confused with it,
// and the merchant segment after it is never taken for part of it.
//
//	go test -run='^$' -fuzz=FuzzReader_Find -fuzztime=30s ./internal/eventstore/
func FuzzReader_Find(f *testing.F) {
	for _, seed := range [][2]string{
		{"guest/7", "guest"}, {"a%2Fb", "a/b"}, {"u/hotel-sh", "u"}, {"x", "x"}, {"a/b/", "a/b"}, {"%", "%25"}, {"\xff", "%FF"},
	} {
		f.Add(seed[0], seed[1])
	}
	db := journaltest.Open(f)
	s := eventstore.New(db)
	r := eventstore.Reader{DB: db}
	ctx := context.Background()
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	users := map[string][]string{} // user id -> the reservations registered with it
	n := 0
	f.Fuzz(func(t *testing.T, user, other string) {
		if user == "" || len(user) > 64 {
			t.Skip("a registration's user id is 1..64 bytes")
		}
		n++
		id := "r" + strconv.Itoa(n)
		if err := s.Append(ctx, id, nil, []reservation.Event{{At: at, By: "test", Data: reservation.Registered{
			ReservationID: id, Merchant: "hotel-sh", UserID: user, OutTradeNo: "O-" + id, Amount: 100, Currency: "CNY"}}}); err != nil {
			t.Fatal(err)
		}
		users[user] = append(users[user], id)
		for _, q := range []string{user, other} {
			found, err := r.Find(ctx, []string{"hotel-sh"}, q, 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range found {
				if f.By == reservation.SearchUserID {
					got = append(got, f.ReservationID)
				}
			}
			want := slices.Clone(users[q])
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("Find(%q) by user id = %v, want %v", q, got, want)
			}
		}
	})
}
