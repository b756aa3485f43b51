package actors

import (
	"context"
	"log/slog"

	"github.com/refundd/refundd/internal/reservation"
)

// Messages of the lines logJournaled writes; alerts and searches key on
// them.
const (
	msgAttention = "refund needs attention"
	msgOperator  = "operator action"
)

// logJournaled writes the lines operators watch for, derived from events
// just journaled, so that nothing is logged the journal does not hold: at
// WARN each refund that enters an attention list (UNKNOWN, REJECTED,
// ABNORMAL, stuck, or paid after it was closed: the lists of
// GET /v1/refunds), at INFO an operator's action (cmd, by principal by) that
// journaled something. It runs after the reply, with the other effects.
// ctx is the request's (its values only: the request id of an API call).
func (a *reservationActor) logJournaled(ctx context.Context, cmd reservation.Command, by string, events []reservation.Event) {
	if ctx == nil {
		ctx = context.Background()
	}
	var room [4]reservation.Mark
	var log *slog.Logger
	for _, ev := range events {
		for _, mk := range reservation.AppendAttention(room[:0], ev.Data) {
			if mk.Clear {
				continue
			}
			if log == nil {
				log = a.log()
			}
			log.LogAttrs(ctx, slog.LevelWarn, msgAttention, a.attentionAttrs(ev, mk)...)
		}
	}
	action, no := operatorAction(cmd)
	if action == "" {
		return
	}
	if log == nil {
		log = a.log()
	}
	attrs := []slog.Attr{slog.String("action", action), slog.String("refund_no", no)}
	if r := a.state.Refund(no); r != nil {
		attrs = append(attrs, slog.String("state", string(r.State)))
	}
	types := make([]string, len(events))
	for i, ev := range events {
		types[i] = ev.Data.EventType()
	}
	attrs = append(attrs, slog.Any("events", types), slog.String("principal", by))
	log.LogAttrs(ctx, slog.LevelInfo, msgOperator, a.withMerchant(attrs)...)
}

// attentionAttrs describes refund mk.RefundNo entering the list mk.Kind
// through ev.
func (a *reservationActor) attentionAttrs(ev reservation.Event, mk reservation.Mark) []slog.Attr {
	attrs := []slog.Attr{slog.String("refund_no", mk.RefundNo), slog.String("attention", mk.Kind)}
	if r := a.state.Refund(mk.RefundNo); r != nil {
		attrs = append(attrs, slog.String("state", string(r.State)), slog.Int("attempts", r.Attempts))
		if mk.Kind == reservation.AttentionStuck {
			attrs = append(attrs, slog.Int("queries", r.Queries), slog.Time("requested_at", r.CreatedAt))
		}
	}
	if d, ok := ev.Data.(reservation.ProviderResult); ok {
		attrs = append(attrs, slog.String("source", string(d.Source)), slog.String("from", string(d.From)))
		if d.Code != "" {
			attrs = append(attrs, slog.String("code", d.Code))
		}
	}
	attrs = append(attrs, slog.String("event", ev.Data.EventType()), slog.String("principal", ev.By))
	return a.withMerchant(attrs)
}

// withMerchant adds the reservation's merchant (its name) and the WeChat
// Pay merchant id refunds go out under.
func (a *reservationActor) withMerchant(attrs []slog.Attr) []slog.Attr {
	if m := a.state.Merchant; m != "" {
		attrs = append(attrs, slog.String("merchant", m))
	}
	if id := a.e.cfg.Merchant; id != "" {
		attrs = append(attrs, slog.String("mchid", id))
	}
	return attrs
}

// operatorAction names the operator's action cmd is, and its refund; ""
// for a command that is not one.
func operatorAction(cmd reservation.Command) (action, refundNo string) {
	switch c := cmd.(type) {
	case reservation.Abandon:
		return "abandon", c.RefundNo
	case reservation.Resubmit:
		return "resubmit", c.RefundNo
	case reservation.Resolve:
		return "resolve", c.RefundNo
	case reservation.ApplyAbnormal:
		return "apply-abnormal", c.RefundNo
	case reservation.CheckProvider:
		if c.Operator {
			return "reconcile", c.RefundNo
		}
	}
	return "", ""
}
