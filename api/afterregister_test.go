package api

import (
	"context"
	"errors"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

// answerEngine answers Execute with err; nothing else is called.
type answerEngine struct {
	Engine
	err error
}

func (e answerEngine) Execute(context.Context, string, string, reservation.Command) (*reservation.State, []reservation.Event, error) {
	return &reservation.State{}, nil, e.err
}

func TestAfterRegister_OnlyJournaledRegistrations(t *testing.T) {
	reg := reservation.Register{ReservationID: "r1", OutTradeNo: "OT1", Amount: 100, Currency: "CNY"}
	for _, tc := range []struct {
		name   string
		cmd    reservation.Command
		err    error
		called bool
	}{
		{"registration journaled", reg, nil, true},
		{"registration refused", reg, reservation.ErrConflict, false},
		{"another command", reservation.RequestRefund{IdempotencyKey: "k1"}, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []reservation.Register
			e := AfterRegister(answerEngine{err: tc.err}, func(r reservation.Register) { got = append(got, r) })
			if _, _, err := e.Execute(context.Background(), "r1", "test", tc.cmd); !errors.Is(err, tc.err) {
				t.Fatalf("Execute: %v; want %v passed through", err, tc.err)
			}
			if called := len(got) == 1 && got[0] == reg; called != tc.called || len(got) > 1 {
				t.Errorf("after got %+v; want called %v with the registration", got, tc.called)
			}
		})
	}
}
