package api

import (
	"context"

	"github.com/refundd/refundd/internal/reservation"
)

// AfterRegister returns e calling after with each registration e has
// journaled (a replayed one too, so after must be idempotent); every other
// call goes to e unchanged. refundd's built-in sandbox learns the paid
// orders this way, as WeChat Pay knows what was paid.
func AfterRegister(e Engine, after func(reservation.Register)) Engine {
	return registerHook{Engine: e, after: after}
}

type registerHook struct {
	Engine
	after func(reservation.Register)
}

func (h registerHook) Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
	st, events, err := h.Engine.Execute(ctx, id, by, cmd)
	if reg, ok := cmd.(reservation.Register); ok && err == nil {
		h.after(reg)
	}
	return st, events, err
}
