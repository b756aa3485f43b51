package pgrefund_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/refundd/refundd/bench/pgrefund"
)

func TestCodeOf_Table(t *testing.T) {
	tests := []struct {
		err    error
		code   string
		status int
	}{
		{pgrefund.ErrNotFound, "not_found", 404},
		{pgrefund.ErrInsufficient, "insufficient_refundable", 409},
		{pgrefund.ErrCanceled, "reservation_canceled", 409},
		{pgrefund.ErrRefundLimit, "refund_limit_reached", 409},
		{pgrefund.ErrIdempotencyKeyReused, "idempotency_key_reused", 422},
		{fmt.Errorf("wrapped: %w", pgrefund.ErrOutTradeNoTaken), "out_trade_no_taken", 409},
		{errors.New("disk on fire"), "internal", 500},
	}
	for _, tc := range tests {
		code, status := pgrefund.CodeOf(tc.err)
		if code != tc.code || status != tc.status {
			t.Errorf("CodeOf(%v) = %s %d, want %s %d", tc.err, code, status, tc.code, tc.status)
		}
	}
}

// openStore connects to PGREFUND_TEST_DSN, a throwaway database: the
// tables are dropped and recreated. Without it the test is skipped (CI has
// no PostgreSQL; bench/pg-setup.sh makes one).
func openStore(t *testing.T) *pgrefund.Store {
	t.Helper()
	dsn := os.Getenv("PGREFUND_TEST_DSN")
	if dsn == "" {
		t.Skip("PGREFUND_TEST_DSN not set (a throwaway database, e.g. from bench/pg-setup.sh)")
	}
	ctx := context.Background()
	s, err := pgrefund.OpenStore(ctx, dsn, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx, true); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestStore_ClaimsNeverExceedPaid(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if _, _, err := s.Register(ctx, pgrefund.Reservation{ID: "r1", UserID: "u1", OutTradeNo: "OT1", Amount: 10000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	accepted, refused := 0, 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			amount := int64(3000)
			_, _, created, err := s.Claim(ctx, "r1", "u1", fmt.Sprintf("k%d", i), &amount, "", "R")
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil && created:
				accepted++
			case errors.Is(err, pgrefund.ErrInsufficient):
				refused++
			default:
				t.Errorf("claim %d: created %v err %v", i, created, err)
			}
		}()
	}
	wg.Wait()
	if accepted != 3 || refused != 37 {
		t.Fatalf("accepted %d refused %d, want 3 and 37", accepted, refused)
	}
	res, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if res.InFlight != 9000 || len(res.Refunds) != 3 {
		t.Fatalf("in flight %d with %d refunds, want 9000 and 3", res.InFlight, len(res.Refunds))
	}
}

func TestStore_ReplayAndSuccessAreIdempotent(t *testing.T) {
	s := openStore(t)
	ctx := context.Background()
	if _, _, err := s.Register(ctx, pgrefund.Reservation{ID: "r1", UserID: "u1", OutTradeNo: "OT1", Amount: 10000, Currency: "CNY"}); err != nil {
		t.Fatal(err)
	}
	amount := int64(10000)
	ref, _, created, err := s.Claim(ctx, "r1", "u1", "k", &amount, "", "R")
	if err != nil || !created || ref.RefundNo != pgrefund.RefundNo("R", "r1", 1) {
		t.Fatalf("claim: %+v created %v err %v", ref, created, err)
	}
	again, _, created, err := s.Claim(ctx, "r1", "u1", "k", &amount, "", "R")
	if err != nil || created || again.RefundNo != ref.RefundNo {
		t.Fatalf("replay: %+v created %v err %v", again, created, err)
	}
	other := int64(5)
	if _, _, _, err := s.Claim(ctx, "r1", "u1", "k", &other, "", "R"); !errors.Is(err, pgrefund.ErrIdempotencyKeyReused) {
		t.Fatalf("reused key: err %v", err)
	}
	for i, want := range []bool{true, false} {
		changed, err := s.ApplyNotification(ctx, ref.RefundNo, "SUCCESS", "p1", ref.CreatedAt, "{}")
		if err != nil || changed != want {
			t.Fatalf("notification %d: changed %v err %v, want %v", i, changed, err, want)
		}
	}
	if changed, err := s.Record(ctx, ref.RefundNo, pgrefund.Outcome{Status: pgrefund.StateSucceeded}, 1); err != nil || changed {
		t.Fatalf("late provider answer: changed %v err %v", changed, err)
	}
	res, err := s.Get(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	if res.Refunded != 10000 || res.InFlight != 0 || res.Status != "CANCELED" {
		t.Fatalf("refunded %d in flight %d status %s", res.Refunded, res.InFlight, res.Status)
	}
}
