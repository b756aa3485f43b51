package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// NotifyPath is where refundd (and the PostgreSQL baseline) take WeChat Pay
// v3 refund notifications.
const NotifyPath = "/v1/notify/wechatpay/refund"

// notification is one prepared, signed v3 notification.
type notification struct {
	body   []byte
	header http.Header
}

// setupNotify makes the refunds the storm will settle, untimed: register
// and refund, wait until each carries the provider's refund id (the
// target's provider must accept and not finish them), then build and sign
// one SUCCESS notification per refund and lay out --duplicates copies of
// each in shuffled order.
func (b *bench) setupNotify(ctx context.Context) error {
	c := b.cfg
	keys, err := sandbox.LoadKeys(c.SandboxKeys)
	if err != nil {
		return fmt.Errorf("notify-storm: %w", err)
	}
	n := c.Refunds
	if n == 0 {
		if c.Rate > 0 {
			n = int(c.Rate*(c.Warmup+c.Duration).Seconds())/c.Duplicates + 1
		} else {
			n = 20 * c.Clients
		}
	}
	b.log.Info("notify-storm: preparing refunds", "refunds", n, "copies", c.Duplicates)
	type prepared struct {
		id string
		v  refundView
	}
	refunds := make([]prepared, n)
	if err := b.parallel(ctx, n, func(i int) error {
		id := b.newID("N")
		if r := b.register(ctx, id); !r.ok() {
			return fmt.Errorf("register %s: %s", id, errorKey("register", r))
		}
		v, r := b.client.refund(ctx, id, "k1", c.RefundAmount, 0)
		if !r.ok() || r.err != nil {
			return fmt.Errorf("refund %s: %s %v", id, errorKey("refund", r), r.err)
		}
		b.ledger.accepted(id, v.RefundNo, v.Amount)
		deadline := time.Now().Add(30 * time.Second)
		for v.ProviderRefundID == "" || terminal(v.State) {
			if terminal(v.State) {
				return fmt.Errorf("refund %s is already %s: the target's provider must leave refunds PROCESSING (refundd --provider sandbox --sandbox-delay 1h)", v.RefundNo, v.State)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("refund %s has no provider refund id after 30s", v.RefundNo)
			}
			time.Sleep(20 * time.Millisecond)
			if v, r = b.client.getRefund(ctx, "", id, v.RefundNo, 0); !r.ok() {
				return fmt.Errorf("read refund %s: %s", id, errorKey("get", r))
			}
		}
		refunds[i] = prepared{id: id, v: v}
		return nil
	}); err != nil {
		return fmt.Errorf("notify-storm setup: %w", err)
	}
	b.log.Info("notify-storm: signing notifications", "refunds", n)
	signed := make([]notification, n)
	now := time.Now()
	var mu sync.Mutex
	var firstErr error
	if err := b.parallelN(ctx, runtime.NumCPU(), n, func(i int) error {
		p := refunds[i]
		nt, err := buildNotification(keys, "OT"+p.id, p.v, c.Amount, now)
		if err != nil {
			mu.Lock()
			firstErr = err
			mu.Unlock()
			return err
		}
		signed[i] = nt
		return nil
	}); err != nil {
		return fmt.Errorf("notify-storm: %w", err)
	}
	if firstErr != nil {
		return firstErr
	}
	b.notes = make([]notification, 0, n*c.Duplicates)
	for range c.Duplicates {
		b.notes = append(b.notes, signed...)
	}
	rand.Shuffle(len(b.notes), func(i, j int) { b.notes[i], b.notes[j] = b.notes[j], b.notes[i] })
	if st, err := b.notifyStats(ctx); err == nil {
		b.notify = &st
	}
	return nil
}

// buildNotification encrypts and signs a REFUND.SUCCESS notification for
// v, as WeChat Pay would send it, with the sandbox platform key.
func buildNotification(keys sandbox.Keys, outTradeNo string, v refundView, total int64, now time.Time) (notification, error) {
	res := wechatpay.RefundResource{
		MchID: keys.MchID, OutTradeNo: outTradeNo, RefundID: v.ProviderRefundID, OutRefundNo: v.RefundNo,
		RefundStatus: wechatpay.RefundSuccess, SuccessTime: now.Format(time.RFC3339), UserReceivedAccount: "bench",
		Amount: wechatpay.RefundAmount{Total: total, Refund: v.Amount, PayerTotal: total, PayerRefund: v.Amount},
	}
	n := wechatpay.Notification{ID: "EV-" + v.RefundNo, CreateTime: now.Format(time.RFC3339)}
	n.Resource.AssociatedData = "refund"
	body, err := wechatpay.BuildRefundNotification(keys.APIv3Key, n, res)
	if err != nil {
		return notification{}, err
	}
	h, err := wechatpay.SignHeaders(keys.PlatformKey, keys.PublicKeyID, now.Unix(), wechatpay.NewNonce(), body)
	if err != nil {
		return notification{}, err
	}
	header := http.Header{"Content-Type": {"application/json"}}
	h.Set(header)
	return notification{body: body, header: header}, nil
}

// notifyOp posts the next prepared notification. A 2xx is an ack.
func (b *bench) notifyOp(ctx context.Context, sched time.Time) bool {
	i := b.nextNote.Add(1) - 1
	if i >= int64(len(b.notes)) {
		return false
	}
	nt := b.notes[i]
	r := b.client.do(ctx, "notify", http.MethodPost, NotifyPath, nt.header, nt.body, nil)
	b.rec.op("notify", sched, time.Now(), r.ok(), "")
	return true
}

// notifyStats are refundd's notification counters (GET /v1/notify/stats).
type notifyStats struct {
	Notifications map[string]int64 `json:"notifications"`
}

func (b *bench) notifyStats(ctx context.Context) (notifyStats, error) {
	var st notifyStats
	r := b.client.do(ctx, "", http.MethodGet, "/v1/notify/stats", nil, nil, &st)
	if !r.ok() || r.err != nil {
		return st, fmt.Errorf("notify stats: %s", errorKey("stats", r))
	}
	return st, nil
}

func (s notifyStats) minus(before notifyStats) map[string]int64 {
	out := map[string]int64{}
	for k, v := range s.Notifications {
		if d := v - before.Notifications[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

// parallel runs f(0..n-1) on --clients workers (at most 64), stopping at
// the first error.
func (b *bench) parallel(ctx context.Context, n int, f func(i int) error) error {
	return b.parallelN(ctx, min(max(b.cfg.Clients, 1), 64), n, f)
}

func (b *bench) parallelN(ctx context.Context, workers, n int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { first = err })
					next.Store(int64(n))
					return
				}
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
