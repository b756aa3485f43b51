package audit

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// EpochPrefix is the refund-number prefix in force in an epoch: base for
// epoch 0, base+"E"+epoch after restores ("R" -> "RE1", "RE2", ...). A
// restored journal has lost the refunds made after its backup; starting a
// new prefix means their numbers are never issued again for different
// requests. The result must stay within the 16 characters a prefix may
// have: a base of at most 13 characters leaves room for epoch 99.
func EpochPrefix(base string, epoch uint64) (string, error) {
	if base == "" || (reservation.Policy{RefundNoPrefix: base}).Validate() != nil {
		return "", fmt.Errorf("%w: refund-number prefix %q must be 1..16 of [0-9A-Za-z]", ErrInvalid, base)
	}
	if epoch == 0 {
		return base, nil
	}
	p := base + "E" + strconv.FormatUint(epoch, 10)
	if (reservation.Policy{RefundNoPrefix: p}).Validate() != nil {
		return "", fmt.Errorf("%w: refund-number prefix %q of epoch %d is longer than 16 characters: use a shorter base prefix than %q",
			ErrInvalid, p, epoch, base)
	}
	return p, nil
}

// EpochPrefixes returns the prefixes of epochs 0..epoch, for recognising
// this deployment's refund numbers.
func EpochPrefixes(base string, epoch uint64) ([]string, error) {
	var out []string
	for e := uint64(0); e <= epoch; e++ {
		p, err := EpochPrefix(base, e)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// Executor applies a command to a reservation; *actors.Engine satisfies
// it.
type Executor interface {
	Execute(ctx context.Context, id, by string, cmd reservation.Command) (*reservation.State, []reservation.Event, error)
}

// RestoreCheckOptions configures ReconcileAfterRestore.
type RestoreCheckOptions struct {
	// BasePrefix is refundd's configured refund-number prefix (epoch 0).
	// Required to look for refunds lost with the restore, unless
	// BasePrefixes is set.
	BasePrefix string
	// BasePrefixes are the base prefixes of the configured merchants, by
	// name (a merchants file): a reservation's lost refunds are looked for
	// under its merchant's prefix. Nil means BasePrefix for every
	// reservation. A reservation of a merchant not in it is left out of
	// both steps: its refunds cannot be queried (no account), and it takes
	// no new refund (reservation.ErrMerchantNotConfigured), so nothing can
	// be paid twice through it.
	BasePrefixes map[string]string
	// By is recorded as the cause of the outcomes applied. Empty means
	// "reconcile".
	By string
	// MaxProbe bounds how many numbers past a reservation's last known one
	// are asked about, per lost epoch. Zero means 99 (the most refunds a
	// reservation can have).
	MaxProbe int
	// MaxGap is how many numbers in a row the provider may not know before
	// the probe of a reservation stops. A number can be missing at the
	// provider with later ones present: a refund refused on its first
	// attempt (NOT_ENOUGH, say) never exists there. Zero means 5. Longer
	// runs of refusals hide what follows them from this check; only the
	// bills of the days since the backup (ReconcileBill) show everything.
	MaxGap int
}

// RestoreCheck is what ReconcileAfterRestore did.
type RestoreCheck struct {
	// Checked counts the refunds that were in flight in the journal and
	// were queried; Applied counts the answers applied to them.
	Checked int `json:"checked"`
	Applied int `json:"applied"`
	// Lost are refunds the provider has under numbers this deployment
	// issued in an epoch before the restore, that the restored journal
	// did not hold: made after the backup and lost with it. Each is
	// journaled as recovered (reservation.RecordRecovered), with the
	// provider's amount, state and id, so that the refundable amount
	// counts it; one that could not be is in Failed as well. Operators
	// still check them against what clients asked for (docs/AUDIT.md).
	Lost []Mismatch `json:"lost"`
	// Failed are queries without a definite answer and answers the engine
	// refused; the reconciliation is not complete while there are any.
	Failed []Mismatch `json:"failed"`
}

// Done reports whether every in-flight refund got a definite answer that
// was applied, so the reconcile-required flag may be cleared.
func (c *RestoreCheck) Done() bool { return len(c.Failed) == 0 }

// ReconcileAfterRestore is what refundd runs when it starts on a restored
// journal (journal.DB.ReconcileRequired), before it takes new refund
// requests:
//
//  1. every refund the journal holds in flight (not SUCCEEDED or FAILED)
//     is queried with the provider and the answer applied through ex, as a
//     query outcome (so the state machine decides, and journals, as usual);
//  2. for every reservation, the refund numbers that the epochs between
//     the backup and the restore would have issued next are queried, until
//     opts.MaxGap of them in a row are unknown to the provider: a refund
//     found there was made after the backup; it is journaled through ex
//     as recovered (so it counts against what is refundable before any
//     new request is taken) and reported in Lost. A run again after a
//     crash finds those already journaled and reports them again without
//     journaling anything twice.
//
// Refunds of reservations registered after the backup are not in the
// journal at all: only the daily bill shows them (ReconcileBill). The
// caller clears the flag when the result is Done.
func ReconcileAfterRestore(ctx context.Context, db *journal.DB, q Querier, ex Executor, opts RestoreCheckOptions) (*RestoreCheck, error) {
	if opts.By == "" {
		opts.By = "reconcile"
	}
	if opts.MaxProbe <= 0 {
		opts.MaxProbe = 99
	}
	if opts.MaxGap <= 0 {
		opts.MaxGap = 5
	}
	states, _, err := Replay(ctx, db, nil)
	if err != nil {
		return nil, err
	}
	info, err := db.LastRestore(ctx)
	if err != nil {
		return nil, err
	}
	epoch, err := db.Epoch(ctx)
	if err != nil {
		return nil, err
	}
	baseOf := func(s *reservation.State) (string, bool) {
		if opts.BasePrefixes == nil {
			return opts.BasePrefix, true
		}
		p, ok := opts.BasePrefixes[s.Merchant]
		return p, ok
	}
	rep := &RestoreCheck{Lost: []Mismatch{}, Failed: []Mismatch{}}
	for _, f := range Facts(states) {
		if f.State.Terminal() {
			continue
		}
		if s := states[f.ReservationID]; s != nil {
			if _, ok := baseOf(s); !ok {
				continue
			}
		}
		f := f
		rep.Checked++
		o := q.Query(ctx, f.RefundNo)
		if o.Kind == reservation.OutcomeUnknown || o.Kind == "" {
			rep.Failed = append(rep.Failed, Mismatch{Kind: "query_failed", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: &f,
				Detail: fmt.Sprintf("no definite answer: %s %s", o.Code, o.Message)})
			continue
		}
		_, _, err := ex.Execute(ctx, f.ReservationID, opts.By, reservation.RecordOutcome{RefundNo: f.RefundNo, Source: reservation.SourceQuery, Outcome: o})
		if err != nil {
			rep.Failed = append(rep.Failed, Mismatch{Kind: "not_applied", RefundNo: f.RefundNo, ReservationID: f.ReservationID, Journal: &f,
				Provider: &ProviderAnswer{Kind: o.Kind, Code: o.Code, Amount: o.RefundAmount, OutTradeNo: o.OutTradeNo, ProviderID: o.ProviderID},
				Detail:   err.Error()})
			continue
		}
		rep.Applied++
	}
	if info == nil {
		return rep, nil
	}
	if opts.BasePrefix == "" && opts.BasePrefixes == nil {
		return nil, fmt.Errorf("%w: the base refund-number prefix is needed to look for lost refunds", ErrInvalid)
	}
	ids := make([]string, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	bases := []string{opts.BasePrefix}
	if opts.BasePrefixes != nil {
		bases = bases[:0]
		for _, b := range opts.BasePrefixes {
			bases = append(bases, b)
		}
	}
	lostPrefixes := map[string]bool{}
	for e := info.BackupEpoch; e < epoch; e++ {
		for _, b := range bases {
			prefix, err := EpochPrefix(b, e)
			if err != nil {
				return nil, err
			}
			lostPrefixes[prefix] = true
		}
	}
	for e := info.BackupEpoch; e < epoch; e++ {
		for _, id := range ids {
			s := states[id]
			if !s.Registered() || (s.Status == reservation.StatusCanceled && !hasRecovered(s, lostPrefixes)) {
				continue
			}
			basePrefix, ok := baseOf(s)
			if !ok {
				continue
			}
			prefix, err := EpochPrefix(basePrefix, e)
			if err != nil {
				return nil, err
			}
			base := probeBase(s, lostPrefixes)
			gap := 0
			for n := base + 1; n <= base+opts.MaxProbe && gap < opts.MaxGap; n++ {
				no := reservation.RefundNo(prefix, id, n)
				if r := s.Refund(no); r != nil {
					if r.Recovered {
						// Journaled by an earlier run of this check.
						gap = 0
						rep.Lost = append(rep.Lost, Mismatch{Kind: "lost_refund", RefundNo: no, ReservationID: id,
							Provider: &ProviderAnswer{Kind: reservation.OutcomeKind(r.State), Amount: r.Amount, OutTradeNo: s.OutTradeNo, ProviderID: r.ProviderID},
							Detail: fmt.Sprintf("the provider has %s %s for order %s, made after the backup (epoch %d); journaled as recovered",
								r.State, Yuan(r.Amount), s.OutTradeNo, e)})
					}
					continue
				}
				o := q.Query(ctx, no)
				if err := ctx.Err(); err != nil {
					return nil, err
				}
				if o.Kind == reservation.OutcomeNotFound {
					gap++
					continue
				}
				gap = 0
				m := Mismatch{RefundNo: no, ReservationID: id,
					Provider: &ProviderAnswer{Kind: o.Kind, Code: o.Code, Amount: o.RefundAmount, OutTradeNo: o.OutTradeNo, ProviderID: o.ProviderID}}
				if o.Kind == reservation.OutcomeUnknown || o.Kind == "" {
					m.Kind, m.Detail = "query_failed", fmt.Sprintf("no definite answer: %s %s", o.Code, o.Message)
					rep.Failed = append(rep.Failed, m)
					break
				}
				m.Kind = "lost_refund"
				m.Detail = fmt.Sprintf("the provider has %s %s for order %s, made after the backup (epoch %d); journaled as recovered",
					o.Kind, Yuan(o.RefundAmount), o.OutTradeNo, e)
				if _, _, err := ex.Execute(ctx, id, opts.By, reservation.RecordRecovered{RefundNo: no, Outcome: o}); err != nil {
					if cerr := ctx.Err(); cerr != nil {
						return nil, cerr
					}
					m.Detail = fmt.Sprintf("the provider has %s %s for order %s, made after the backup (epoch %d); not journaled: %v",
						o.Kind, Yuan(o.RefundAmount), o.OutTradeNo, e, err)
					f := m
					f.Kind = "not_applied"
					rep.Failed = append(rep.Failed, f)
				}
				rep.Lost = append(rep.Lost, m)
			}
		}
	}
	return rep, nil
}

// probeBase is how many refunds the reservation had in the backup: a
// number the lost epochs issued came after them. Refunds this check
// recovered (with a lost epoch's prefix) were not in the backup and do not
// count, so that a run again after a crash probes the same numbers.
func probeBase(s *reservation.State, lostPrefixes map[string]bool) int {
	n := len(s.Refunds)
	for _, r := range s.Refunds {
		if prefix, _, _, ok := reservation.ParseRefundNo(r.No); r.Recovered && ok && lostPrefixes[prefix] {
			n--
		}
	}
	return n
}

// hasRecovered reports whether the check recovered refunds of s already.
func hasRecovered(s *reservation.State, lostPrefixes map[string]bool) bool {
	return probeBase(s, lostPrefixes) != len(s.Refunds)
}

// ResumeAfterRestore runs ReconcileAfterRestore until it is Done, waiting
// between runs from one second, doubling up to a minute; then it clears
// the journal's reconcile-required flag and calls resumed (refundd then
// takes refund requests again). It logs every run that falls short, and
// every refund found lost with the restore, at ERROR: operators check
// those against what clients asked for (docs/AUDIT.md). It returns when
// ctx ends, possibly without calling resumed.
func ResumeAfterRestore(ctx context.Context, db *journal.DB, q Querier, ex Executor, opts RestoreCheckOptions, log *slog.Logger, resumed func()) {
	wait := time.Second
	for {
		rc, err := ReconcileAfterRestore(ctx, db, q, ex, opts)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Error("reconciliation after restore failed; retrying", "err", err, "retry_in", wait)
		case !rc.Done():
			log.Warn("reconciliation after restore incomplete; retrying", "checked", rc.Checked, "applied", rc.Applied, "failed", len(rc.Failed), "retry_in", wait)
			for _, f := range rc.Failed {
				log.Warn("reconciliation after restore: refund not settled", "kind", f.Kind, "refund_no", f.RefundNo, "reservation", f.ReservationID, "detail", f.Detail)
			}
		default:
			for _, l := range rc.Lost {
				log.Error("refund lost with the restore: made after the backup, journaled again from WeChat Pay as recovered; check it against the client's requests (docs/AUDIT.md)",
					"refund_no", l.RefundNo, "reservation", l.ReservationID, "detail", l.Detail)
			}
			if err := db.ClearReconcileRequired(ctx); err != nil {
				log.Error("clearing the reconcile flag failed; retrying", "err", err)
				break
			}
			resumed()
			log.Info("reconciliation after restore done; refunds resume", "checked", rc.Checked, "applied", rc.Applied, "lost", len(rc.Lost))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Minute)
	}
}

// RestoreGate holds refund requests back while a restored journal is
// reconciled: from Check, which finds the journal's reconcile-required
// flag, until Reconcile is done. The zero value lets refunds through.
type RestoreGate struct{ reason atomic.Pointer[string] }

// Check pauses refunds when db was restored from a backup and is not
// reconciled yet, and reports whether it did; then run Reconcile.
func (g *RestoreGate) Check(ctx context.Context, db *journal.DB) (bool, error) {
	pending, err := db.ReconcileRequired(ctx)
	if err != nil || pending == nil {
		return false, err
	}
	reason := fmt.Sprintf("refunds are paused: the journal was restored from a backup (epoch %d) and is being reconciled with WeChat Pay", pending.Epoch)
	g.reason.Store(&reason)
	return true, nil
}

// Paused says why refund requests are refused; empty while they are
// taken (api.AuditConfig.RefundsPaused).
func (g *RestoreGate) Paused() string {
	if p := g.reason.Load(); p != nil {
		return *p
	}
	return ""
}

// Reconcile runs ResumeAfterRestore and lets refunds through once it is
// done.
func (g *RestoreGate) Reconcile(ctx context.Context, db *journal.DB, q Querier, ex Executor, opts RestoreCheckOptions, log *slog.Logger) {
	ResumeAfterRestore(ctx, db, q, ex, opts, log, func() { g.reason.Store(nil) })
}
