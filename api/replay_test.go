package api_test

import (
	"context"
	"net/http"
	"testing"
)

// TestNotify_ReplayedNotificationCostsAtMostOneEventAndQuery: an APIv2
// notification has no signature, timestamp or nonce, and a verified v3 one
// can be re-sent within its signature's time window, so anyone who captured
// one can post it again and again. However often one notification arrives,
// it costs at most one journal event and one provider query for its refund.
func TestNotify_ReplayedNotificationCostsAtMostOneEventAndQuery(t *testing.T) {
	const replays = 200
	cases := []struct {
		name string
		// setup posts what comes before the replays; send posts the
		// notification being replayed (the same bytes every time).
		setup func(e *ntEnv, no string)
		send  func(e *ntEnv, no string) func() (int, string)
		// ok is the answer every replay gets; 0 takes any (whether the
		// parser accepts an odd status is not what this test is about).
		ok int
	}{
		{"v2 hint", nil, func(e *ntEnv, no string) func() (int, string) {
			body := e.v2Body(no, "ORD-r1", ntMchID, 4000, 10000)
			return func() (int, string) { return e.sendV2(body) }
		}, http.StatusOK},
		{"v3 with a status refundd cannot read", nil, func(e *ntEnv, no string) func() (int, string) {
			body, h := e.v3Request(ntNotice{no: no, outTradeNo: "ORD-r1", status: "SOMETHING_NEW", event: "REFUND.SOMETHING_NEW", refund: 4000, total: 10000})
			return func() (int, string) { return e.sendV3(body, h) }
		}, 0},
		{"v3 PROCESSING", nil, func(e *ntEnv, no string) func() (int, string) {
			body, h := e.v3Request(ntNotice{no: no, outTradeNo: "ORD-r1", status: "PROCESSING", event: "REFUND.PROCESSING", refund: 4000, total: 10000})
			return func() (int, string) { return e.sendV3(body, h) }
		}, 0},
		{"v3 SUCCESS", nil, func(e *ntEnv, no string) func() (int, string) {
			body, h := e.v3Request(ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000})
			return func() (int, string) { return e.sendV3(body, h) }
		}, http.StatusNoContent},
		{"v3 CLOSED contradicting SUCCESS", func(e *ntEnv, no string) {
			if code, body := e.postV3(ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000}); code != http.StatusNoContent {
				t.Fatalf("success: %d %s", code, body)
			}
		}, func(e *ntEnv, no string) func() (int, string) {
			body, h := e.v3Request(ntNotice{no: no, outTradeNo: "ORD-r1", status: "CLOSED", refund: 4000, total: 10000})
			return func() (int, string) { return e.sendV3(body, h) }
		}, http.StatusNoContent},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newNtEnv(t)
			no := e.refund("r1")
			if tc.setup != nil {
				tc.setup(e, no)
			}
			st, err := e.engine.Get(context.Background(), "r1")
			if err != nil {
				t.Fatal(err)
			}
			events, queries := st.Version, e.queries.Load()
			send := tc.send(e, no)
			for i := range replays {
				if code, body := send(); tc.ok != 0 && code != tc.ok {
					t.Fatalf("replay %d: %d %s, want %d", i, code, body, tc.ok)
				}
			}
			if st, err = e.engine.Get(context.Background(), "r1"); err != nil {
				t.Fatal(err)
			}
			// Closing waits for the provider calls the replays started.
			if err := e.engine.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if grew := st.Version - events; grew > 1 {
				t.Errorf("%d replays journaled %d events for the reservation, want at most 1", replays, grew)
			}
			if grew := e.queries.Load() - queries; grew > 1 {
				t.Errorf("%d replays made %d provider queries, want at most 1", replays, grew)
			}
			if r := st.Refund(no); r.Conflicts > 1 {
				t.Errorf("%d conflicts recorded, want at most 1", r.Conflicts)
			}
		})
	}
}

// The operator's reconcile is an explicit, authenticated request: the hint
// window of notifications does not hold it back.
func TestReconcile_IsNotHeldBackByTheHintWindow(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	for i := 1; i <= 2; i++ {
		resp, err := http.Post(e.srv.URL+"/v1/reservations/r1/refunds/"+no+"/reconcile", "application/json", nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("reconcile %d: %d", i, resp.StatusCode)
		}
		if q := e.state("r1", no).Queries; q != i {
			t.Fatalf("after %d reconciles the refund has %d queries", i, q)
		}
	}
	if code, _ := e.postV2(no, "ORD-r1", ntMchID, 4000, 10000); code != http.StatusOK {
		t.Fatal("hint refused")
	}
	if q := e.state("r1", no).Queries; q != 2 {
		t.Fatalf("a hint just after a reconcile started a query: %d queries", q)
	}
}
