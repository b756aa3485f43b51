package cluster

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

func sampleState() *reservation.State {
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	amount := int64(3000)
	st := reservation.Replay(nil)
	env := reservation.Env{Now: at, By: "test", Policy: reservation.Policy{RefundNoPrefix: "T"}}
	apply := func(cmd reservation.Command) {
		events, err := reservation.Decide(st, cmd, env)
		if err != nil {
			panic(err)
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
	}
	apply(reservation.Register{ReservationID: "r1", UserID: "u", OutTradeNo: "O1", Amount: 10000, Currency: "CNY", PaidAt: at})
	apply(reservation.RequestRefund{UserID: "u", IdempotencyKey: "k1", Amount: &amount, Reason: "why",
		ReasonCode: reservation.ReasonDuplicate, Metadata: map[string]string{"order": "O-1", "<&>": "\"x\""}})
	apply(reservation.StartSubmission{RefundNo: st.Refunds[0].No, Request: []byte(`{"x":1}`)})
	apply(reservation.RequestRefund{UserID: "u", IdempotencyKey: "k2", Amount: &amount})
	return st
}

// A State decoded from the wire equals the original, private indexes
// included (Refund and RefundByKey work).
func TestWire_StateRoundTrip(t *testing.T) {
	st := sampleState()
	r := &reply{}
	if err := encodeState(st, r); err != nil {
		t.Fatal(err)
	}
	got, err := decodeState(r)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, st.Clone()) {
		t.Fatalf("round trip changed the state:\n got %+v\nwant %+v", got, st)
	}
	for _, rf := range st.Refunds {
		if got.Refund(rf.No) != got.Refunds[rf.Number-1] || got.RefundByKey(rf.IdempotencyKey) == nil {
			t.Fatalf("refund %s not indexed after the round trip", rf.No)
		}
	}
	r.Refunds[0].Key = "other"
	if _, err := decodeState(r); !errors.Is(err, ErrWire) {
		t.Fatalf("mismatched index: %v, want ErrWire", err)
	}
}

// A state from a node of a release before merchants names none: it is the
// default merchant's, as that release's journal is.
func TestWire_StateWithoutMerchant(t *testing.T) {
	st := sampleState()
	r := &reply{}
	if err := encodeState(st, r); err != nil {
		t.Fatal(err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(r.State, &fields); err != nil || fields["Merchant"] == nil {
		t.Fatalf("encoded state %s: %v", r.State, err)
	}
	delete(fields, "Merchant")
	r.State, _ = json.Marshal(fields)
	got, err := decodeState(r)
	if err != nil || got.Merchant != reservation.DefaultMerchant {
		t.Fatalf("decoded %+v, %v; want the default merchant", got, err)
	}
}

func TestWire_CommandRoundTrip(t *testing.T) {
	amount := int64(5)
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, cmd := range []reservation.Command{
		reservation.Register{ReservationID: "r", UserID: "u", OutTradeNo: "o", TransactionID: "t", Amount: 1, Currency: "CNY", PaidAt: at},
		reservation.Register{ReservationID: "r", UserID: "u", OutTradeNo: "o", Amount: 1, Currency: "CNY", Merchant: "hotel-sh"},
		reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount, Reason: "x"},
		reservation.RequestRefund{UserID: "u", IdempotencyKey: "k"},
		reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", ReasonCode: reservation.ReasonOther, Metadata: map[string]string{"a": "b", "c": "d"}},
		reservation.StartSubmission{RefundNo: "n", Request: []byte{0, 1, 2}},
		reservation.Resubmit{RefundNo: "n"},
		reservation.Abandon{RefundNo: "n", Reason: "r"},
		reservation.Abandon{RefundNo: "n", Reason: "r", Check: &reservation.ProviderCheck{
			Outcome: reservation.Outcome{Kind: reservation.OutcomeNotFound, Code: "RESOURCE_NOT_EXISTS"}, At: at}},
		reservation.RecordOutcome{RefundNo: "n", Source: reservation.SourceQuery, Attempt: 2, Outcome: reservation.Outcome{
			Kind: reservation.OutcomeSucceeded, Code: "c", ProviderID: "p", OutTradeNo: "o", RefundAmount: 3, TotalAmount: 4, SuccessTime: at}},
		reservation.FireTimer{RefundNo: "n", DueAt: at},
		reservation.Resolve{RefundNo: "n", Reason: "r"},
		reservation.CheckProvider{RefundNo: "n"},
		reservation.CheckProvider{RefundNo: "n", Reported: &reservation.Outcome{ProviderID: "p", OutTradeNo: "o", RefundAmount: 3, TotalAmount: 4}},
		// A notification's merchant travels to the reservation's owner.
		reservation.Notification{RefundNo: "n", Merchant: "hotel-sh", Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded,
			ProviderID: "p", OutTradeNo: "o", RefundAmount: 3, TotalAmount: 4, MchID: "1900000001", SubMchID: "1900000101"}}.Command(),
		reservation.Notification{RefundNo: "n", Merchant: "hotel-bj", Hint: true, Outcome: reservation.Outcome{ProviderID: "p"}}.Command(),
	} {
		name, data, err := encodeCommand(cmd)
		if err != nil {
			t.Fatal(err)
		}
		got, err := decodeCommand(name, data)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, cmd) {
			t.Fatalf("%s: got %#v, want %#v", name, got, cmd)
		}
	}
	if _, err := decodeCommand("launch_rockets", nil); !errors.Is(err, ErrWire) {
		t.Fatalf("unknown command: %v", err)
	}
}

func TestWire_Errors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error
	}{
		{reservation.ErrInsufficientRefundable, reservation.ErrInsufficientRefundable},
		{reservation.ErrOutTradeNoTaken, reservation.ErrOutTradeNoTaken},
		{reservation.ErrReleaseUnconfirmed, reservation.ErrReleaseUnconfirmed}, // actors.AbandonChecked matches it
		{reservation.ErrProviderHasRefund, reservation.ErrProviderHasRefund},
		{reservation.ErrRefundSettling, reservation.ErrRefundSettling},
		{actors.ErrUnavailable, actors.ErrUnavailable},
		{errors.New("boom"), actors.ErrUnavailable},
	} {
		got := decodeError(encodeError(tc.err))
		if !errors.Is(got, tc.want) {
			t.Errorf("%v came back as %v", tc.err, got)
		}
	}
	if decodeError(encodeError(nil)) != nil {
		t.Error("nil error did not stay nil")
	}
}

func TestWire_RefusesOtherVersions(t *testing.T) {
	m, _ := marshal(&request{V: wireVersion + 1, Op: opGet, ID: "r"})
	req := &request{}
	if err := unmarshal(m, req, &req.V); !errors.Is(err, ErrWire) {
		t.Fatalf("newer version: %v, want ErrWire", err)
	}
}

// A reply sent to another node carries the same answer as the local one.
func TestWire_ReplyRemoteEqualsLocal(t *testing.T) {
	st := sampleState()
	events := []reservation.Event{{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), By: "x", Data: reservation.Canceled{Refunded: 5}}}
	local := &reply{st: st, events: events, err: reservation.ErrCanceled}
	w := *local
	if err := w.wire(); err != nil {
		t.Fatal(err)
	}
	m, err := marshal(&w)
	if err != nil {
		t.Fatal(err)
	}
	remote := &reply{remote: true}
	if err := unmarshal(m, remote, &remote.V); err != nil {
		t.Fatal(err)
	}
	lst, lev, lerr := local.values()
	rst, rev, rerr := remote.values()
	if !reflect.DeepEqual(lst, rst) || !reflect.DeepEqual(lev, rev) || !errors.Is(rerr, lerr) {
		t.Fatalf("remote answer differs:\n%+v %+v %v\n%+v %+v %v", lst, lev, lerr, rst, rev, rerr)
	}
	if lst == st {
		t.Fatal("a local answer must be a copy: de-duplicated answers are shared")
	}
}
