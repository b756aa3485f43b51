package wechatpay

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// The client against a fake WeChat Pay, through the real reservation core:
//
//  1. attempt 1 gets 500 SYSTEM_ERROR (WeChat did not create the refund);
//  2. every later POST gets a verified 403 USER_ACCOUNT_ABNORMAL (a definite, permanent refusal);
//  3. every query gets a verified 404 RESOURCE_NOT_EXISTS.
//
// The client maps the refusals of attempts >= 2 to UNKNOWN (an earlier
// attempt may have been taken), and each query proves WeChat has no such
// refund. The refund must end REJECTED after a bounded number of POSTs, not
// be resent for ever; it is queried until the settle horizon has passed, and
// then an operator can abandon it.
func TestRefusedResubmissionsEndRejected(t *testing.T) {
	f := newFakeWeChat(t, func(r recorded, n int) fakeReply {
		switch {
		case r.Method == http.MethodGet:
			return fakeReply{Status: 404, Body: errJSON("RESOURCE_NOT_EXISTS", "退款单不存在")}
		case n == 1:
			return fakeReply{Status: 500, Body: errJSON("SYSTEM_ERROR", "系统超时")}
		default:
			return fakeReply{Status: 403, Body: errJSON("USER_ACCOUNT_ABNORMAL", "用户帐号注销")}
		}
	})
	c := newTestClient(t, f)

	s := &reservation.State{}
	env := reservation.Env{Now: time.Now(), Policy: reservation.Policy{RefundNoPrefix: "RF"}}
	var pending []reservation.Event
	do := func(cmd reservation.Command) error {
		ev, err := reservation.Decide(s, cmd, env)
		for _, e := range ev {
			reservation.Apply(s, e)
		}
		pending = append(pending, ev...)
		return err
	}
	if err := do(reservation.Register{ReservationID: "res1", UserID: "u1", OutTradeNo: "ORD-res1",
		Amount: 500, Currency: "CNY", PaidAt: env.Now.Add(-time.Hour)}); err != nil {
		t.Fatal(err)
	}
	amount := int64(100)
	if err := do(reservation.RequestRefund{UserID: "u1", IdempotencyKey: "k1", Amount: &amount, Reason: "商品已售完"}); err != nil {
		t.Fatal(err)
	}
	no := s.Refunds[0].No
	if no != testRefundNo {
		t.Fatalf("refund number %q, want %q", no, testRefundNo)
	}
	body := mustBody(t, c)
	if err := do(reservation.StartSubmission{RefundNo: no, Request: body}); err != nil {
		t.Fatal(err)
	}

	// run performs the provider calls the journaled events ask for.
	run := func() {
		for len(pending) > 0 {
			e := pending[0]
			pending = pending[1:]
			switch d := e.Data.(type) {
			case reservation.SubmissionStarted:
				o := c.Submit(context.Background(), no, s.Refund(no).Request, d.Attempt)
				if err := do(reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceResponse, Attempt: d.Attempt, Outcome: o}); err != nil {
					t.Fatal(err)
				}
			case reservation.QueryStarted:
				o := c.Query(context.Background(), no)
				if err := do(reservation.RecordOutcome{RefundNo: no, Source: reservation.SourceQuery, Outcome: o}); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	run()
	for i := 0; i < 40 && s.Refund(no).State != reservation.Rejected; i++ {
		r := s.Refund(no)
		if r.DueAt.IsZero() {
			break
		}
		env.Now = r.DueAt
		if err := do(reservation.FireTimer{RefundNo: no, DueAt: r.DueAt}); err != nil {
			t.Fatal(err)
		}
		run()
	}

	r := s.Refund(no)
	posts := 0
	for _, rec := range f.requests() {
		if rec.Method == http.MethodPost {
			posts++
		}
	}
	// Five attempts get an unknown answer each; five more follow the
	// queries that find nothing; the next query that finds nothing stops it.
	if r.State != reservation.Rejected || r.Attempts != 10 || posts != 10 {
		t.Fatalf("after %d POSTs: state %s, %d attempts, %d fen in flight; want REJECTED after 10", posts, r.State, r.Attempts, s.InFlight())
	}
	// The attempts that timed out may still land: it is queried, never
	// resent, until the settle horizon has passed.
	for i := 0; i < 200 && !s.Refund(no).DueAt.IsZero(); i++ {
		env.Now = s.Refund(no).DueAt
		if err := do(reservation.FireTimer{RefundNo: no, DueAt: env.Now}); err != nil {
			t.Fatal(err)
		}
		run()
	}
	if r := s.Refund(no); r.State != reservation.Rejected || !r.DueAt.IsZero() || r.Attempts != 10 {
		t.Fatalf("after the horizon: %+v", *r)
	}
	// Abandoning takes a fresh "not found", as the engine's Abandon asks it.
	check := &reservation.ProviderCheck{Outcome: c.Query(context.Background(), no), At: env.Now}
	if err := do(reservation.Abandon{RefundNo: no, Reason: "refused", Check: check}); err != nil {
		t.Fatalf("abandon: %v", err)
	}
	posts = 0
	for _, rec := range f.requests() {
		if rec.Method == http.MethodPost {
			posts++
		}
	}
	if posts != 10 {
		t.Fatalf("%d POSTs, want no more than the 10 before REJECTED", posts)
	}
	if s.InFlight() != 0 {
		t.Fatalf("%d fen still held after the refund was abandoned", s.InFlight())
	}
}
