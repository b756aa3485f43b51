package sandbox

import (
	"fmt"
	"time"
)

// FaultKind names an injected fault.
type FaultKind string

// Faults on API calls (create, query and apply-abnormal-refund). At most one
// applies per call: the first matching one set.
const (
	// FaultDelay waits Fault.Delay, then handles the call normally. A
	// client whose timeout is shorter sees a timeout while a create is
	// still applied afterwards: an unknown outcome.
	FaultDelay FaultKind = "delay"
	// FaultHTTP500 answers a bare 500 with an HTML body and no signature,
	// as a gateway would; nothing is applied.
	FaultHTTP500 FaultKind = "http_500"
	// FaultSystemError answers 500 {"code":"SYSTEM_ERROR"}; nothing is
	// applied.
	FaultSystemError FaultKind = "system_error"
	// FaultFrequencyLimited answers 429 {"code":"FREQUENCY_LIMITED"};
	// nothing is applied.
	FaultFrequencyLimited FaultKind = "frequency_limited"
	// FaultNotEnough answers 403 {"code":"NOT_ENOUGH"}: the merchant's
	// available refund balance is short (WeChat Pay's meaning of the code);
	// nothing is applied.
	FaultNotEnough FaultKind = "not_enough"
	// FaultAccepted answers 202 with an empty signed body: "accepted, not
	// yet processed, repeat with the original parameters". Nothing is
	// applied.
	FaultAccepted FaultKind = "accepted_202"
	// FaultResponseLost handles the call (a create or an
	// apply-abnormal-refund is applied), then
	// answers 500 SYSTEM_ERROR when Fault.Delay is zero, or holds the
	// connection for Fault.Delay and drops it without a response.
	FaultResponseLost FaultKind = "response_lost"
	// FaultBadSignature handles the call and signs the response wrongly.
	FaultBadSignature FaultKind = "bad_signature"
	// FaultProbeSignature handles the call and sends the response with a
	// WECHATPAY/SIGNTEST/ probe signature.
	FaultProbeSignature FaultKind = "probe_signature"
)

// A fault on the refund's outcome, taken when a create is accepted.
const (
	// FaultOutcome makes the refund end in Fault.Outcome (CLOSED or
	// ABNORMAL) instead of SUCCESS.
	FaultOutcome FaultKind = "outcome"
)

// Faults on notifications, taken when the refund reaches its outcome.
// Faults of different kinds combine (the first matching one of each kind
// applies); each applies to both v3 and v2 notifications except
// the signature ones (v2 is unsigned).
const (
	// FaultNotifyDuplicate sends Fault.Repeat extra copies of each
	// notification (same id and body), Fault.Delay after the original
	// (zero: concurrently with it). Each copy is retried on its own.
	FaultNotifyDuplicate FaultKind = "notify_duplicate"
	// FaultNotifyLate holds the notification back for Fault.Delay, so the
	// merchant can see the outcome by query first and other refunds'
	// notifications overtake it.
	FaultNotifyLate FaultKind = "notify_late"
	// FaultNotifyDrop sends no notification at all; the merchant must
	// query.
	FaultNotifyDrop FaultKind = "notify_drop"
	// FaultNotifyProbe signs the first v3 attempt with a
	// WECHATPAY/SIGNTEST/ probe; retries are signed correctly.
	FaultNotifyProbe FaultKind = "notify_probe"
	// FaultNotifyBadSignature signs the first v3 attempt wrongly; retries
	// are signed correctly.
	FaultNotifyBadSignature FaultKind = "notify_bad_signature"
)

// Operations an API fault can be limited to (Fault.Op).
const (
	OpCreate         = "create"
	OpQuery          = "query"
	OpAbnormalRefund = "abnormal_refund" // POST .../{refund_id}/apply-abnormal-refund
)

// Fault describes an injected fault. OutTradeNo and OutRefundNo select the
// calls it applies to: a call matches when every non-empty one equals the
// call's (so both empty matches everything). A create matches by the
// request's order; a query or an apply-abnormal-refund by the refund's
// order, once known.
type Fault struct {
	Kind        FaultKind `json:"kind"`
	OutTradeNo  string    `json:"out_trade_no,omitempty"`
	OutRefundNo string    `json:"out_refund_no,omitempty"`
	// Op limits an API fault to OpCreate, OpQuery or OpAbnormalRefund
	// calls; empty means all of them. Ignored by outcome and notification
	// faults.
	Op string `json:"op,omitempty"`
	// Count is how many calls (API faults) or refunds (outcome and
	// notification faults) the fault applies to before it is used up.
	// Zero means until ClearFaults.
	Count int `json:"count,omitempty"`
	// Delay is used by FaultDelay, FaultResponseLost, FaultNotifyDuplicate
	// and FaultNotifyLate. It is not scaled by TimeFactor, so it can be
	// compared with a client's timeout.
	Delay time.Duration `json:"-"`
	// Outcome is CLOSED or ABNORMAL, for FaultOutcome.
	Outcome string `json:"outcome,omitempty"`
	// Repeat is the number of extra copies for FaultNotifyDuplicate; zero
	// means 1.
	Repeat int `json:"repeat,omitempty"`
}

// stage groups fault kinds by when they are taken.
type stage int

const (
	stageAPI stage = iota
	stageOutcome
	stageNotify
)

func (k FaultKind) stage() (stage, bool) {
	switch k {
	case FaultDelay, FaultHTTP500, FaultSystemError, FaultFrequencyLimited, FaultNotEnough, FaultAccepted, FaultResponseLost, FaultBadSignature, FaultProbeSignature:
		return stageAPI, true
	case FaultOutcome:
		return stageOutcome, true
	case FaultNotifyDuplicate, FaultNotifyLate, FaultNotifyDrop, FaultNotifyProbe, FaultNotifyBadSignature:
		return stageNotify, true
	}
	return 0, false
}

func (f Fault) validate() error {
	if _, ok := f.Kind.stage(); !ok {
		return fmt.Errorf("%w: unknown fault kind %q", ErrInvalidArgument, f.Kind)
	}
	if f.Op != "" && f.Op != OpCreate && f.Op != OpQuery && f.Op != OpAbnormalRefund {
		return fmt.Errorf("%w: fault op %q, want %q, %q, %q or empty", ErrInvalidArgument, f.Op, OpCreate, OpQuery, OpAbnormalRefund)
	}
	if f.Count < 0 || f.Repeat < 0 || f.Delay < 0 {
		return fmt.Errorf("%w: fault count, repeat and delay must not be negative", ErrInvalidArgument)
	}
	if f.Kind == FaultOutcome && f.Outcome != "CLOSED" && f.Outcome != "ABNORMAL" {
		return fmt.Errorf("%w: outcome fault needs outcome CLOSED or ABNORMAL, got %q", ErrInvalidArgument, f.Outcome)
	}
	return nil
}

// faultEntry is a Fault with its remaining uses (-1: unlimited).
type faultEntry struct {
	Fault
	left int
}

func (e *faultEntry) matches(op, outTradeNo, outRefundNo string) bool {
	if e.OutTradeNo != "" && e.OutTradeNo != outTradeNo {
		return false
	}
	if e.OutRefundNo != "" && e.OutRefundNo != outRefundNo {
		return false
	}
	return e.Op == "" || op == "" || e.Op == op
}

// SetFault adds a fault. Faults apply in the order they were set.
//
// Errors wrap ErrInvalidArgument (unknown kind or op, negative numbers, an
// outcome fault without CLOSED or ABNORMAL).
func (s *Server) SetFault(f Fault) error {
	if err := f.validate(); err != nil {
		return err
	}
	if f.Kind == FaultNotifyDuplicate && f.Repeat == 0 {
		f.Repeat = 1
	}
	left := f.Count
	if left == 0 {
		left = -1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &faultEntry{Fault: f, left: left})
	return nil
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Faults returns the faults still in force, in order, with Count set to the
// remaining uses (zero: unlimited).
func (s *Server) Faults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Fault, 0, len(s.faults))
	for _, e := range s.faults {
		f := e.Fault
		f.Count = max(e.left, 0)
		out = append(out, f)
	}
	return out
}

// takeFaultsLocked consumes and returns the faults of stage st that match:
// only the first one when perKind is false, else the first of each kind.
// s.mu must be held.
func (s *Server) takeFaultsLocked(st stage, op, outTradeNo, outRefundNo string, perKind bool) []Fault {
	var out []Fault
	taken := func(k FaultKind) bool {
		for _, f := range out {
			if !perKind || f.Kind == k {
				return true
			}
		}
		return false
	}
	kept := s.faults[:0]
	for _, e := range s.faults {
		if k, _ := e.Kind.stage(); k == st && !taken(e.Kind) && e.matches(op, outTradeNo, outRefundNo) {
			out = append(out, e.Fault)
			if e.left > 0 {
				e.left--
				if e.left == 0 {
					continue // used up
				}
			}
		}
		kept = append(kept, e)
	}
	clear(s.faults[len(kept):])
	s.faults = kept
	return out
}

// takeAPIFault consumes the first API fault matching a call, if any.
func (s *Server) takeAPIFault(op, outTradeNo, outRefundNo string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fs := s.takeFaultsLocked(stageAPI, op, outTradeNo, outRefundNo, false); len(fs) > 0 {
		return &fs[0]
	}
	return nil
}
