package audit

import (
	"container/list"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// scanBatch is how many records one read transaction returns.
const scanBatch = 2048

// Scanner is a journal read in global order: *journal.DB, or the
// PostgreSQL journal of cluster mode (*pgjournal.DB).
type Scanner interface {
	Scan(ctx context.Context, afterGlobal uint64, limit int) ([]journal.Record, error)
}

// scanAll calls fn with every record in global order, reading in batches,
// and progress (if set) with the count so far after each batch.
func scanAll(ctx context.Context, db Scanner, progress func(uint64), fn func(journal.Record) error) error {
	var after, n uint64
	for {
		recs, err := db.Scan(ctx, after, scanBatch)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
			after = r.Global
		}
		n += uint64(len(recs))
		if progress != nil {
			progress(n)
		}
		if len(recs) < scanBatch {
			return nil
		}
	}
}

// Replay rebuilds every reservation the journal holds, in global order.
// Events that do not decode are skipped (Verify reports them); the second
// result counts them.
func Replay(ctx context.Context, db *journal.DB, progress func(uint64)) (map[string]*reservation.State, int, error) {
	undecoded := 0
	rp := newReplayer(func(p Problem) {
		if p.Kind == "decode" {
			undecoded++
		}
	})
	err := scanAll(ctx, db, progress, func(r journal.Record) error {
		rp.apply(r)
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return rp.states, undecoded, nil
}

// Row is one event, flattened for auditors and spreadsheets.
type Row struct {
	Global      uint64          `json:"global"`
	Reservation string          `json:"reservation_id"`
	Merchant    string          `json:"merchant,omitempty"` // the reservation's; empty only for an event that does not decode
	Seq         uint64          `json:"seq"`
	At          time.Time       `json:"at"`
	Type        string          `json:"type"`
	Version     uint16          `json:"version"`
	By          string          `json:"by"`
	RefundNo    string          `json:"refund_no,omitempty"`
	Amount      int64           `json:"amount"`      // fen: the refund's amount, or the paid amount of a registration
	AmountYuan  string          `json:"amount_yuan"` // the same in yuan
	RefundState string          `json:"refund_state,omitempty"`
	Status      string          `json:"status"` // the reservation's status after the event
	Summary     string          `json:"summary"`
	Data        json.RawMessage `json:"data"`
	// ReasonCode and Metadata are the refund's, as requested, on every
	// event of a refund that has them, so a spreadsheet can group on them.
	ReasonCode string               `json:"reason_code,omitempty"`
	Metadata   reservation.Metadata `json:"metadata,omitzero"`
}

// RowHeader is the CSV header matching Row.CSV.
var RowHeader = []string{"global", "reservation_id", "merchant", "seq", "at", "type", "version", "by", "refund_no",
	"amount_fen", "amount_yuan", "refund_state", "status", "summary", "data", "reason_code", "metadata"}

// CSV returns the row's fields in RowHeader order.
func (r Row) CSV() []string {
	return []string{itoa(r.Global), r.Reservation, r.Merchant, itoa(r.Seq), r.At.UTC().Format(time.RFC3339Nano), r.Type,
		itoa(uint64(r.Version)), r.By, r.RefundNo, i64toa(r.Amount), r.AmountYuan, r.RefundState, r.Status, r.Summary, string(r.Data),
		r.ReasonCode, metadataCell(r.Metadata)}
}

// metadataCell is the metadata column: its JSON object, empty when none.
func metadataCell(m reservation.Metadata) string {
	if m.IsZero() {
		return ""
	}
	return string(m.AppendJSON(nil))
}

// ExportOptions selects the events to export.
type ExportOptions struct {
	// From and To bound the events' decision times: From <= At < To. Zero
	// means unbounded.
	From, To time.Time
	// Merchant, if set, keeps only the events of that merchant's
	// reservations. Events that do not decode name no merchant and are
	// left out then (Verify reports them).
	Merchant string
	// Progress, if set, gets the number of records read so far.
	Progress func(uint64)
	// Archive, if set, is the journal's archive (journal.OpenArchive):
	// its records are exported too, merged in global order.
	Archive *journal.Archive
}

// Export calls emit with every event in global order that falls in the
// range. Events that do not decode are exported with their raw type and no
// data (Verify reports them).
func Export(ctx context.Context, db *journal.DB, opts ExportOptions, emit func(Row) error) error {
	return export(ctx, db, opts, emit, exportCacheStates)
}

// export is Export keeping at most cached states.
func export(ctx context.Context, db *journal.DB, opts ExportOptions, emit func(Row) error, cached int) error {
	sc := newStateCache(db, cached)
	var arch *journal.ArchiveIter
	if opts.Archive != nil {
		var err error
		if arch, err = opts.Archive.Iter(); err != nil {
			return err
		}
		defer arch.Close()
	}
	// archivedBefore exports the archived records below global end.
	archivedBefore := func(end uint64) error {
		for arch != nil {
			if g, ok := arch.Peek(); !ok || g >= end {
				return nil
			}
			r, last, _ := arch.Next()
			if err := exportOne(ctx, sc, opts, emit, r, true, last); err != nil {
				return err
			}
		}
		return nil
	}
	err := scanAll(ctx, db, opts.Progress, func(r journal.Record) error {
		if err := archivedBefore(r.Global); err != nil {
			return err
		}
		return exportOne(ctx, sc, opts, emit, r, false, false)
	})
	if err != nil {
		return err
	}
	if err := archivedBefore(^uint64(0)); err != nil {
		return err
	}
	if arch != nil {
		return arch.Err()
	}
	return nil
}

// exportOne exports record r, of the hot journal or (archived, last when
// it is its stream's last) of the archive.
func exportOne(ctx context.Context, sc *stateCache, opts ExportOptions, emit func(Row) error, r journal.Record, archived, last bool) error {
	before := sc.before
	if archived {
		before = func(ctx context.Context, r journal.Record) (*replayer, error) { return sc.beforeArchived(ctx, r, last) }
	}
	rp, err := before(ctx, r)
	if err != nil {
		return err
	}
	e, st, ok := rp.apply(r)
	defer sc.after(r)
	if !ok {
		if opts.Merchant != "" {
			return nil
		}
		return emit(Row{Global: r.Global, Reservation: r.Stream, Seq: r.Seq, Type: r.Type, Version: r.Version,
			Summary: "cannot decode", Data: json.RawMessage("null")})
	}
	if (!opts.From.IsZero() && e.At.Before(opts.From)) || (!opts.To.IsZero() && !e.At.Before(opts.To)) ||
		(opts.Merchant != "" && st.Merchant != opts.Merchant) {
		return nil
	}
	row := Row{Global: r.Global, Reservation: r.Stream, Merchant: st.Merchant, Seq: r.Seq, At: e.At, Type: r.Type, Version: r.Version,
		By: e.By, RefundNo: reservation.RefundNoOf(e.Data), Status: string(st.Status), Summary: Describe(e)}
	row.Data, _ = json.Marshal(e.Data)
	switch {
	case row.RefundNo != "":
		if rf := st.Refund(row.RefundNo); rf != nil {
			row.Amount, row.RefundState = rf.Amount, string(rf.State)
			row.ReasonCode, row.Metadata = rf.ReasonCode, rf.Metadata
		}
	case r.Type == reservation.TypeRegistered:
		row.Amount = st.Amount
	case r.Type == reservation.TypeCanceled:
		row.Amount = st.Refunded()
	}
	row.AmountYuan = Yuan(row.Amount)
	return emit(row)
}

// Stats are the journal's figures.
// exportCacheStates is how many reservations Export keeps the state of.
const exportCacheStates = 1 << 16

// stateCache keeps the states of the reservations a walk in global order
// is in the middle of, at most max: a reservation leaves it after its last
// event (its stream's head), or, when more than max are open at once, the
// one least recently used does, and is replayed again from the journal if
// it has more events. Memory is bounded whatever the journal's size.
type stateCache struct {
	db    *journal.DB
	max   int
	rp    *replayer
	heads map[string]uint64
	lru   *list.List // of stream ids, most recent at the front
	elems map[string]*list.Element
}

func newStateCache(db *journal.DB, max int) *stateCache {
	rp := newReplayer(nil)
	rp.foldOnly = true
	return &stateCache{db: db, max: max, rp: rp, heads: map[string]uint64{}, lru: list.New(), elems: map[string]*list.Element{}}
}

// before makes the replayer hold r's stream's state before r and returns
// it.
func (c *stateCache) before(ctx context.Context, r journal.Record) (*replayer, error) {
	if el, ok := c.elems[r.Stream]; ok {
		c.lru.MoveToFront(el)
		return c.rp, nil
	}
	head, err := c.db.Head(ctx, r.Stream)
	if err != nil {
		return nil, err
	}
	if r.Seq > 1 {
		// Evicted while it still had events to come: replay it up to r.
		recs, err := c.db.Load(ctx, r.Stream, 0)
		if err != nil {
			return nil, err
		}
		for _, p := range recs {
			if p.Seq >= r.Seq {
				break
			}
			c.rp.apply(p)
		}
	}
	c.heads[r.Stream] = head
	c.elems[r.Stream] = c.lru.PushFront(r.Stream)
	for c.lru.Len() > c.max {
		c.forget(c.lru.Back().Value.(string))
	}
	return c.rp, nil
}

// beforeArchived is before for a record of the archive; last says it is
// its stream's last.
func (c *stateCache) beforeArchived(ctx context.Context, r journal.Record, last bool) (*replayer, error) {
	if el, ok := c.elems[r.Stream]; ok {
		c.lru.MoveToFront(el)
		if last {
			c.heads[r.Stream] = r.Seq
		}
		return c.rp, nil
	}
	if r.Seq > 1 {
		// Evicted while it still had events to come: replay it up to r.
		recs, archived, err := c.db.LoadArchived(ctx, r.Stream)
		if err != nil {
			return nil, err
		}
		if !archived {
			return nil, fmt.Errorf("%w: stream %q is in the archive but not archived", journal.ErrCorrupt, r.Stream)
		}
		for _, p := range recs {
			if p.Seq >= r.Seq {
				break
			}
			c.rp.apply(p)
		}
	}
	c.heads[r.Stream] = ^uint64(0) // until its last record
	if last {
		c.heads[r.Stream] = r.Seq
	}
	c.elems[r.Stream] = c.lru.PushFront(r.Stream)
	for c.lru.Len() > c.max {
		c.forget(c.lru.Back().Value.(string))
	}
	return c.rp, nil
}

// after drops r's stream once r is its last event.
func (c *stateCache) after(r journal.Record) {
	if r.Seq >= c.heads[r.Stream] {
		c.forget(r.Stream)
	}
}

func (c *stateCache) forget(id string) {
	if el, ok := c.elems[id]; ok {
		c.lru.Remove(el)
		delete(c.elems, id)
	}
	delete(c.heads, id)
	delete(c.rp.states, id)
	delete(c.rp.broken, id)
}

// Stats is what the journal holds in figures (refundctl journal stats).
type Stats struct {
	// Source is where the figures come from: "counters" (kept by every
	// append, read in one transaction) or "fold" (every reservation
	// replayed: a journal from before the counters, or StatsOptions.Fold).
	Source string `json:"source"`
	// Merchant is the merchant the figures are limited to (StatsOptions);
	// empty for the whole journal.
	Merchant     string         `json:"merchant,omitempty"`
	Records      uint64         `json:"records"`
	Undecoded    int            `json:"undecoded"`
	Reservations int            `json:"reservations"`
	Canceled     int            `json:"canceled"`
	EventTypes   map[string]int `json:"event_types"`
	RefundStates map[string]int `json:"refund_states"`
	Refunds      int            `json:"refunds"`
	// Amounts in fen: paid (registered), refunded (SUCCEEDED), in flight
	// (held, not yet succeeded), released (FAILED).
	Paid     int64 `json:"paid"`
	Refunded int64 `json:"refunded"`
	InFlight int64 `json:"in_flight"`
	Released int64 `json:"released"`
	// AsOf is the time of the latest event: ages are measured from it, so
	// a backup gives the same answer on any day.
	AsOf time.Time `json:"as_of,omitzero"`
	// Merchants splits the reservation figures by merchant.
	Merchants map[string]*MerchantStats `json:"merchants"`
	// OldestInFlight is found by the fold only: no counter keeps it.
	OldestInFlight *InFlightRefund     `json:"oldest_in_flight,omitempty"`
	FileSize       int64               `json:"file_size"`
	Epoch          uint64              `json:"epoch"`
	Head           journal.Checkpoint  `json:"head"`
	LastCheckpoint *journal.Checkpoint `json:"last_checkpoint,omitempty"`
}

// InFlightRefund is a refund that holds money and has not succeeded.
type InFlightRefund struct {
	ReservationID string        `json:"reservation_id"`
	RefundNo      string        `json:"refund_no"`
	State         string        `json:"state"`
	Amount        int64         `json:"amount"`
	CreatedAt     time.Time     `json:"created_at"`
	Age           time.Duration `json:"age_ns"`
}

// MerchantStats are one merchant's reservation figures; amounts in fen as
// in Stats.
type MerchantStats struct {
	Reservations int   `json:"reservations"`
	Canceled     int   `json:"canceled"`
	Refunds      int   `json:"refunds"`
	Paid         int64 `json:"paid"`
	Refunded     int64 `json:"refunded"`
	InFlight     int64 `json:"in_flight"`
	Released     int64 `json:"released"`
}

// StatsOptions configures ComputeStats.
type StatsOptions struct {
	// Fold replays every reservation even when the journal keeps
	// counters: slower, and it finds the oldest refund in flight.
	Fold bool
	// Merchant, if set, limits the figures to that merchant's
	// reservations: records, event types and amounts. Counters keep only
	// a merchant's totals, so this folds. Records of streams that never
	// registered (or do not decode) name no merchant and are left out.
	Merchant string
	// Progress, when set, is called with the records folded so far.
	Progress func(uint64)
}

// ComputeStats reads the journal's counters (journal.DB.Counters), or folds
// every reservation when the journal has none that cover it all (a file
// from before them) or opts.Fold asks.
func ComputeStats(ctx context.Context, db *journal.DB, opts StatsOptions) (*Stats, error) {
	st := &Stats{EventTypes: map[string]int{}, RefundStates: map[string]int{}, Merchants: map[string]*MerchantStats{},
		Merchant: opts.Merchant}
	counts, err := db.Counters(ctx)
	if err != nil {
		return nil, err
	}
	if counts.Complete && !opts.Fold && opts.Merchant == "" {
		st.Source = "counters"
		st.Records = counts.LastGlobal
		st.fromCounts(counts.Values)
	} else {
		st.Source = "fold"
		f, err := foldCounts(ctx, db, opts.Merchant, opts.Progress)
		if err != nil {
			return nil, err
		}
		st.Records, st.Undecoded, st.OldestInFlight = f.records, f.undecoded, f.oldest
		st.fromCounts(f.values)
	}
	if st.OldestInFlight != nil {
		st.OldestInFlight.Age = st.AsOf.Sub(st.OldestInFlight.CreatedAt)
	}
	if st.FileSize, err = db.Size(ctx); err != nil {
		return nil, err
	}
	if st.Epoch, err = db.Epoch(ctx); err != nil {
		return nil, err
	}
	if st.Head, err = db.ChainHead(ctx); err != nil {
		return nil, err
	}
	if cp, ok, err := db.LastCheckpoint(ctx); err != nil {
		return nil, err
	} else if ok {
		st.LastCheckpoint = &cp
	}
	return st, nil
}

// fromCounts sets the figures that counters keep (eventstore.Count*).
func (st *Stats) fromCounts(v map[string]int64) {
	for k, n := range v {
		switch {
		case k == eventstore.CountReservations:
			st.Reservations = int(n)
		case k == eventstore.CountCanceled:
			st.Canceled = int(n)
		case k == eventstore.CountRefunds:
			st.Refunds = int(n)
		case k == eventstore.CountPaid:
			st.Paid = n
		case k == eventstore.CountRefunded:
			st.Refunded = n
		case k == eventstore.CountInFlight:
			st.InFlight = n
		case k == eventstore.CountReleased:
			st.Released = n
		case k == eventstore.CountLatest:
			st.AsOf = time.Unix(0, n).UTC()
		case strings.HasPrefix(k, eventstore.CountRefundState) && n != 0:
			st.RefundStates[k[len(eventstore.CountRefundState):]] = int(n)
		case strings.HasPrefix(k, eventstore.CountEvents) && n != 0:
			st.EventTypes[k[len(eventstore.CountEvents):]] = int(n)
		case strings.HasPrefix(k, eventstore.CountMerchant):
			st.merchantCount(k[len(eventstore.CountMerchant):], n)
		}
	}
}

// merchantCount sets one of a merchant's totals from its counter,
// "NAME/TOTAL" (eventstore.CountMerchant).
func (st *Stats) merchantCount(key string, n int64) {
	i := strings.LastIndexByte(key, '/')
	if i <= 0 {
		return
	}
	m := st.Merchants[key[:i]]
	if m == nil {
		m = &MerchantStats{}
		st.Merchants[key[:i]] = m
	}
	switch key[i+1:] {
	case eventstore.CountReservations:
		m.Reservations = int(n)
	case eventstore.CountCanceled:
		m.Canceled = int(n)
	case eventstore.CountRefunds:
		m.Refunds = int(n)
	case eventstore.CountPaid:
		m.Paid = n
	case eventstore.CountRefunded:
		m.Refunded = n
	case eventstore.CountInFlight:
		m.InFlight = n
	case eventstore.CountReleased:
		m.Released = n
	}
}

// folding is what foldCounts found.
type folding struct {
	values    map[string]int64 // the counters, as the events make them
	records   uint64
	undecoded int
	oldest    *InFlightRefund
	readAt    uint64 // the log's end before the fold
}

// tally adds one replayed reservation to the counter values: its share
// (eventstore.Tally), its records by type, its latest event.
func tally(values map[string]int64, recs []journal.Record, st *reservation.State, latest time.Time) {
	for _, r := range recs {
		values[eventstore.CountEvents+r.Type]++
	}
	eventstore.Tally(st, 1, func(k string, n int64) { values[k] += n })
	if n, ok := eventstore.LatestNanos(latest); ok && n > values[eventstore.CountLatest] {
		values[eventstore.CountLatest] = n
	}
}

// mergeCounts adds b to a.
func mergeCounts(a, b map[string]int64) {
	for k, n := range b {
		if k == eventstore.CountLatest {
			a[k] = max(a[k], n)
		} else {
			a[k] += n
		}
	}
}

// foldCounts replays every reservation (of merchant only, if set) and
// computes the counters.
func foldCounts(ctx context.Context, db *journal.DB, merchant string, progress func(uint64)) (*folding, error) {
	last, err := db.LastGlobal(ctx)
	if err != nil {
		return nil, err
	}
	parts := make([]*folding, foldWorkers())
	for i := range parts {
		parts[i] = &folding{values: map[string]int64{}}
	}
	err = foldStreams(ctx, db, true, progress, func(w int, f folded) {
		p := parts[w]
		if merchant != "" && (!f.State.Registered() || f.State.Merchant != merchant) {
			return
		}
		p.records += uint64(len(f.Records) + f.Unreadable)
		p.undecoded += f.Undecoded
		tally(p.values, f.Records, f.State, f.Latest)
		s := f.State
		if !s.Registered() {
			return
		}
		for _, r := range s.Refunds {
			if r.State.Holds() && r.State != reservation.Succeeded {
				o := &InFlightRefund{ReservationID: f.Stream, RefundNo: r.No, State: string(r.State), Amount: r.Amount, CreatedAt: r.CreatedAt}
				if p.oldest == nil || olderInFlight(o, p.oldest) {
					p.oldest = o
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	all := parts[0]
	for _, p := range parts[1:] {
		all.records += p.records
		all.undecoded += p.undecoded
		mergeCounts(all.values, p.values)
		if p.oldest != nil && (all.oldest == nil || olderInFlight(p.oldest, all.oldest)) {
			all.oldest = p.oldest
		}
	}
	all.readAt = last
	return all, nil
}

// BuildCounters folds every reservation and stores the counters it finds
// (journal.DB.SetCounters), marking them complete: for a journal written
// before they were kept. db must be open for writing, by nobody else (the
// file lock sees to that); the counters are replaced in one transaction, so
// a crash leaves the old ones. It returns the counters stored and the
// global they count up to.
func BuildCounters(ctx context.Context, db *journal.DB, progress func(uint64)) (map[string]int64, uint64, error) {
	f, err := foldCounts(ctx, db, "", progress)
	if err != nil {
		return nil, 0, err
	}
	if f.undecoded > 0 {
		return nil, 0, fmt.Errorf("%w: %d records do not decode (run refundctl journal verify); counters would not match the events", ErrInvalid, f.undecoded)
	}
	if err := db.SetCounters(ctx, f.readAt, f.values); err != nil {
		return nil, 0, err
	}
	return f.values, f.readAt, nil
}

// olderInFlight orders refunds in flight by request time, then
// reservation, so the oldest is the same whichever worker found it.
func olderInFlight(a, b *InFlightRefund) bool {
	if !a.CreatedAt.Equal(b.CreatedAt) {
		return a.CreatedAt.Before(b.CreatedAt)
	}
	return a.ReservationID < b.ReservationID
}

func itoa(v uint64) string  { return strconv.FormatUint(v, 10) }
func i64toa(v int64) string { return strconv.FormatInt(v, 10) }
