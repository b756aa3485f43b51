package sandbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// The books on disk (Config.StateFile): one JSON document, rewritten whole
// after every change that matters for money. Faults, delivery logs and bill
// download tokens are not kept.

// stateVersion is the format written; another one is refused, not misread.
const stateVersion = 1

type stateDoc struct {
	Version     int                        `json:"version"`
	MchID       string                     `json:"mchid"`
	SubMchID    string                     `json:"sub_mchid,omitempty"`
	Seq         uint64                     `json:"seq"`
	Orders      []stateOrder               `json:"orders"`
	Refunds     []stateRefund              `json:"refunds"` // per order, in creation order
	Submissions map[string]stateSubmission `json:"submissions"`
}

type stateOrder struct {
	OutTradeNo    string    `json:"out_trade_no"`
	TransactionID string    `json:"transaction_id"`
	Total         int64     `json:"total"`
	PaidAt        time.Time `json:"paid_at"`
	OpenID        string    `json:"openid"`
}

type stateRefund struct {
	OutRefundNo     string      `json:"out_refund_no"`
	RefundID        string      `json:"refund_id"`
	OutTradeNo      string      `json:"out_trade_no"`
	Amount          int64       `json:"amount"`
	Reason          string      `json:"reason,omitempty"`
	NotifyURL       string      `json:"notify_url,omitempty"`
	FundsAccount    string      `json:"funds_account,omitempty"`
	From            []fundsFrom `json:"from,omitempty"`
	Status          string      `json:"status"`
	Outcome         string      `json:"outcome"`
	BodyHash        string      `json:"body_hash"`
	CreatedAt       time.Time   `json:"created_at"`
	ProcessingSince time.Time   `json:"processing_since"`
	SucceededAt     time.Time   `json:"succeeded_at,omitzero"`
	Channel         string      `json:"channel"`
	ReceivedAccount string      `json:"received_account"`
	AbnormalType    string      `json:"abnormal_type,omitempty"`
	// NotifyPending is true while a notification of the current status has
	// not been acknowledged nor given up on.
	NotifyPending bool `json:"notify_pending,omitempty"`
}

type stateSubmission struct {
	Hashes []string `json:"hashes"`
	Calls  int      `json:"calls"`
}

// markLocked records a change to the books and returns its generation;
// sync(gen) makes it durable. s.mu must be held.
func (s *Server) markLocked() uint64 {
	s.gen++
	return s.gen
}

// errDetached is returned by sync after Close has written the last state.
var errDetached = fmt.Errorf("%w: the sandbox is closed and no longer writes it", ErrStateFile)

// sync makes the books durable up to generation gen: one write covers every
// change made before it, so concurrent callers share writes. It is a no-op
// without a StateFile. After Close it fails for changes Close did not save.
func (s *Server) sync(gen uint64) error {
	if s.cfg.StateFile == "" {
		return nil
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	if s.saved >= gen {
		return nil
	}
	if s.detached {
		return errDetached
	}
	return s.saveLocked()
}

// syncAll makes every change so far durable.
func (s *Server) syncAll() error {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	return s.sync(gen)
}

// saveLocked writes the current books. s.persistMu must be held, s.mu not.
func (s *Server) saveLocked() error {
	s.mu.Lock()
	doc := s.stateLocked()
	gen := s.gen
	s.mu.Unlock()
	data, err := marshalJSON(doc)
	if err != nil {
		return fmt.Errorf("%w: encode: %w", ErrStateFile, err)
	}
	if err := writeFileAtomic(s.cfg.StateFile, data, 0o644); err != nil {
		return fmt.Errorf("%w: %w", ErrStateFile, err)
	}
	s.saved = gen
	return nil
}

// stateLocked copies the books into their file form. s.mu must be held.
func (s *Server) stateLocked() stateDoc {
	doc := stateDoc{
		Version: stateVersion, MchID: s.cfg.MchID, SubMchID: s.cfg.SubMchID, Seq: s.seq,
		Orders: make([]stateOrder, 0, len(s.orders)), Refunds: make([]stateRefund, 0, len(s.refunds)),
		Submissions: make(map[string]stateSubmission, len(s.submissions)),
	}
	nos := make([]string, 0, len(s.orders))
	for no := range s.orders {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	for _, no := range nos {
		o := s.orders[no]
		doc.Orders = append(doc.Orders, stateOrder{OutTradeNo: o.outTradeNo, TransactionID: o.transactionID, Total: o.total, PaidAt: o.paidAt, OpenID: o.openID})
		for _, rn := range o.refundNos {
			r := s.refunds[rn]
			doc.Refunds = append(doc.Refunds, stateRefund{
				OutRefundNo: r.outRefundNo, RefundID: r.refundID, OutTradeNo: o.outTradeNo, Amount: r.amount,
				Reason: r.reason, NotifyURL: r.notifyURL, FundsAccount: r.fundsAccount, From: r.from,
				Status: r.status, Outcome: r.outcome, BodyHash: r.bodyHash,
				CreatedAt: r.createdAt, ProcessingSince: r.processingSince, SucceededAt: r.succeededAt,
				Channel: r.channel, ReceivedAccount: r.receivedAccount, AbnormalType: r.abnormalType,
				NotifyPending: r.pendingNotify > 0,
			})
		}
	}
	for no, sub := range s.submissions {
		doc.Submissions[no] = stateSubmission{Hashes: slices.Clone(sub.hashes), Calls: sub.calls}
	}
	return doc
}

// openState loads Config.StateFile into s (a missing file is empty books),
// removes temporary files a crash left behind, and writes the file once so
// an unwritable location fails New rather than the first refund.
func (s *Server) openState() error {
	path := s.cfg.StateFile
	stale, _ := filepath.Glob(filepath.Join(filepath.Dir(path), "."+globEscape(filepath.Base(path))+".tmp*"))
	for _, f := range stale {
		os.Remove(f)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return fmt.Errorf("%w: %w", ErrStateFile, err)
	default:
		if err := s.load(data); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrStateFile, path, err)
		}
	}
	s.persistMu.Lock()
	defer s.persistMu.Unlock()
	return s.saveLocked()
}

// globEscape quotes the pattern characters of a file name.
func globEscape(name string) string {
	var b []byte
	for i := 0; i < len(name); i++ {
		switch name[i] {
		case '*', '?', '[', '\\':
			b = append(b, '\\')
		}
		b = append(b, name[i])
	}
	return string(b)
}

// load fills the empty books of s from a state document, checking that it
// is consistent: a sandbox that misread its books would teach the merchant
// wrong lessons about money.
func (s *Server) load(data []byte) error {
	var doc stateDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	switch {
	case doc.Version != stateVersion:
		return fmt.Errorf("format version %d, this sandbox reads %d", doc.Version, stateVersion)
	case doc.MchID != s.cfg.MchID || doc.SubMchID != s.cfg.SubMchID:
		return fmt.Errorf("books of mchid %q sub_mchid %q, not %q %q", doc.MchID, doc.SubMchID, s.cfg.MchID, s.cfg.SubMchID)
	}
	s.seq = doc.Seq
	for _, so := range doc.Orders {
		switch {
		case so.OutTradeNo == "" || len(so.OutTradeNo) > maxOrderNoLen || so.TransactionID == "" || len(so.TransactionID) > maxOrderNoLen:
			return fmt.Errorf("order %q: bad order or transaction number", so.OutTradeNo)
		case so.Total <= 0:
			return fmt.Errorf("order %s: total %d", so.OutTradeNo, so.Total)
		case s.orders[so.OutTradeNo] != nil || s.byTxn[so.TransactionID] != nil:
			return fmt.Errorf("order %s: listed twice", so.OutTradeNo)
		}
		o := &order{outTradeNo: so.OutTradeNo, transactionID: so.TransactionID, total: so.Total, paidAt: so.PaidAt, openID: so.OpenID}
		s.orders[o.outTradeNo] = o
		s.byTxn[o.transactionID] = o
	}
	for _, sr := range doc.Refunds {
		o := s.orders[sr.OutTradeNo]
		switch {
		case o == nil:
			return fmt.Errorf("refund %s: unknown order %q", sr.OutRefundNo, sr.OutTradeNo)
		case !outRefundNoRE.MatchString(sr.OutRefundNo) || sr.RefundID == "":
			return fmt.Errorf("refund %q: bad refund number or id", sr.OutRefundNo)
		case s.refunds[sr.OutRefundNo] != nil || s.byRefundID[sr.RefundID] != nil:
			return fmt.Errorf("refund %s: listed twice", sr.OutRefundNo)
		case sr.Amount <= 0:
			return fmt.Errorf("refund %s: amount %d", sr.OutRefundNo, sr.Amount)
		case !knownStatus(sr.Status) || !knownStatus(sr.Outcome) || sr.Outcome == wechatpay.RefundProcessing:
			return fmt.Errorf("refund %s: status %q outcome %q", sr.OutRefundNo, sr.Status, sr.Outcome)
		case len(o.refundNos) >= maxRefundsByOrder:
			return fmt.Errorf("order %s: more than %d refunds", o.outTradeNo, maxRefundsByOrder)
		}
		r := &refund{
			outRefundNo: sr.OutRefundNo, refundID: sr.RefundID, order: o, amount: sr.Amount,
			reason: sr.Reason, notifyURL: sr.NotifyURL, fundsAccount: sr.FundsAccount, from: sr.From,
			status: sr.Status, outcome: sr.Outcome, bodyHash: sr.BodyHash,
			createdAt: sr.CreatedAt, processingSince: sr.ProcessingSince, succeededAt: sr.SucceededAt,
			channel: sr.Channel, receivedAccount: sr.ReceivedAccount, abnormalType: sr.AbnormalType,
		}
		if sr.NotifyPending && r.status != wechatpay.RefundProcessing {
			r.pendingNotify = -1 // resent by resume
		}
		if r.status != wechatpay.RefundClosed {
			if r.amount > o.total-o.held {
				return fmt.Errorf("order %s: refunds exceed its total %d", o.outTradeNo, o.total)
			}
			o.held += r.amount
		}
		o.refundNos = append(o.refundNos, r.outRefundNo)
		if r.createdAt.After(o.lastAcceptedAt) {
			o.lastAcceptedAt = r.createdAt
		}
		s.refunds[r.outRefundNo] = r
		s.byRefundID[r.refundID] = r
	}
	for no, ss := range doc.Submissions {
		if ss.Calls < 0 {
			return fmt.Errorf("submissions of %s: %d calls", no, ss.Calls)
		}
		s.submissions[no] = &submission{hashes: ss.Hashes, calls: ss.Calls}
	}
	return nil
}

func knownStatus(st string) bool {
	switch st {
	case wechatpay.RefundProcessing, wechatpay.RefundSuccess, wechatpay.RefundClosed, wechatpay.RefundAbnormal:
		return true
	}
	return false
}

// resume continues what loaded refunds were doing when the books were last
// saved: a PROCESSING refund reaches its outcome ProcessingDelay after it
// started processing (at once if that time has passed), and a final refund
// whose notification was still pending is notified again from the first
// attempt of the schedule.
func (s *Server) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	delay := s.cfg.scale(s.cfg.ProcessingDelay)
	now := s.cfg.Now()
	for _, no := range s.sortedRefundNosLocked() {
		r := s.refunds[no]
		switch {
		case r.status == wechatpay.RefundProcessing:
			wait := max(r.processingSince.Add(delay).Sub(now), 0)
			s.timers[no] = time.AfterFunc(wait, func() { s.finalize(no) })
		case r.pendingNotify < 0:
			r.pendingNotify = 0
			jobs := s.notificationsLocked(r)
			r.pendingNotify = originals(jobs)
			s.startLocked(jobs)
			s.log.Debug("notification resumed after reload", "out_refund_no", no, "status", r.status)
		}
	}
}

// sortedRefundNosLocked lists refund numbers in a stable order.
func (s *Server) sortedRefundNosLocked() []string {
	nos := make([]string, 0, len(s.refunds))
	for no := range s.refunds {
		nos = append(nos, no)
	}
	slices.Sort(nos)
	return nos
}
