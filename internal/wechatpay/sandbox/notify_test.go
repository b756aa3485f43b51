package sandbox

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

func TestNotify_DeliveredVerifiedDecrypted(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, nil)
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	created := decodeRefund(t, f.m.create("O1", "R1", 250, 1000, rc.url()))
	eventually(t, 5*time.Second, "one notification", func() bool { return rc.count() == 1 })
	got := rc.all()[0]
	if got.err != nil {
		t.Fatalf("notification did not verify: %v", got.err)
	}
	n, res := got.n, got.res
	if n.EventType != wechatpay.EventRefundSuccess || n.Summary != "退款成功" || n.ResourceType != "encrypt-resource" ||
		n.Resource.OriginalType != "refund" || n.Resource.AssociatedData != "refund" || len(n.ID) != 36 {
		t.Fatalf("envelope %+v", n)
	}
	if res.MchID != testMchID || res.OutTradeNo != "O1" || res.OutRefundNo != "R1" || res.RefundID != created.RefundID ||
		res.TransactionID != created.TransactionID || res.RefundStatus != "SUCCESS" || res.SuccessTime == "" ||
		res.Amount != (wechatpay.RefundAmount{Total: 1000, Refund: 250, PayerTotal: 1000, PayerRefund: 250}) {
		t.Fatalf("resource %+v", res)
	}
	eventually(t, 2*time.Second, "delivery recorded", func() bool { return len(f.sb.Deliveries("R1")) == 1 })
	d := f.sb.Deliveries("R1")[0]
	if d.Channel != ChannelV3 || !d.Acked || !d.Last || d.HTTPStatus != 204 || d.NotificationID != n.ID || d.Signature != "ok" {
		t.Fatalf("delivery %+v", d)
	}
}

func TestNotify_RetriedWithScaledSchedule(t *testing.T) {
	k := keys(t)
	const factor = 0.001
	rc := newReceiver(t, k, func(n int) int {
		if n <= 3 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	f := newFixture(t, func(c *Config) { c.TimeFactor = factor })
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "acked delivery", func() bool {
		d := f.sb.Deliveries("R1")
		return len(d) > 0 && d[len(d)-1].Last
	})
	ds := f.sb.Deliveries("R1")
	if len(ds) != 4 {
		t.Fatalf("%d attempts, want 4: %+v", len(ds), ds)
	}
	schedule := RetrySchedule()
	for i, d := range ds {
		wantStatus, wantAck := 500, false
		if i == 3 {
			wantStatus, wantAck = 200, true
		}
		if d.Attempt != i+1 || d.HTTPStatus != wantStatus || d.Acked != wantAck || d.Copy != 0 {
			t.Fatalf("attempt %d: %+v", i+1, d)
		}
		if i > 0 {
			gap, want := d.At.Sub(ds[i-1].At), time.Duration(float64(schedule[i-1])*factor)
			if gap < want {
				t.Fatalf("attempt %d came %s after the previous one, want >= %s", i+1, gap, want)
			}
		}
	}
	// Every attempt carried the same notification.
	got := rc.all()
	for _, g := range got {
		if g.err != nil || g.n.ID != got[0].n.ID {
			t.Fatalf("attempts differ or failed: %+v", g)
		}
	}
}

func TestNotify_GivesUpAfterSchedule(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, func(int) int { return http.StatusServiceUnavailable })
	// 24h04m * 1e-5 = 0.87 s for the whole schedule.
	f := newFixture(t, func(c *Config) { c.TimeFactor = 1e-5 })
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, rc.url())
	eventually(t, 10*time.Second, "schedule exhausted", func() bool {
		d := f.sb.Deliveries("R1")
		return len(d) > 0 && d[len(d)-1].Last
	})
	want := len(RetrySchedule()) + 1
	if d := f.sb.Deliveries("R1"); len(d) != want || d[want-1].Acked {
		t.Fatalf("%d attempts, want %d unacknowledged", len(d), want)
	}
	if rc.count() != want {
		t.Fatalf("receiver saw %d requests, want %d", rc.count(), want)
	}
}

func TestNotify_V2(t *testing.T) {
	k := keys(t)
	type v2got struct {
		env  wechatpay.V2Envelope
		info wechatpay.V2RefundInfo
		err  error
	}
	var mu sync.Mutex
	var got []v2got
	v2 := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		env, info, err := wechatpay.ParseRefundNotificationV2(k.APIv2Key, body)
		mu.Lock()
		n := len(got)
		got = append(got, v2got{env, info, err})
		mu.Unlock()
		// First answer FAIL (HTTP 200): it must be retried.
		w.Write(wechatpay.V2Ack(err == nil && n > 0, ""))
	}))
	defer v2.Close()
	rc := newReceiver(t, k, nil)
	f := newFixture(t, func(c *Config) {
		c.NotifyURLV2 = v2.URL
		c.NotifyURL = rc.url() // the merchant-platform default, used when notify_url is absent
		c.TimeFactor = 0.001
	})
	f.order(t, "O1", 1000)
	f.order(t, "O2", 500)
	if err := f.sb.SetFault(Fault{Kind: FaultOutcome, OutTradeNo: "O2", Outcome: "CLOSED"}); err != nil {
		t.Fatal(err)
	}
	ok := decodeRefund(t, f.m.create("O1", "R1", 300, 1000, ""))
	decodeRefund(t, f.m.create("O2", "R2", 500, 500, ""))
	eventually(t, 5*time.Second, "v2 notifications acked", func() bool {
		acked := 0
		for _, no := range []string{"R1", "R2"} {
			for _, d := range f.sb.Deliveries(no) {
				if d.Channel == ChannelV2 && d.Acked {
					acked++
				}
			}
		}
		return acked == 2
	})
	mu.Lock()
	defer mu.Unlock()
	byNo := map[string]v2got{}
	for _, g := range got {
		if g.err != nil {
			t.Fatalf("v2 notification did not parse: %v", g.err)
		}
		byNo[g.info.OutRefundNo] = g
	}
	r1, r2 := byNo["R1"], byNo["R2"]
	if r1.env.MchID != testMchID || r1.env.AppID == "" || r1.info.RefundStatus != wechatpay.V2RefundSuccess ||
		r1.info.RefundID != ok.RefundID || r1.info.TotalFee != 1000 || r1.info.RefundFee != 300 ||
		r1.info.SettlementRefundFee != 300 || r1.info.SuccessTime == "" || r1.info.RefundRecvAccount == "" {
		t.Fatalf("R1 v2 %+v %+v", r1.env, r1.info)
	}
	if _, err := time.ParseInLocation(time.DateTime, r1.info.SuccessTime, time.UTC); err != nil {
		t.Fatalf("success_time %q: %v", r1.info.SuccessTime, err)
	}
	if r2.info.RefundStatus != wechatpay.V2RefundClose || r2.info.SuccessTime != "" {
		t.Fatalf("R2 v2 %+v", r2.info)
	}
	// The refunds without notify_url went to Config.NotifyURL on v3.
	eventually(t, 5*time.Second, "v3 default-url notifications", func() bool { return rc.count() >= 2 })
	if len(got) < 3 {
		t.Fatalf("the FAIL ack was not retried: %d v2 requests", len(got))
	}
}

func TestClose_StopsRetries(t *testing.T) {
	k := keys(t)
	rc := newReceiver(t, k, func(int) int { return http.StatusInternalServerError })
	f := newFixture(t, nil) // TimeFactor 1: the next retry is 15 s away
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, rc.url())
	eventually(t, 5*time.Second, "first attempt", func() bool { return len(f.sb.Deliveries("R1")) == 1 })
	start := time.Now()
	f.sb.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Close took %s", d)
	}
	f.sb.Close() // idempotent
	if n := len(f.sb.Deliveries("R1")); n != 1 {
		t.Fatalf("%d deliveries after Close", n)
	}
}

func TestClose_StopsProcessing(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.ProcessingDelay = time.Hour })
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 10, 1000, "")
	f.sb.Close()
	if rec, _ := f.sb.Refund("R1"); rec.Status != "PROCESSING" {
		t.Fatalf("status %s", rec.Status)
	}
}
