package eventstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// The list index is a part of the marks index: one key per row
// (reservation.ListRow), every field a list filters by in the key, so that
// a list reads keys only, never the log:
//
//	list/refund/MERCHANT/STATE/AT/RESERVATION/REFUND_NO/AMOUNT/UPDATED/REASON_CODE
//	list/reservation/MERCHANT/AT/RESERVATION/STATUS/AMOUNT/UPDATED/REFUND_STATES
//
// AT is the row's order time inverted (^UnixNano, 16 hex digits), so
// ascending keys are newest first; AMOUNT, UPDATED (UnixNano) and
// REFUND_STATES are 16 hex digits, REASON_CODE path-escaped. A refund's
// state comes before its time, so a list of some states reads those
// states' keys only; every list reads one prefix per merchant (and state)
// and merges them by position.
const (
	ListPrefix            = "list/"
	listRefundPrefix      = ListPrefix + reservation.ListRefunds + "/"
	listReservationPrefix = ListPrefix + reservation.ListReservations + "/"
)

// ListMarkKey is the marks-index key of list row r.
func ListMarkKey(r reservation.ListRow) string {
	var b strings.Builder
	b.Grow(len(ListPrefix) + len(r.Kind) + len(r.Merchant) + len(r.State) + len(r.ReservationID) + len(r.RefundNo) + len(r.ReasonCode) + 4*16 + 10)
	if r.Kind == reservation.ListRefunds {
		b.WriteString(listRefundPrefix)
		b.WriteString(r.Merchant)
		b.WriteByte('/')
		b.WriteString(r.State)
		b.WriteByte('/')
		writePosition(&b, r)
		writeHex(&b, uint64(r.Amount))
		b.WriteByte('/')
		writeHex(&b, nanos(r.UpdatedAt))
		b.WriteByte('/')
		b.WriteString(url.PathEscape(r.ReasonCode))
		return b.String()
	}
	b.WriteString(listReservationPrefix)
	b.WriteString(r.Merchant)
	b.WriteByte('/')
	writePosition(&b, r)
	b.WriteString(r.State)
	b.WriteByte('/')
	writeHex(&b, uint64(r.Amount))
	b.WriteByte('/')
	writeHex(&b, nanos(r.UpdatedAt))
	b.WriteByte('/')
	writeHex(&b, uint64(r.RefundStates))
	return b.String()
}

// position is where r stands in its list: "AT/RESERVATION/" and, for a
// refund, "REFUND_NO/". Keys of one prefix sort as their positions do
// (ids hold no '/', and no position is a prefix of another), so
// positions of different prefixes merge into one order; a list's cursor
// is a position.
func position(r reservation.ListRow) string {
	var b strings.Builder
	writePosition(&b, r)
	return b.String()
}

func writePosition(b *strings.Builder, r reservation.ListRow) {
	writeHex(b, ^nanos(r.At))
	b.WriteByte('/')
	b.WriteString(r.ReservationID)
	b.WriteByte('/')
	if r.Kind == reservation.ListRefunds {
		b.WriteString(r.RefundNo)
		b.WriteByte('/')
	}
}

func nanos(t time.Time) uint64 {
	if t.IsZero() || t.UnixNano() < 0 {
		return 0
	}
	return uint64(t.UnixNano())
}

func writeHex(b *strings.Builder, v uint64) {
	const digits = "0123456789abcdef"
	for i := 60; i >= 0; i -= 4 {
		b.WriteByte(digits[(v>>uint(i))&0xf])
	}
}

// ListMarks appends to dst the marks of list rows (AppendIndexes' Rows).
func ListMarks(dst []journal.Mark, rows []reservation.ListRow) []journal.Mark {
	for _, r := range rows {
		dst = append(dst, journal.Mark{Key: ListMarkKey(r), Clear: r.Clear})
	}
	return dst
}

// ListKeyReservation is the reservation a list index key belongs to, or
// false for a key that is not a well-formed list row (journal verify
// finds the owner of a row no state implies by it).
func ListKeyReservation(key string) (string, bool) {
	for _, kind := range []string{reservation.ListRefunds, reservation.ListReservations} {
		if strings.HasPrefix(key, ListPrefix+kind+"/") {
			r, _, err := parseListKey(kind, key)
			return r.ReservationID, err == nil
		}
	}
	return "", false
}

// parseListKey is the row of a list key of kind, and its position. The
// row's strings and the position are parts of key: a page reads thousands
// of keys, and parsing one allocates nothing.
func parseListKey(kind, key string) (reservation.ListRow, string, error) {
	bad := func() (reservation.ListRow, string, error) {
		return reservation.ListRow{}, "", fmt.Errorf("eventstore: malformed list key %q", key)
	}
	r := reservation.ListRow{Kind: kind}
	rest, ok := strings.CutPrefix(key, ListPrefix+kind+"/")
	if !ok {
		return bad()
	}
	next := func() string { // the next field, "" when there is none
		f, tail, found := strings.Cut(rest, "/")
		if !found {
			f, tail = rest, ""
		}
		rest = tail
		return f
	}
	hex16 := func(f string) (uint64, bool) {
		if len(f) != 16 {
			return 0, false
		}
		var v uint64
		for i := 0; i < 16; i++ {
			c := f[i]
			switch {
			case c >= '0' && c <= '9':
				v = v<<4 | uint64(c-'0')
			case c >= 'a' && c <= 'f':
				v = v<<4 | uint64(c-'a'+10)
			default:
				return 0, false
			}
		}
		return v, true
	}
	r.Merchant = next()
	if kind == reservation.ListRefunds {
		r.State = next()
	}
	posStart := len(key) - len(rest)
	at, ok := hex16(next())
	if !ok {
		return bad()
	}
	r.ReservationID = next()
	if kind == reservation.ListRefunds {
		r.RefundNo = next()
	}
	pos := key[posStart : len(key)-len(rest)]
	if kind == reservation.ListReservations {
		r.State = next()
	}
	amount, ok1 := hex16(next())
	updated, ok2 := hex16(next())
	last := next()
	if !ok1 || !ok2 || rest != "" || r.Merchant == "" || r.State == "" || r.ReservationID == "" ||
		(kind == reservation.ListRefunds && r.RefundNo == "") {
		return bad()
	}
	r.At = time.Unix(0, int64(^at)).UTC()
	r.Amount = int64(amount)
	r.UpdatedAt = time.Unix(0, int64(updated)).UTC()
	if kind == reservation.ListRefunds {
		code, err := url.PathUnescape(last)
		if err != nil {
			return bad()
		}
		r.ReasonCode = code
	} else {
		v, ok := hex16(last)
		if !ok || v > 0xffff {
			return bad()
		}
		r.RefundStates = uint16(v)
	}
	return r, pos, nil
}

// List reads a page of the list f describes from the list index (no scan
// of the log): the rows of f.Merchants only, so another merchant's rows
// cost no reads and never appear. A filter with an exact id
// (ListFilter.HasIDs) reads the reservations the id names instead, found
// through the claims and the search index (Find), and replays them.
func (r Reader) List(ctx context.Context, f reservation.ListFilter, o reservation.ListOptions) (reservation.ListPage, error) {
	if o.Limit < 1 {
		o.Limit = 1
	}
	if o.MaxScan <= 0 {
		o.MaxScan = 5000
	}
	if o.After != "" && !validPosition(f.Kind, o.After) {
		return reservation.ListPage{}, reservation.ErrListCursor
	}
	if len(f.Merchants) == 0 {
		return reservation.ListPage{Rows: []reservation.ListRow{}}, nil
	}
	if f.HasIDs() {
		return r.listIDs(ctx, f, o)
	}
	return r.listScan(ctx, f, o)
}

// validPosition reports whether p is a position of a row of kind.
func validPosition(kind, p string) bool {
	f := strings.Split(p, "/")
	n := 3 // AT, RESERVATION, ""
	if kind == reservation.ListRefunds {
		n = 4
	}
	if len(f) != n || f[n-1] != "" || len(f[0]) != 16 {
		return false
	}
	if _, err := strconv.ParseUint(f[0], 16, 64); err != nil {
		return false
	}
	for _, id := range f[1 : n-1] {
		if id == "" {
			return false
		}
	}
	return true
}

// listIDs reads the reservations f's ids name, and their rows that match f.
func (r Reader) listIDs(ctx context.Context, f reservation.ListFilter, o reservation.ListOptions) (reservation.ListPage, error) {
	ids, err := r.candidates(ctx, f)
	if err != nil {
		return reservation.ListPage{}, err
	}
	type posRow struct {
		pos string
		row reservation.ListRow
	}
	var rows []posRow
	for _, id := range ids {
		events, _, err := r.Load(ctx, id)
		if err != nil {
			return reservation.ListPage{}, err
		}
		s := reservation.Replay(events)
		for _, row := range reservation.ListRows(nil, s) {
			if f.Matches(row) && f.MatchesIDs(s, row.RefundNo) {
				rows = append(rows, posRow{position(row), row})
			}
		}
	}
	slices.SortFunc(rows, func(a, b posRow) int { return strings.Compare(a.pos, b.pos) })
	if o.Oldest {
		slices.Reverse(rows)
	}
	page := reservation.ListPage{Rows: []reservation.ListRow{}}
	for _, pr := range rows {
		if o.After != "" && (!o.Oldest && pr.pos <= o.After || o.Oldest && pr.pos >= o.After) {
			continue
		}
		if len(page.Rows) == o.Limit {
			page.Next = position(page.Rows[len(page.Rows)-1])
			break
		}
		page.Rows = append(page.Rows, pr.row)
	}
	return page, nil
}

// candidates are the reservations f's most selective id names, each once:
// the refund number (claimed globally), WeChat's refund_id, the order
// number and the transaction and user ids (of f.Merchants only).
func (r Reader) candidates(ctx context.Context, f reservation.ListFilter) ([]string, error) {
	var ids []string
	add := func(id string) {
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	lookup := func(ns, key string) error {
		id, err := r.DB.Lookup(ctx, ns, key)
		switch {
		case errors.Is(err, journal.ErrNotFound):
			return nil
		case err != nil:
			return err
		}
		add(id)
		return nil
	}
	search := func(kind, value string) error {
		for _, m := range f.Merchants {
			prefix := searchValuePrefix(kind, value) + m + "/"
			after := ""
			for {
				keys, err := r.DB.Marks(ctx, prefix, after, 1024)
				if err != nil {
					return err
				}
				for _, k := range keys {
					id, _, ok := strings.Cut(strings.TrimPrefix(k, prefix), "/")
					if !ok {
						return fmt.Errorf("eventstore: malformed search key %q", k)
					}
					add(id)
				}
				if len(keys) < 1024 {
					break
				}
				after = keys[len(keys)-1]
			}
		}
		return nil
	}
	var err error
	switch {
	case f.RefundNo != "" && f.Kind == reservation.ListRefunds:
		for _, k := range reservation.RefundNoKeys(f.RefundNo) {
			if err = lookup(NamespaceRefundNo, k); err != nil {
				break
			}
		}
	case f.ProviderRefundID != "" && f.Kind == reservation.ListRefunds:
		err = search(reservation.SearchProviderRefundID, f.ProviderRefundID)
	case f.OutTradeNo != "":
		for _, m := range f.Merchants {
			if err = lookup(NamespaceOutTradeNo, reservation.OutTradeNoKey(m, f.OutTradeNo)); err != nil {
				break
			}
		}
	case f.TransactionID != "":
		err = search(reservation.SearchTransactionID, f.TransactionID)
	case f.UserID != "":
		err = search(reservation.SearchUserID, f.UserID)
	}
	return ids, err
}

// listScan reads f's prefixes (one per merchant, and per state for
// refunds) and merges them by position.
func (r Reader) listScan(ctx context.Context, f reservation.ListFilter, o reservation.ListOptions) (reservation.ListPage, error) {
	var prefixes []string
	for _, m := range f.Merchants {
		if f.Kind == reservation.ListReservations {
			prefixes = append(prefixes, listReservationPrefix+m+"/")
			continue
		}
		states := f.States
		if len(states) == 0 {
			states = make([]string, len(reservation.ListStates))
			for i, s := range reservation.ListStates {
				states[i] = string(s)
			}
		}
		for _, s := range states {
			prefixes = append(prefixes, listRefundPrefix+m+"/"+s+"/")
		}
	}
	// Where to start: the cursor, or the time bound on the near side
	// (newest first, the end of the range), whichever is further on.
	start := o.After
	if bound := nearBound(f, o.Oldest); bound != "" && (start == "" || !o.Oldest && bound > start || o.Oldest && bound < start) {
		start = bound
	}
	chunk := min(o.Limit+1, 256)
	its := make([]*listIter, len(prefixes))
	for i, p := range prefixes {
		its[i] = &listIter{r: r, kind: f.Kind, prefix: p, desc: o.Oldest, chunk: chunk}
		if start != "" {
			if o.Oldest {
				its[i].bound = p + start
			} else {
				its[i].bound = p + start + "\xff"
			}
		}
	}
	page := reservation.ListPage{Rows: []reservation.ListRow{}}
	scanned := 0
	last := "" // the position the merge last took: where a short page reads on from
	for {
		var best *listIter
		for _, it := range its {
			if err := it.fill(ctx); err != nil {
				return reservation.ListPage{}, err
			}
			if it.done {
				continue
			}
			if best == nil || !o.Oldest && it.pos < best.pos || o.Oldest && it.pos > best.pos {
				best = it
			}
		}
		if best == nil {
			return page, nil // every prefix read to its end
		}
		if len(page.Rows) == o.Limit {
			page.Next = position(page.Rows[len(page.Rows)-1])
			return page, nil
		}
		if scanned == o.MaxScan {
			page.Next = last
			return page, nil
		}
		row := best.row
		last = best.pos
		best.pop()
		scanned++
		if beyond(f, row, o.Oldest) {
			// The far side of the time range: this prefix has no more.
			best.done = true
			continue
		}
		if f.Matches(row) {
			page.Rows = append(page.Rows, row)
		}
	}
}

// nearBound is the position a list of f starts from: newest first, the
// first position after the end of f's time range; oldest first, its start.
func nearBound(f reservation.ListFilter, oldest bool) string {
	var b strings.Builder
	switch {
	case !oldest && !f.AtTo.IsZero():
		// Positions of At >= AtTo sort before ^AtTo+1... : read after
		// "^AtTo/" and everything under it.
		writeHex(&b, ^nanos(f.AtTo))
		b.WriteString("/\xff")
	case oldest && !f.AtFrom.IsZero():
		writeHex(&b, ^nanos(f.AtFrom))
		b.WriteString("/\xff")
	}
	return b.String()
}

// beyond reports whether row is past the far side of f's time range in
// the order read, so that nothing after it in its prefix matches.
func beyond(f reservation.ListFilter, row reservation.ListRow, oldest bool) bool {
	if oldest {
		return !f.AtTo.IsZero() && !row.At.Before(f.AtTo)
	}
	return !f.AtFrom.IsZero() && row.At.Before(f.AtFrom)
}

// listIter reads one prefix of the list index in chunks.
type listIter struct {
	r      Reader
	kind   string
	prefix string
	desc   bool
	chunk  int
	bound  string // read after it (ascending) or before it (descending); "" from the start
	keys   []string
	done   bool
	// The head: its row and position.
	row     reservation.ListRow
	pos     string
	hasHead bool
}

func (it *listIter) fill(ctx context.Context) error {
	if it.done || it.hasHead {
		return nil
	}
	if len(it.keys) == 0 {
		var err error
		if it.desc {
			it.keys, err = it.r.DB.MarksDesc(ctx, it.prefix, it.bound, it.chunk)
		} else {
			it.keys, err = it.r.DB.Marks(ctx, it.prefix, it.bound, it.chunk)
		}
		if err != nil {
			return err
		}
		if len(it.keys) == 0 {
			it.done = true
			return nil
		}
		it.bound = it.keys[len(it.keys)-1]
		if it.chunk < 1024 {
			it.chunk *= 2
		}
	}
	row, pos, err := parseListKey(it.kind, it.keys[0])
	if err != nil {
		return err
	}
	it.keys = it.keys[1:]
	it.row, it.pos, it.hasHead = row, pos, true
	return nil
}

func (it *listIter) pop() { it.hasHead = false }

// StreamsLoader reads many streams at once: both journals implement it
// (journal.DB.LoadStreams: one read transaction, the records in file
// order; pgjournal.DB.LoadStreams: one query).
type StreamsLoader interface {
	LoadStreams(ctx context.Context, streams []string) (map[string][]journal.Record, error)
}

// States returns the state of each of ids, replayed from the journal
// without waking (or, in a cluster, taking over) their actors: the
// reservations a page of a list shows, read in one batch where the journal
// can (StreamsLoader), else one by one in key order. An id with no events
// maps to an unregistered state.
func (r Reader) States(ctx context.Context, ids []string) (map[string]*reservation.State, error) {
	out := make(map[string]*reservation.State, len(ids))
	if sl, ok := r.DB.(StreamsLoader); ok {
		streams, err := sl.LoadStreams(ctx, ids)
		if err != nil {
			return nil, err
		}
		for id, recs := range streams {
			events, err := DecodeStream(id, recs)
			if err != nil {
				return nil, err
			}
			out[id] = reservation.Replay(events)
		}
		return out, nil
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	for _, id := range slices.Compact(sorted) {
		events, _, err := r.Load(ctx, id)
		if err != nil {
			return nil, err
		}
		out[id] = reservation.Replay(events)
	}
	return out, nil
}
