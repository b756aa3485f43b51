package audit

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/journal"
)

// RefundFact is a refund as the journal knows it at its end.
type RefundFact struct {
	ReservationID string                  `json:"reservation_id"`
	Merchant      string                  `json:"merchant"`
	RefundNo      string                  `json:"refund_no"`
	OutTradeNo    string                  `json:"out_trade_no"`
	Amount        int64                   `json:"amount"`
	State         reservation.RefundState `json:"state"`
	ProviderID    string                  `json:"provider_id,omitempty"`
	Attempts      int                     `json:"attempts"`
	CreatedAt     time.Time               `json:"created_at"`
	SubmittedAt   time.Time               `json:"submitted_at,omitzero"`
	UpdatedAt     time.Time               `json:"updated_at"`
}

// Facts lists every refund of the given states, oldest request first.
func Facts(states map[string]*reservation.State) []RefundFact {
	var out []RefundFact
	for id, s := range states {
		for _, r := range s.Refunds {
			out = append(out, factOf(id, s, r))
		}
	}
	sortFacts(out)
	return out
}

func factOf(id string, s *reservation.State, r *reservation.Refund) RefundFact {
	return RefundFact{ReservationID: id, Merchant: s.Merchant, RefundNo: r.No, OutTradeNo: s.OutTradeNo, Amount: r.Amount,
		State: r.State, ProviderID: r.ProviderID, Attempts: r.Attempts, CreatedAt: r.CreatedAt,
		SubmittedAt: r.SubmittedAt, UpdatedAt: r.UpdatedAt}
}

func sortFacts(out []RefundFact) {
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return out[i].RefundNo < out[j].RefundNo
	})
}

// Mismatch is one disagreement between the journal and WeChat Pay.
type Mismatch struct {
	// Kind is not_in_journal, not_in_bill, duplicate, amount, status,
	// order, refund_id, summary (the bill's own totals) or query_failed;
	// notes use unknown_not_in_bill, boundary and note.
	Kind          string                `json:"kind"`
	RefundNo      string                `json:"refund_no,omitempty"`
	ReservationID string                `json:"reservation_id,omitempty"`
	Journal       *RefundFact           `json:"journal,omitempty"`
	Bill          *wechatpay.BillRefund `json:"bill,omitempty"`
	Provider      *ProviderAnswer       `json:"provider,omitempty"`
	Detail        string                `json:"detail"`
}

func (m Mismatch) String() string {
	s := m.Kind
	if m.RefundNo != "" {
		s += " " + m.RefundNo
	}
	if m.ReservationID != "" {
		s += " (reservation " + m.ReservationID + ")"
	}
	return s + ": " + m.Detail
}

// BillOptions configures ReconcileBill.
type BillOptions struct {
	// Date is the bill's date, yyyy-MM-dd in Beijing time: journal refunds
	// first submitted that day are expected in it. Empty means the date of
	// the bill's refund rows (退款申请时间), which must all share one.
	Date string
	// Slack: a journal refund submitted this close to either end of the
	// day may be in the neighbouring day's bill, so its absence is a note,
	// not a mismatch. Zero means 5 minutes.
	Slack time.Duration
	// Prefixes are this deployment's refund-number prefixes, of every
	// epoch. A bill refund the journal does not know is described as ours
	// (lost by a restore, or another deployment using the same prefix)
	// when its number starts with one of them followed by "-", as made in
	// the merchant platform otherwise. Nil means no such description.
	Prefixes []string
	// MchID is this merchant's id. When set, a bill with a row of another
	// merchant (商户号) is refused: its refund numbers could coincide with
	// ours and pass as agreement.
	MchID string
}

// BillReport is what ReconcileBill found.
type BillReport struct {
	Date           string     `json:"date"`
	BillRefunds    int        `json:"bill_refunds"`
	JournalRefunds int        `json:"journal_refunds"` // expected in this bill
	Matched        int        `json:"matched"`
	BillTotal      int64      `json:"bill_total"`
	JournalTotal   int64      `json:"journal_total"`
	Mismatches     []Mismatch `json:"mismatches"`
	Notes          []Mismatch `json:"notes"`
}

// OK reports whether the bill and the journal agree.
func (r *BillReport) OK() bool { return len(r.Mismatches) == 0 }

var beijing = time.FixedZone("CST", 8*3600)

// ReconcileBill compares a daily refund bill with the journal's refunds
// (Facts of the journal at its end): bill refunds the journal does not
// know, journal refunds submitted that day that the bill lacks, and
// amount, order, refund id and status disagreements. A bill is a snapshot
// taken when it was made ("出账后退款状态不会更新"), so a bill status that
// is earlier news than the journal's (PROCESSING in the bill, SUCCEEDED in
// the journal) agrees.
func ReconcileBill(facts []RefundFact, bill *wechatpay.Bill, opts BillOptions) (*BillReport, error) {
	rows, err := bill.Refunds()
	if err != nil {
		return nil, err
	}
	if opts.Slack <= 0 {
		opts.Slack = 5 * time.Minute
	}
	if opts.MchID != "" {
		for _, r := range rows {
			if r.MchID != opts.MchID {
				return nil, fmt.Errorf("%w: line %d is merchant %q's, not %q's: not this merchant's bill", ErrInvalid, r.Line, r.MchID, opts.MchID)
			}
		}
	}
	date, day, err := billDay(rows, opts.Date)
	if err != nil {
		return nil, err
	}
	end := day.AddDate(0, 0, 1)
	rep := &BillReport{Date: date, BillRefunds: len(rows), Mismatches: []Mismatch{}, Notes: []Mismatch{}}
	mismatch := func(m Mismatch) { rep.Mismatches = append(rep.Mismatches, m) }
	note := func(m Mismatch) { rep.Notes = append(rep.Notes, m) }

	byNo := make(map[string]*RefundFact, len(facts))
	for i := range facts {
		byNo[facts[i].RefundNo] = &facts[i]
	}
	inBill := map[string]bool{}
	for i := range rows {
		row := &rows[i]
		rep.BillTotal += row.Refund
		if inBill[row.OutRefundNo] {
			mismatch(Mismatch{Kind: "duplicate", RefundNo: row.OutRefundNo, Bill: row, Detail: fmt.Sprintf("line %d: the bill lists this refund twice", row.Line)})
			continue
		}
		inBill[row.OutRefundNo] = true
		f := byNo[row.OutRefundNo]
		if f == nil {
			mismatch(Mismatch{Kind: "not_in_journal", RefundNo: row.OutRefundNo, Bill: row,
				Detail: fmt.Sprintf("line %d: %s %s refunded on order %s; %s", row.Line, row.RefundStatus, Yuan(row.Refund), row.OutTradeNo, origin(row.OutRefundNo, opts.Prefixes))})
			continue
		}
		ok := true
		if row.Refund != f.Amount {
			ok = false
			mismatch(Mismatch{Kind: "amount", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f, Bill: row,
				Detail: fmt.Sprintf("bill %s (%d fen), journal %s (%d fen)", Yuan(row.Refund), row.Refund, Yuan(f.Amount), f.Amount)})
		}
		if row.OutTradeNo != "" && row.OutTradeNo != f.OutTradeNo {
			ok = false
			mismatch(Mismatch{Kind: "order", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f, Bill: row,
				Detail: fmt.Sprintf("bill order %s, journal order %s", row.OutTradeNo, f.OutTradeNo)})
		}
		if row.RefundID != "" && f.ProviderID != "" && row.RefundID != f.ProviderID {
			ok = false
			mismatch(Mismatch{Kind: "refund_id", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f, Bill: row,
				Detail: fmt.Sprintf("bill refund id %s, journal %s", row.RefundID, f.ProviderID)})
		}
		if why := billStatusAgrees(row.RefundStatus, f.State); why != "" {
			ok = false
			mismatch(Mismatch{Kind: "status", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f, Bill: row, Detail: why})
		}
		if ok {
			rep.Matched++
		}
	}

	for i := range facts {
		f := &facts[i]
		if f.SubmittedAt.IsZero() || f.SubmittedAt.Before(day) || !f.SubmittedAt.Before(end) {
			continue
		}
		expected := f.State == reservation.Succeeded || f.State == reservation.Processing || f.State == reservation.Abnormal
		if expected || f.State == reservation.Unknown {
			rep.JournalRefunds++
			rep.JournalTotal += f.Amount
		}
		if inBill[f.RefundNo] {
			continue
		}
		submitted := f.SubmittedAt.In(beijing).Format(time.DateTime)
		switch {
		case expected && (f.SubmittedAt.Before(day.Add(opts.Slack)) || !f.SubmittedAt.Before(end.Add(-opts.Slack))):
			// WeChat Pay dates the refund by its own clock, on receipt.
			note(Mismatch{Kind: "boundary", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f,
				Detail: fmt.Sprintf("submitted %s, within %s of the day's edge: may be in the neighbouring day's bill", submitted, opts.Slack)})
		case expected:
			mismatch(Mismatch{Kind: "not_in_bill", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f,
				Detail: fmt.Sprintf("journal says %s %s, submitted %s; the bill does not have it", f.State, Yuan(f.Amount), submitted)})
		case f.State == reservation.Unknown:
			note(Mismatch{Kind: "unknown_not_in_bill", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f,
				Detail: "UNKNOWN in the journal and absent from the bill: the submission probably never arrived; a query will settle it"})
		}
	}

	if sum, err := bill.Totals(); err != nil {
		mismatch(Mismatch{Kind: "summary", Detail: err.Error()})
	} else if sum.Count != int64(len(bill.Rows)) || (sum.RefundTotal != rep.BillTotal && len(rows) == len(bill.Rows)) {
		mismatch(Mismatch{Kind: "summary", Detail: fmt.Sprintf("the bill's summary says %d rows and %s refunded; its rows are %d and %s",
			sum.Count, Yuan(sum.RefundTotal), len(bill.Rows), Yuan(rep.BillTotal))})
	}
	return rep, nil
}

// billDay is the bill's date: given, or the one day all its rows were
// requested on (Beijing time).
func billDay(rows []wechatpay.BillRefund, date string) (string, time.Time, error) {
	if date == "" {
		for _, r := range rows {
			d := r.RequestedAt.In(beijing).Format(time.DateOnly)
			if r.RequestedAt.IsZero() || (date != "" && d != date) {
				return "", time.Time{}, fmt.Errorf("%w: cannot tell the bill's date from its rows; give it", ErrInvalid)
			}
			date = d
		}
	}
	day, err := time.ParseInLocation(time.DateOnly, date, beijing)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("%w: bill date %q is not yyyy-MM-dd", ErrInvalid, date)
	}
	return date, day, nil
}

// BillFacts says which refunds ReconcileBill looks at for this bill: those
// the bill lists and those submitted on its day. Collecting only these
// (RefundFacts) keeps a reconciliation's memory to a day's refunds.
func BillFacts(bill *wechatpay.Bill, date string) (func(*RefundFact) bool, error) {
	rows, err := bill.Refunds()
	if err != nil {
		return nil, err
	}
	_, day, err := billDay(rows, date)
	if err != nil {
		return nil, err
	}
	end := day.AddDate(0, 0, 1)
	inBill := make(map[string]bool, len(rows))
	for _, r := range rows {
		inBill[r.OutRefundNo] = true
	}
	return func(f *RefundFact) bool {
		return inBill[f.RefundNo] || (!f.SubmittedAt.IsZero() && !f.SubmittedAt.Before(day) && f.SubmittedAt.Before(end))
	}, nil
}

// RangeFacts says which refunds ReconcileProvider looks at: those requested
// in [from, to) (a zero bound is open).
func RangeFacts(from, to time.Time) func(*RefundFact) bool {
	return func(f *RefundFact) bool {
		return (from.IsZero() || !f.CreatedAt.Before(from)) && (to.IsZero() || f.CreatedAt.Before(to))
	}
}

// RefundFacts replays the journal one reservation at a time, on every
// core, and returns the facts of the refunds keep accepts (nil: all),
// oldest request first, as Facts does; and how many records did not
// decode. Its memory is the facts kept, not the journal.
func RefundFacts(ctx context.Context, db *journal.DB, keep func(*RefundFact) bool, progress func(uint64)) ([]RefundFact, int, error) {
	parts := make([][]RefundFact, foldWorkers())
	undecoded := make([]int, len(parts))
	err := foldStreams(ctx, db, true, progress, func(w int, f folded) {
		undecoded[w] += f.Undecoded
		if f.State == nil {
			return
		}
		for _, r := range f.State.Refunds {
			fact := factOf(f.Stream, f.State, r)
			if keep == nil || keep(&fact) {
				parts[w] = append(parts[w], fact)
			}
		}
	})
	if err != nil {
		return nil, 0, err
	}
	var out []RefundFact
	n := 0
	for i, p := range parts {
		out = append(out, p...)
		n += undecoded[i]
	}
	sortFacts(out)
	return out, n, nil
}

// billStatusAgrees explains a disagreement between a bill's 退款状态 and
// the journal's state, or returns "" when they agree.
func billStatusAgrees(status string, st reservation.RefundState) string {
	var ok bool
	switch strings.ToUpper(status) {
	case "SUCCESS":
		ok = st == reservation.Succeeded
	case "PROCESSING":
		// Later news in the journal is fine; REJECTED is not: WeChat Pay
		// accepted what the journal thinks was refused.
		ok = st != reservation.Rejected
	case "ABNORMAL":
		ok = st == reservation.Abnormal || st == reservation.Succeeded
	case "CLOSED", "REFUNDCLOSE":
		ok = st == reservation.Failed
	default:
		return fmt.Sprintf("bill status %q is not one this tool knows (journal %s)", status, st)
	}
	if ok {
		return ""
	}
	return fmt.Sprintf("bill says %s, journal says %s", status, st)
}

func origin(no string, prefixes []string) string {
	if prefixes == nil {
		return "the journal does not know it"
	}
	for _, p := range prefixes {
		if strings.HasPrefix(no, p+"-") {
			return "the number has this deployment's prefix " + p + ": a refund lost by a restore, or made by another deployment with the same prefix"
		}
	}
	return "not one of this deployment's numbers: made in the merchant platform or by another system"
}

// Querier asks the provider about one refund; actors.Provider and
// *wechatpay.Client satisfy it.
type Querier interface {
	Query(ctx context.Context, refundNo string) reservation.Outcome
}

// ProviderAnswer is a provider's answer, for reports.
type ProviderAnswer struct {
	Kind       reservation.OutcomeKind `json:"kind"`
	Code       string                  `json:"code,omitempty"`
	Amount     int64                   `json:"amount,omitempty"`
	OutTradeNo string                  `json:"out_trade_no,omitempty"`
	ProviderID string                  `json:"provider_id,omitempty"`
}

// ProviderOptions configures ReconcileProvider.
type ProviderOptions struct {
	// From and To bound the refunds' request times: From <= CreatedAt <
	// To. Zero means unbounded.
	From, To time.Time
	// Concurrency is how many queries run at once. Zero means 4.
	Concurrency int
	// Progress, if set, is called after each query with the count done and
	// the total.
	Progress func(done, total int)
}

// ProviderReport is what ReconcileProvider found.
type ProviderReport struct {
	Queried    int        `json:"queried"`
	Matched    int        `json:"matched"`
	Mismatches []Mismatch `json:"mismatches"`
	Notes      []Mismatch `json:"notes"`
	Failed     []Mismatch `json:"failed"` // queries without a definite answer
}

// OK reports whether every query answered and agreed.
func (r *ProviderReport) OK() bool { return len(r.Mismatches) == 0 && len(r.Failed) == 0 }

// ReconcileProvider queries the provider about every refund in the range
// by its refund number and compares the answer with the journal: state,
// amount and order. It only reads.
func ReconcileProvider(ctx context.Context, facts []RefundFact, q Querier, opts ProviderOptions) (*ProviderReport, error) {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	var todo []*RefundFact
	for i := range facts {
		f := &facts[i]
		if (!opts.From.IsZero() && f.CreatedAt.Before(opts.From)) || (!opts.To.IsZero() && !f.CreatedAt.Before(opts.To)) {
			continue
		}
		todo = append(todo, f)
	}
	answers := make([]reservation.Outcome, len(todo))
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
	)
	sem := make(chan struct{}, opts.Concurrency)
	for i, f := range todo {
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			answers[i] = q.Query(ctx, f.RefundNo)
			mu.Lock()
			done++
			if opts.Progress != nil {
				opts.Progress(done, len(todo))
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	rep := &ProviderReport{Mismatches: []Mismatch{}, Notes: []Mismatch{}, Failed: []Mismatch{}}
	for i, f := range todo {
		o := answers[i]
		rep.Queried++
		a := &ProviderAnswer{Kind: o.Kind, Code: o.Code, Amount: o.RefundAmount, OutTradeNo: o.OutTradeNo, ProviderID: o.ProviderID}
		m := Mismatch{RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: f, Provider: a}
		if o.Kind == reservation.OutcomeUnknown || o.Kind == reservation.OutcomeRejected || o.Kind == "" {
			m.Kind, m.Detail = "query_failed", fmt.Sprintf("no definite answer: %s %s %s", o.Kind, o.Code, o.Message)
			rep.Failed = append(rep.Failed, m)
			continue
		}
		ok := true
		if why, isNote := providerAgrees(o.Kind, f); why != "" {
			m.Kind, m.Detail = "status", why
			if isNote {
				m.Kind = "note"
				rep.Notes = append(rep.Notes, m)
			} else {
				ok = false
				rep.Mismatches = append(rep.Mismatches, m)
			}
		}
		if o.RefundAmount != 0 && o.RefundAmount != f.Amount {
			ok = false
			m.Kind, m.Detail = "amount", fmt.Sprintf("provider %s (%d fen), journal %s (%d fen)", Yuan(o.RefundAmount), o.RefundAmount, Yuan(f.Amount), f.Amount)
			rep.Mismatches = append(rep.Mismatches, m)
		}
		if o.OutTradeNo != "" && o.OutTradeNo != f.OutTradeNo {
			ok = false
			m.Kind, m.Detail = "order", fmt.Sprintf("provider order %s, journal order %s", o.OutTradeNo, f.OutTradeNo)
			rep.Mismatches = append(rep.Mismatches, m)
		}
		if ok {
			rep.Matched++
		}
	}
	return rep, nil
}

// providerAgrees explains a disagreement between a query answer and the
// journal's state ("" when they agree); note says it is expected to
// resolve itself rather than a mismatch.
func providerAgrees(k reservation.OutcomeKind, f *RefundFact) (why string, note bool) {
	st := f.State
	var ok bool
	switch k {
	case reservation.OutcomeNotFound:
		if st == reservation.Unknown {
			return "the provider has no such refund: the submission never arrived; the engine resubmits the same bytes", true
		}
		ok = st == reservation.Rejected || st == reservation.Failed || f.Attempts == 0
	case reservation.OutcomeSucceeded:
		ok = st == reservation.Succeeded
	case reservation.OutcomeProcessing:
		ok = st == reservation.Processing || st == reservation.Unknown
	case reservation.OutcomeFailed:
		ok = st == reservation.Failed
	case reservation.OutcomeAbnormal:
		ok = st == reservation.Abnormal || st == reservation.Succeeded
	}
	if ok {
		return "", false
	}
	return fmt.Sprintf("provider says %s, journal says %s", k, st), false
}
