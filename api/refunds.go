package api

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
)

// refundRequest is the body of POST /v1/reservations/{id}/refunds. It never
// says what was paid: that comes from the registration.
type refundRequest struct {
	UserID string `json:"user_id"`
	Amount *int64 `json:"amount"`
	Reason string `json:"reason"`
	// ReasonCode and Metadata are the merchant's: journaled and shown,
	// never sent to WeChat Pay (reservation.RequestRefund).
	ReasonCode string            `json:"reason_code"`
	Metadata   map[string]string `json:"metadata"`
}

// requestRefund answers 202 when this request created a refund that is not
// yet final, and 200 with the current state otherwise (a replay, or a refund
// that finished within ?wait=).
func (s *Server) requestRefund(w http.ResponseWriter, r *http.Request) {
	id := pathVars(r)["id"]
	key, err := singleHeader(r, "Idempotency-Key")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if !reservation.ValidIdempotencyKey(key) {
		s.writeError(w, r, badRequest("Idempotency-Key", "header is required: 1..64 characters of [0-9A-Za-z_-]"))
		return
	}
	wait, err := s.parseWait(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var req refundRequest
	if err := s.decodeStrict(w, r, &req); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, events, err := s.engineFor(r).Execute(ctx, id, s.principal(r),
		reservation.RequestRefund{UserID: req.UserID, IdempotencyKey: key, Amount: req.Amount, Reason: req.Reason,
			ReasonCode: req.ReasonCode, Metadata: req.Metadata})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	created := len(events) > 0
	ref := st.RefundByKey(key)
	if ref == nil {
		s.writeError(w, r, &apiError{code: codeInternal, msg: "internal error"})
		return
	}
	if wait > 0 && !ref.State.Terminal() {
		st = s.awaitRefund(ctx, r, id, ref.No, wait, st)
		ref = st.Refund(ref.No)
	}
	status := http.StatusOK
	if created && !ref.State.Terminal() {
		status = http.StatusAccepted
	}
	s.writeRefund(w, status, st, ref)
}

// awaitRefund waits (bounded by wait and by ctx's deadline) for a refund to
// reach a terminal state and returns the freshest state it saw.
func (s *Server) awaitRefund(ctx context.Context, r *http.Request, id, no string, wait time.Duration, st *reservation.State) *reservation.State {
	// The wait hangs off the request's context with ctx's deadline when
	// that comes first: the same bound as a child of ctx, without ctx
	// allocating a table of its children.
	deadline := time.Now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wctx, cancel := context.WithDeadline(r.Context(), deadline)
	defer cancel()
	next, err := s.engineFor(r).Await(wctx, id, func(x *reservation.State) bool {
		rf := x.Refund(no)
		return rf != nil && rf.State.Terminal()
	})
	if err != nil && wctx.Err() == nil {
		// The refund goes on and the answer is the state before the wait,
		// as after a wait that ran out; said here because a wait cut short
		// (routing while the reservation moves between nodes) looks the same.
		s.log.WarnContext(r.Context(), "refund: waiting for the outcome ended early", "reservation", id, "refund_no", no, "err", err)
	}
	if err != nil || next == nil || next.Refund(no) == nil {
		return st
	}
	return next
}

func (s *Server) parseWait(r *http.Request) (time.Duration, error) {
	v := queryWait(r.URL.RawQuery)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, badRequest("wait", "must be a duration such as 2s")
	}
	if d > s.opts.MaxWait {
		d = s.opts.MaxWait
	}
	return d, nil
}

// queryWait is url.ParseQuery(raw).Get("wait") without building the map
// for the usual query of one plain parameter.
func queryWait(raw string) string {
	if strings.ContainsAny(raw, "&;%+") {
		v, _ := url.ParseQuery(raw)
		return v.Get("wait")
	}
	if key, v, _ := strings.Cut(raw, "="); key == "wait" {
		return v
	}
	return ""
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	vars := pathVars(r)
	wait, err := s.parseWait(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, err := s.engineFor(r).Get(ctx, vars["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ref := st.Refund(vars["refund_no"])
	if ref == nil {
		s.writeError(w, r, &reservation.Error{Code: reservation.CodeNotFound, Message: "refund not found"})
		return
	}
	if wait > 0 && !ref.State.Terminal() {
		st = s.awaitRefund(ctx, r, vars["id"], ref.No, wait, st)
		ref = st.Refund(ref.No)
	}
	s.writeRefund(w, http.StatusOK, st, ref)
}

// operatorRequest is the optional body of resubmit and abandon.
type operatorRequest struct {
	Reason string `json:"reason"`
}

func (s *Server) resubmitRefund(w http.ResponseWriter, r *http.Request) {
	s.operatorAction(w, r, func(no, _ string) reservation.Command { return reservation.Resubmit{RefundNo: no} })
}

// abandonRefund releases a REJECTED refund's amount, only on a fresh "not
// found" from WeChat Pay (see Engine.Abandon).
func (s *Server) abandonRefund(w http.ResponseWriter, r *http.Request) {
	engine := s.engineFor(r)
	exec := func(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error) {
		return engine.Abandon(ctx, id, by, cmd.(reservation.Abandon))
	}
	s.operatorExec(w, r, exec, func(no, reason string) reservation.Command {
		return reservation.Abandon{RefundNo: no, Reason: reason}
	})
}

// reconcileRefund asks the provider about a refund now (journaled, then
// queried); the answer is applied like any other. It is an operator's
// explicit request, so the hint window that holds back notifications' hints
// does not apply.
func (s *Server) reconcileRefund(w http.ResponseWriter, r *http.Request) {
	s.operatorAction(w, r, func(no, _ string) reservation.Command {
		return reservation.CheckProvider{RefundNo: no, Operator: true}
	})
}

// resolveRefund settles an ABNORMAL refund that was resolved outside refundd.
func (s *Server) resolveRefund(w http.ResponseWriter, r *http.Request) {
	s.operatorAction(w, r, func(no, reason string) reservation.Command {
		return reservation.Resolve{RefundNo: no, Reason: reason}
	})
}

// approveRefund approves a refund held for approval (PENDING_APPROVAL); its
// submission to WeChat Pay follows through the usual path, spacing
// included. The approver must not be the requester (403 self_approval). An
// approval carries no reason.
func (s *Server) approveRefund(w http.ResponseWriter, r *http.Request) {
	s.operatorAction(w, r, func(no, reason string) reservation.Command {
		if reason != "" {
			return nil
		}
		return reservation.Approve{RefundNo: no}
	})
}

// rejectRefund refuses a refund held for approval: FAILED, its amount
// released. A reason is required.
func (s *Server) rejectRefund(w http.ResponseWriter, r *http.Request) {
	s.operatorAction(w, r, func(no, reason string) reservation.Command {
		return reservation.Reject{RefundNo: no, Reason: reason}
	})
}

func (s *Server) operatorAction(w http.ResponseWriter, r *http.Request, build func(no, reason string) reservation.Command) {
	s.operatorExec(w, r, s.engineFor(r).Execute, build)
}

type executeFunc func(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error)

func (s *Server) operatorExec(w http.ResponseWriter, r *http.Request, exec executeFunc, build func(no, reason string) reservation.Command) {
	vars := pathVars(r)
	var req operatorRequest
	// The body is optional: an empty one (even chunked) means no reason.
	if err := s.decodeStrict(w, r, &req); err != nil && !isEmptyBody(err) {
		s.writeError(w, r, err)
		return
	}
	cmd := build(vars["refund_no"], req.Reason)
	if cmd == nil {
		s.writeError(w, r, badRequest("reason", "is not taken by this action"))
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	st, _, err := exec(ctx, vars["id"], s.principal(r), cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRefund(w, http.StatusOK, st, st.Refund(vars["refund_no"]))
}
