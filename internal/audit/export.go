package audit

import (
	"container/list"
	"context"
	"encoding/json"
	"strconv"
	"time"

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
	return scanAll(ctx, db, opts.Progress, func(r journal.Record) error {
		rp, err := sc.before(ctx, r)
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
	})
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

type Stats struct {
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
	Merchants      map[string]*MerchantStats `json:"merchants"`
	OldestInFlight *InFlightRefund           `json:"oldest_in_flight,omitempty"`
	FileSize       int64                     `json:"file_size"`
	Epoch          uint64                    `json:"epoch"`
	Head           journal.Checkpoint        `json:"head"`
	LastCheckpoint *journal.Checkpoint       `json:"last_checkpoint,omitempty"`
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

func (m *MerchantStats) add(o *MerchantStats) {
	m.Reservations += o.Reservations
	m.Canceled += o.Canceled
	m.Refunds += o.Refunds
	m.Paid += o.Paid
	m.Refunded += o.Refunded
	m.InFlight += o.InFlight
	m.Released += o.Released
}

// StatsOptions selects what ComputeStats counts.
type StatsOptions struct {
	// Merchant, if set, limits the figures to that merchant's
	// reservations: records, event types and amounts. Records of streams
	// that never registered (or do not decode) name no merchant and are
	// left out then.
	Merchant string
	// Progress, if set, gets the number of records read so far.
	Progress func(uint64)
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

// ComputeStats reads the whole journal once.
func ComputeStats(ctx context.Context, db *journal.DB, opts StatsOptions) (*Stats, error) {
	// Each worker sums its reservations; the sums are merged after.
	parts := make([]*Stats, foldWorkers())
	for i := range parts {
		parts[i] = &Stats{EventTypes: map[string]int{}, RefundStates: map[string]int{}, Merchants: map[string]*MerchantStats{}}
	}
	err := foldStreams(ctx, db, opts.Progress, func(w int, f folded) {
		st := parts[w]
		s := f.State
		if opts.Merchant != "" && (s == nil || !s.Registered() || s.Merchant != opts.Merchant) {
			return
		}
		st.Records += uint64(len(f.Records) + f.Unreadable)
		for _, r := range f.Records {
			st.EventTypes[r.Type]++
		}
		st.Undecoded += f.Undecoded
		if f.Latest.After(st.AsOf) {
			st.AsOf = f.Latest
		}
		if s == nil || !s.Registered() {
			return
		}
		m := &MerchantStats{Reservations: 1, Paid: s.Amount, Refunded: s.Refunded(), InFlight: s.InFlight(), Refunds: len(s.Refunds)}
		if s.Status == reservation.StatusCanceled {
			m.Canceled = 1
		}
		for _, r := range s.Refunds {
			st.RefundStates[string(r.State)]++
			if r.State == reservation.Failed {
				m.Released += r.Amount
			}
			if r.State.Holds() && r.State != reservation.Succeeded {
				o := &InFlightRefund{ReservationID: f.Stream, RefundNo: r.No, State: string(r.State), Amount: r.Amount, CreatedAt: r.CreatedAt}
				if st.OldestInFlight == nil || olderInFlight(o, st.OldestInFlight) {
					st.OldestInFlight = o
				}
			}
		}
		st.add(s.Merchant, m)
	})
	if err != nil {
		return nil, err
	}
	st := parts[0]
	st.Merchant = opts.Merchant
	for _, p := range parts[1:] {
		st.Records += p.Records
		st.Undecoded += p.Undecoded
		for name, m := range p.Merchants {
			st.add(name, m)
		}
		for k, n := range p.EventTypes {
			st.EventTypes[k] += n
		}
		for k, n := range p.RefundStates {
			st.RefundStates[k] += n
		}
		if p.AsOf.After(st.AsOf) {
			st.AsOf = p.AsOf
		}
		if p.OldestInFlight != nil && (st.OldestInFlight == nil || olderInFlight(p.OldestInFlight, st.OldestInFlight)) {
			st.OldestInFlight = p.OldestInFlight
		}
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

// add counts m, one merchant's figures, in st's totals and under name.
func (st *Stats) add(name string, m *MerchantStats) {
	st.Reservations += m.Reservations
	st.Canceled += m.Canceled
	st.Refunds += m.Refunds
	st.Paid += m.Paid
	st.Refunded += m.Refunded
	st.InFlight += m.InFlight
	st.Released += m.Released
	if st.Merchants[name] == nil {
		st.Merchants[name] = &MerchantStats{}
	}
	st.Merchants[name].add(m)
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
