package api_test

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

// listFixture is a journal of reservations of three merchants with refunds
// in every state WeChat Pay's answers lead to, and the states behind it.
type listFixture struct {
	e      *testEnv
	states []*reservation.State
	// Pools the filters draw from: values that exist, and one that does not.
	users, orders, txns, refundNos, providerIDs []string
	times                                       []time.Time
	amounts                                     []int64
}

var listMerchants = []string{"hotel-bj", "hotel-sh", "villa"}

const (
	tokListAll    = "list-operator-token-all-0001"
	tokListScoped = "list-operator-token-sh-00001" // hotel-sh and villa
	tokListWriter = "list-service-token-all-00001"
)

// listOutcome is what the sandbox answers a refund's submission: decided
// by its number, so the states are spread and stable (an unknown answer is
// not: the engine asks again at once).
func listOutcome(no string) (reservation.OutcomeKind, bool) {
	h := fnv.New32a()
	h.Write([]byte(no))
	kinds := []reservation.OutcomeKind{reservation.OutcomeSucceeded, reservation.OutcomeRejected,
		reservation.OutcomeAbnormal, reservation.OutcomeProcessing}
	k := kinds[h.Sum32()%uint32(len(kinds))]
	return k, k != reservation.OutcomeProcessing
}

func newListFixture(t *testing.T, n int) *listFixture {
	t.Helper()
	var ts auth.Tokens
	file := "operator " + auth.HashHex(tokListAll) + " op\n" +
		"operator " + auth.HashHex(tokListScoped) + " op-sh merchants=hotel-sh,villa\n" +
		"service " + auth.HashHex(tokListWriter) + " svc\n"
	if err := auth.ParseFile(strings.NewReader(file), &ts); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{delay: time.Hour, noHTTP: true, api: api.Options{Auth: &ts, Merchants: listMerchants},
		fault: func(op, no string, _ int) (simprovider.Injected, bool) {
			k, ok := listOutcome(no)
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: k, Code: "X", ProviderID: "wx" + no}, Apply: k == reservation.OutcomeSucceeded}, ok && op == "submit"
		}})
	f := &listFixture{e: e}
	hdr := bearer(tokListWriter)
	start := time.Now()
	defer func() { t.Logf("fixture of %d reservations written in %s", n, time.Since(start)) }()
	for i := range n {
		id := "r" + strconv.Itoa(i)
		m := listMerchants[i%3]
		user := "u" + strconv.Itoa(i%4)
		order := "O-" + strconv.Itoa(i/2) // the same order number at two merchants
		txn := "42" + strconv.Itoa(i%7)
		amount := int64(100 * (1 + i%5))
		body := fmt.Sprintf(`{"id":%q,"merchant":%q,"user_id":%q,"out_trade_no":%q,"transaction_id":%q,"amount":%d,"currency":"CNY"}`,
			id, m, user, order, txn, amount)
		if r := e.do(t, http.MethodPost, "/v1/reservations", body, hdr...); r.status != http.StatusCreated {
			t.Fatalf("register %s: %s", id, r)
		}
		for j := range i % 3 {
			code := reservation.ReasonCodes()[(i+j)%len(reservation.ReasonCodes())]
			body := fmt.Sprintf(`{"user_id":%q,"amount":%d,"reason_code":%q}`, user, 10*(1+(i+j)%4), code)
			r := e.do(t, http.MethodPost, "/v1/reservations/"+id+"/refunds", body, append(hdr, "Idempotency-Key", "k"+strconv.Itoa(j))...)
			if r.status != http.StatusAccepted && r.status != http.StatusOK {
				t.Fatalf("refund %s: %s", id, r)
			}
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		st, err := e.engine.Await(ctx, id, func(st *reservation.State) bool {
			// Every refund answered (WeChat's refund_id known), so that
			// nothing changes after the fixture is read.
			for _, r := range st.Refunds {
				if k, ok := listOutcome(r.No); ok && string(r.State) != string(k) || r.ProviderID == "" {
					return false
				}
			}
			return true
		})
		cancel()
		if err != nil {
			t.Fatalf("%s: the refunds never reached their answers: %v", id, err)
		}
		for _, r := range st.Refunds {
			if k, ok := listOutcome(r.No); ok && string(r.State) != string(k) || r.ProviderID == "" {
				t.Fatalf("%s is %s (refund_id %q), want %s and an answer", r.No, r.State, r.ProviderID, k)
			}
		}
		f.states = append(f.states, st)
		f.users, f.orders, f.txns = append(f.users, user), append(f.orders, order), append(f.txns, txn)
		f.times = append(f.times, st.RegisteredAt)
		f.amounts = append(f.amounts, amount)
		for _, r := range st.Refunds {
			f.refundNos = append(f.refundNos, r.No)
			f.providerIDs = append(f.providerIDs, r.ProviderID)
			f.times = append(f.times, r.CreatedAt, r.UpdatedAt)
			f.amounts = append(f.amounts, r.Amount)
		}
	}
	for _, p := range []*[]string{&f.users, &f.orders, &f.txns, &f.refundNos, &f.providerIDs} {
		*p = append(*p, "nobody")
	}
	return f
}

// query is one list request drawn at random, and the brute-force filter
// it stands for.
type query struct {
	params url.Values
	scoped bool
	keep   func(s *reservation.State, r *reservation.Refund) bool // r nil for a reservation
	oldest bool
}

func (f *listFixture) draw(t *rapid.T, kind string) query {
	q := query{params: url.Values{}, scoped: rapid.Bool().Draw(t, "scoped")}
	var keeps []func(s *reservation.State, r *reservation.Refund) bool
	keep := func(k func(s *reservation.State, r *reservation.Refund) bool) { keeps = append(keeps, k) }
	sees := listMerchants
	if q.scoped {
		sees = []string{"hotel-sh", "villa"}
	}
	keep(func(s *reservation.State, _ *reservation.Refund) bool { return slices.Contains(sees, s.Merchant) })
	often := func(name string) bool { return rapid.IntRange(0, 3).Draw(t, name) == 0 }
	pick := func(name string, pool []string) string { return rapid.SampledFrom(pool).Draw(t, name) }
	if often("merchant?") {
		ms := rapid.SliceOfNDistinct(rapid.SampledFrom(sees), 1, 2, rapid.ID[string]).Draw(t, "merchant")
		q.params.Set("merchant", strings.Join(ms, ","))
		keep(func(s *reservation.State, _ *reservation.Refund) bool { return slices.Contains(ms, s.Merchant) })
	}
	if often("user?") {
		v := pick("user_id", f.users)
		q.params.Set("user_id", v)
		keep(func(s *reservation.State, _ *reservation.Refund) bool { return s.UserID == v })
	}
	if often("order?") {
		v := pick("out_trade_no", f.orders)
		q.params.Set("out_trade_no", v)
		keep(func(s *reservation.State, _ *reservation.Refund) bool { return s.OutTradeNo == v })
	}
	if often("txn?") {
		v := pick("transaction_id", f.txns)
		q.params.Set("transaction_id", v)
		keep(func(s *reservation.State, _ *reservation.Refund) bool { return s.TransactionID == v })
	}
	at := func(s *reservation.State, r *reservation.Refund) time.Time {
		if r != nil {
			return r.CreatedAt
		}
		return s.RegisteredAt
	}
	updated := func(s *reservation.State, r *reservation.Refund) time.Time {
		if r != nil {
			return r.UpdatedAt
		}
		u := s.RegisteredAt
		for _, r := range s.Refunds {
			if r.UpdatedAt.After(u) {
				u = r.UpdatedAt
			}
		}
		return u
	}
	amount := func(s *reservation.State, r *reservation.Refund) int64 {
		if r != nil {
			return r.Amount
		}
		return s.Amount
	}
	timeBound := func(name string, of func(*reservation.State, *reservation.Refund) time.Time, from bool) {
		if !often(name + "?") {
			return
		}
		// Round(0): the wall clock alone, as the journal keeps it (a
		// monotonic reading would order two of the engine's times by a
		// clock the server never sees).
		b := rapid.SampledFrom(f.times).Draw(t, name).Add(time.Duration(rapid.IntRange(-1, 1).Draw(t, name+"±"))).Round(0)
		q.params.Set(name, b.In(time.FixedZone("CST", 8*3600)).Format(time.RFC3339Nano))
		keep(func(s *reservation.State, r *reservation.Refund) bool {
			if from {
				return !of(s, r).Before(b)
			}
			return of(s, r).Before(b)
		})
	}
	atName := "registered"
	if kind == reservation.ListRefunds {
		atName = "requested"
	}
	timeBound(atName+"_from", at, true)
	timeBound(atName+"_to", at, false)
	timeBound("updated_from", updated, true)
	timeBound("updated_to", updated, false)
	if often("amount_min?") {
		v := rapid.SampledFrom(f.amounts).Draw(t, "amount_min")
		q.params.Set("amount_min", strconv.FormatInt(v, 10))
		keep(func(s *reservation.State, r *reservation.Refund) bool { return amount(s, r) >= v })
	}
	if often("amount_max?") {
		v := rapid.SampledFrom(f.amounts).Draw(t, "amount_max")
		q.params.Set("amount_max", strconv.FormatInt(v, 10))
		keep(func(s *reservation.State, r *reservation.Refund) bool { return amount(s, r) <= v })
	}
	var states []string
	for _, s := range reservation.ListStates {
		states = append(states, string(s))
	}
	if kind == reservation.ListRefunds {
		if often("refund_no?") {
			v := pick("refund_no", f.refundNos)
			q.params.Set("refund_no", v)
			keep(func(_ *reservation.State, r *reservation.Refund) bool { return r.No == v })
		}
		if v := pick("refund_id", f.providerIDs); v != "" && often("refund_id?") {
			q.params.Set("refund_id", v)
			keep(func(_ *reservation.State, r *reservation.Refund) bool { return r.ProviderID == v })
		}
		if often("state?") {
			ss := rapid.SliceOfNDistinct(rapid.SampledFrom(states), 1, 3, rapid.ID[string]).Draw(t, "state")
			q.params.Set("state", strings.Join(ss, ","))
			keep(func(_ *reservation.State, r *reservation.Refund) bool { return slices.Contains(ss, string(r.State)) })
		}
		if often("reason_code?") {
			v := pick("reason_code", reservation.ReasonCodes())
			q.params.Set("reason_code", v)
			keep(func(_ *reservation.State, r *reservation.Refund) bool { return r.ReasonCode == v })
		}
	} else {
		if often("status?") {
			v := pick("status", []string{"ACCEPTED", "CANCELED"})
			q.params.Set("status", v)
			keep(func(s *reservation.State, _ *reservation.Refund) bool { return string(s.Status) == v })
		}
		if often("refund_state?") {
			ss := rapid.SliceOfNDistinct(rapid.SampledFrom(states), 1, 3, rapid.ID[string]).Draw(t, "refund_state")
			q.params.Set("refund_state", strings.Join(ss, ","))
			keep(func(s *reservation.State, _ *reservation.Refund) bool {
				return slices.ContainsFunc(s.Refunds, func(r *reservation.Refund) bool { return slices.Contains(ss, string(r.State)) })
			})
		}
	}
	// order is always given: a lone state=KIND of an attention kind is the
	// older attention list (TestList_LegacyAttention).
	q.params.Set("order", "desc")
	if rapid.Bool().Draw(t, "asc") {
		q.params.Set("order", "asc")
		q.oldest = true
	}
	q.params.Set("limit", strconv.Itoa(rapid.IntRange(1, 7).Draw(t, "limit")))
	// A range the wrong way round is refused (TestList_BadParameters): the
	// draws keep theirs the right way round.
	for _, pair := range [][2]string{{atName + "_from", atName + "_to"}, {"updated_from", "updated_to"}} {
		from, _ := time.Parse(time.RFC3339Nano, q.params.Get(pair[0]))
		to, _ := time.Parse(time.RFC3339Nano, q.params.Get(pair[1]))
		if q.params.Has(pair[0]) && q.params.Has(pair[1]) && !from.Before(to) {
			t.Skip("an empty time range")
		}
	}
	if lo, hi := q.params.Get("amount_min"), q.params.Get("amount_max"); lo != "" && hi != "" {
		l, _ := strconv.Atoi(lo)
		h, _ := strconv.Atoi(hi)
		if l > h {
			t.Skip("an empty amount range")
		}
	}
	q.keep = func(s *reservation.State, r *reservation.Refund) bool {
		for _, k := range keeps {
			if !k(s, r) {
				return false
			}
		}
		return true
	}
	return q
}

// brute is the list q asks for, filtered from every state: ids in list
// order (newest first, then by reservation id and refund number as the
// index positions sort them; oldest first is the reverse).
func (f *listFixture) brute(kind string, q query) []string {
	type row struct {
		at       time.Time
		id, no   string
		rendered string
	}
	var rows []row
	for _, s := range f.states {
		if kind == reservation.ListReservations {
			if q.keep(s, nil) {
				rows = append(rows, row{s.RegisteredAt, s.ID, "", s.ID})
			}
			continue
		}
		for _, r := range s.Refunds {
			if q.keep(s, r) {
				rows = append(rows, row{r.CreatedAt, s.ID, r.No, s.ID + "/" + r.No})
			}
		}
	}
	slices.SortFunc(rows, func(a, b row) int {
		return cmp.Or(b.at.Compare(a.at), strings.Compare(a.id+"/", b.id+"/"), strings.Compare(a.no+"/", b.no+"/"))
	})
	if q.oldest {
		slices.Reverse(rows)
	}
	out := []string{}
	for _, r := range rows {
		out = append(out, r.rendered)
	}
	return out
}

// list follows next_cursor to the end and returns every id listed, and
// the number of pages.
func (f *listFixture) list(t *testing.T, fail func(string, ...any), kind string, q query) ([]string, int) {
	tok := tokListAll
	if q.scoped {
		tok = tokListScoped
	}
	path := "/v1/refunds?"
	if kind == reservation.ListReservations {
		path = "/v1/reservations?"
	}
	limit, _ := strconv.Atoi(q.params.Get("limit"))
	params := url.Values{}
	for k, v := range q.params {
		params[k] = v
	}
	out := []string{}
	for pages := 1; ; pages++ {
		r := f.e.do(t, http.MethodGet, path+params.Encode(), "", bearer(tok)...)
		if r.status != http.StatusOK {
			fail("GET %s%s: %s", path, params.Encode(), r)
		}
		var page struct {
			Refunds []struct {
				RefundNo      string `json:"refund_no"`
				ReservationID string `json:"reservation_id"`
			} `json:"refunds"`
			Reservations []struct {
				ID string `json:"id"`
			} `json:"reservations"`
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil {
			fail("%v", err)
		}
		n := 0
		for _, rf := range page.Refunds {
			out = append(out, rf.ReservationID+"/"+rf.RefundNo)
			n++
		}
		for _, rs := range page.Reservations {
			out = append(out, rs.ID)
			n++
		}
		if n > limit {
			fail("a page of %d rows, limit %d", n, limit)
		}
		if page.NextCursor == "" {
			return out, pages
		}
		if pages > 200 {
			fail("more than 200 pages")
		}
		params.Set("cursor", page.NextCursor)
	}
}

// TestList_BruteForce: every list, with every combination of filters drawn
// at random, paged with next_cursor, holds exactly what a filter of every
// reservation's state holds, in the same order; a scoped token's lists
// are those of its merchants alone.
func TestList_BruteForce(t *testing.T) {
	f := newListFixture(t, 30)
	for _, kind := range []string{reservation.ListRefunds, reservation.ListReservations} {
		t.Run(kind, func(t *testing.T) {
			var found, paged int // draws that listed something, and over several pages
			rapid.Check(t, func(rt *rapid.T) {
				q := f.draw(rt, kind)
				want := f.brute(kind, q)
				got, pages := f.list(t, rt.Fatalf, kind, q)
				if !slices.Equal(got, want) {
					rt.Fatalf("%s (scoped %v) in %d pages:\n got %q\nwant %q", q.params.Encode(), q.scoped, pages, got, want)
				}
				if len(want) > 0 {
					found++
				}
				if pages > 1 {
					paged++
				}
			})
			if found < 10 || paged < 5 {
				t.Errorf("of the draws, %d listed something and %d took more than one page: too few to tell", found, paged)
			}
		})
	}
	// The fixture holds what the draws filter on: states of every answer,
	// and an order number at two merchants.
	seen := map[reservation.RefundState]bool{}
	for _, s := range f.states {
		for _, r := range s.Refunds {
			seen[r.State] = true
		}
	}
	for _, st := range []reservation.RefundState{reservation.Succeeded, reservation.Rejected, reservation.Abnormal, reservation.Processing} {
		if !seen[st] {
			t.Errorf("the fixture has no %s refund", st)
		}
	}
}

// TestList_BadParameters: a parameter a list cannot read is refused with
// 400 naming it.
func TestList_BadParameters(t *testing.T) {
	f := newListFixture(t, 3)
	tests := []struct {
		path, field string
	}{
		{"/v1/refunds?bogus=1", "bogus"},
		{"/v1/refunds?status=ACCEPTED", "status"}, // the reservations' filter
		{"/v1/reservations?reason_code=OTHER", "reason_code"},
		{"/v1/refunds?state=PROCESSING&state=FAILED", "state"},
		{"/v1/refunds?state=PROCESSING,", "state"},
		{"/v1/refunds?state=DONE", "state"},
		{"/v1/refunds?state=stuck,UNKNOWN", "state"}, // stuck is an attention kind, not a state
		{"/v1/reservations?status=SUCCEEDED", "status"},
		{"/v1/reservations?refund_state=LOST", "refund_state"},
		{"/v1/refunds?merchant=hotel-nowhere", "merchant"},
		{"/v1/refunds?merchant=hotel-sh,", "merchant"},
		{"/v1/refunds?requested_from=yesterday", "requested_from"},
		{"/v1/refunds?requested_to=2026-12-05", "requested_to"},
		{"/v1/refunds?updated_from=1969-12-31T00:00:00Z", "updated_from"},
		{"/v1/refunds?requested_from=2026-12-05T08:00:00Z&requested_to=2026-12-05T08:00:00Z", "requested_to"},
		{"/v1/refunds?updated_from=2026-12-05T09:00:00Z&updated_to=2026-12-05T08:00:00Z", "updated_to"},
		{"/v1/reservations?registered_from=x", "registered_from"},
		{"/v1/reservations?requested_from=2026-12-05T08:00:00Z", "requested_from"},
		{"/v1/refunds?amount_min=0", "amount_min"},
		{"/v1/refunds?amount_max=1.5", "amount_max"},
		{"/v1/refunds?amount_min=-3", "amount_min"},
		{"/v1/refunds?amount_min=500&amount_max=100", "amount_max"},
		{"/v1/refunds?reason_code=because", "reason_code"},
		{"/v1/refunds?order=newest", "order"},
		{"/v1/refunds?limit=0", "limit"},
		{"/v1/refunds?limit=201", "limit"},
		{"/v1/refunds?limit=ten", "limit"},
		{"/v1/refunds?cursor=!!!", "cursor"},
		{"/v1/refunds?state=%zz", "query"}, // not a query string: not read as one without it
		{"/v1/refunds?cursor=bm90LWEtY3Vyc29y", "cursor"},
		{"/v1/refunds?cursor=" + url.QueryEscape(base64URL("refund:zz/r1/T-1/")), "cursor"},
		{"/v1/reservations?cursor=" + url.QueryEscape(base64URL("refund:0000000000000000/r1/T-1/")), "cursor"}, // another list's
		{"/v1/refunds?user_id=" + strings.Repeat("u", 129), "user_id"},
		{"/v1/refunds?attention=FAILED", "attention"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			wantError(t, f.e.do(t, http.MethodGet, tt.path, "", bearer(tokListAll)...), http.StatusBadRequest, "invalid_argument", tt.field)
		})
	}
	// A cursor of the list is read back.
	r := f.e.do(t, http.MethodGet, "/v1/reservations?limit=1", "", bearer(tokListAll)...)
	var page struct {
		NextCursor string `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil || page.NextCursor == "" {
		t.Fatalf("first page: %s", r)
	}
	if r := f.e.do(t, http.MethodGet, "/v1/reservations?limit=1&cursor="+page.NextCursor, "", bearer(tokListAll)...); r.status != http.StatusOK {
		t.Fatalf("second page: %s", r)
	}
	wantError(t, f.e.do(t, http.MethodGet, "/v1/refunds?cursor="+page.NextCursor, "", bearer(tokListAll)...), http.StatusBadRequest, "invalid_argument", "cursor")
}

func base64URL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestList_LegacyAttention: the attention list's callers keep their
// answer: a lone state=KIND of an attention kind (with limit, after and
// merchant) and attention=KIND answer it, with its "next"; any other
// parameter makes state a filter of the refund list.
func TestList_LegacyAttention(t *testing.T) {
	f := newListFixture(t, 12)
	var abnormal []string
	for _, s := range f.states {
		for _, r := range s.Refunds {
			if r.State == reservation.Abnormal {
				abnormal = append(abnormal, r.No)
			}
		}
	}
	if len(abnormal) < 2 {
		t.Fatalf("the fixture has %d ABNORMAL refunds", len(abnormal))
	}
	for _, path := range []string{"/v1/refunds?state=ABNORMAL&limit=1", "/v1/refunds?attention=ABNORMAL&limit=1", "/v1/refunds?state=ABNORMAL&limit=1&merchant=hotel-sh,villa&order=desc"} {
		r := f.e.do(t, http.MethodGet, path, "", bearer(tokListAll)...)
		var page struct {
			Refunds    []refundJSON `json:"refunds"`
			Next       string       `json:"next"`
			NextCursor string       `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.body, &page); err != nil || r.status != http.StatusOK || len(page.Refunds) != 1 {
			t.Fatalf("%s: %s", path, r)
		}
		legacy := !strings.Contains(path, "order=")
		if legacy != (page.Next != "") || legacy == (page.NextCursor != "") {
			t.Errorf("%s: next %q, next_cursor %q; the attention list: %v", path, page.Next, page.NextCursor, legacy)
		}
	}
}

// TestList_PageWakesNoActor: a page of reservations no actor holds is read
// from the journal in one batch (eventstore.Reader.States), not by starting
// one actor per row: after listing them, no actor is live, and the page
// shows each refund as the journal has it.
func TestList_PageWakesNoActor(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	store := eventstore.New(e.db) // beside the engine: its actors never see these
	at := time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)
	const n = 12
	for i := range n {
		id := fmt.Sprintf("cold%02d", i)
		no := fmt.Sprintf("T-%s-1", id)
		evs := []reservation.Event{
			{At: at, By: "test", Data: reservation.Registered{ReservationID: id, UserID: "u", OutTradeNo: "O" + id, Amount: 100, Currency: "CNY"}},
			{At: at.Add(time.Duration(i) * time.Minute), By: "test", Data: reservation.RefundRequested{RefundNo: no, Number: 1,
				IdempotencyKey: no, Fingerprint: "f", Amount: int64(10 + i)}},
		}
		if err := store.Append(ctx, id, nil, evs); err != nil {
			t.Fatal(err)
		}
	}
	r := e.do(t, "GET", "/v1/refunds?state=PROCESSING&limit=50", "")
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var page struct {
		Refunds []struct {
			RefundNo string `json:"refund_no"`
			Amount   int64  `json:"amount"`
			State    string `json:"state"`
		} `json:"refunds"`
	}
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Refunds) != n {
		t.Fatalf("listed %d refunds, want %d: %s", len(page.Refunds), n, r.body)
	}
	for i, rf := range page.Refunds { // newest request first
		j := n - 1 - i
		if want := fmt.Sprintf("T-cold%02d-1", j); rf.RefundNo != want || rf.Amount != int64(10+j) || rf.State != "PROCESSING" {
			t.Errorf("row %d: %+v, want %s of %d fen PROCESSING", i, rf, want, 10+j)
		}
	}
	if live := e.engine.Active(); live != 0 {
		t.Errorf("listing started %d actors, want none", live)
	}
}
