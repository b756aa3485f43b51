package simprovider

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// Recorder records a refund notification on behalf of by: what
// actors.Engine.RecordNotification does.
type Recorder interface {
	RecordNotification(ctx context.Context, by string, n reservation.Notification) ([]reservation.Event, error)
}

// Pusher hands a Provider's outcomes (Options.Notify) to a Recorder as the
// notifications they stand for. The provider is built before the engine
// that records them, so the Recorder is set later (SetRecorder); outcomes
// pushed before that are dropped, and the refund's due time queries them.
type Pusher struct {
	By      string        // the principal recorded as the cause
	Timeout time.Duration // per notification; zero means 10s
	Logger  *slog.Logger  // nil means slog.Default()
	// Merchant names the merchant (a reservation's merchant name) a
	// refund's outcome is for: the memory provider stands in for every
	// account, and the core refuses a notification for another merchant's
	// refund. Nil means reservation.DefaultMerchant, a deployment of one.
	Merchant func(refundNo string) string

	to atomic.Pointer[Recorder]
}

// SetRecorder sets where outcomes go.
func (p *Pusher) SetRecorder(r Recorder) { p.to.Store(&r) }

// Notify records the outcome of refundNo; it fits Options.Notify.
func (p *Pusher) Notify(refundNo string, o reservation.Outcome) {
	r := p.to.Load()
	if r == nil {
		return
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	n := reservation.Notification{RefundNo: refundNo, Outcome: o}
	if p.Merchant != nil {
		n.Merchant = p.Merchant(refundNo)
	}
	if _, err := (*r).RecordNotification(ctx, p.By, n); err != nil {
		log := p.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Warn("provider outcome not applied; the refund's due time will query", "refund_no", refundNo, "err", err)
	}
}
