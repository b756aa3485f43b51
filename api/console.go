package api

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
)

// TimelineReader reads a reservation's journal for the console's timeline;
// the journal's actors.Store adapter (eventstore.Store) implements it.
type TimelineReader interface {
	// Load returns every event of a reservation in order, none for an
	// unknown one, and the stream's version. Errors are internal.
	Load(ctx context.Context, reservationID string) ([]reservation.Event, uint64, error)
}

// timelineEntry is one journaled event as the console shows it.
type timelineEntry struct {
	Seq      int             `json:"seq"`
	Type     string          `json:"type"`
	At       time.Time       `json:"at"`
	By       string          `json:"by"`
	RefundNo string          `json:"refund_no,omitempty"`
	Data     json.RawMessage `json:"data"`
}

// timeline serves GET /v1/reservations/{id}/events: the reservation's
// journal, oldest first. The provider request bytes a submission carries
// are replaced by their length: they repeat the refund's own fields.
func (s *Server) timeline(w http.ResponseWriter, r *http.Request) {
	id := pathVars(r)["id"]
	if !reservation.ValidReservationID(id) {
		s.writeError(w, r, reservation.ErrNotFound)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	events, _, err := s.opts.Timeline.Load(ctx, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	merchant := reservation.Replay(events).Merchant
	if len(events) == 0 || !viewer(r).Sees(merchant) {
		s.writeError(w, r, reservation.ErrNotFound)
		return
	}
	out := make([]timelineEntry, 0, len(events))
	for i, e := range events {
		data, err := timelineData(e.Data)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		out = append(out, timelineEntry{Seq: i + 1, Type: e.Data.EventType(), At: e.At.UTC(),
			By: e.By, RefundNo: reservation.RefundNoOf(e.Data), Data: data})
	}
	// The merchant is the state's: a registration journaled before
	// reservations had merchants names none, and belongs to the default.
	writeJSON(w, http.StatusOK, map[string]any{"reservation_id": id, "merchant": merchant, "events": out})
}

func timelineData(d reservation.EventData) (json.RawMessage, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	if req, ok := fields["request"]; ok {
		var b []byte
		_ = json.Unmarshal(req, &b)
		delete(fields, "request")
		fields["request_bytes"], _ = json.Marshal(len(b))
	}
	return json.Marshal(fields)
}

// whoami serves GET /v1/whoami: who the token acts as, its role, the
// merchants it is limited to (none: all) and the permissions its role has,
// so that the console offers only the actions the API would allow.
func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	p := viewer(r)
	perms := []auth.Permission{}
	for _, perm := range auth.Permissions() {
		if p.Can(perm) {
			perms = append(perms, perm)
		}
	}
	merchants := p.Merchants
	if merchants == nil {
		merchants = []string{}
	}
	// sees: the configured merchants the token sees, which the console
	// offers as its merchant filter.
	sees := []string{}
	for _, m := range s.merchants.sorted() {
		if p.Sees(m) {
			sees = append(sees, m)
		}
	}
	slices.Sort(sees)
	writeJSON(w, http.StatusOK, map[string]any{"principal": s.principal(r), "role": p.Role,
		"merchants": merchants, "sees": sees, "permissions": perms})
}

// filteredEngine is engineFor narrowed to the merchant named by the query
// parameter merchant, when there is one; filtered says it was. A name that
// is not configured and one the token does not see get the same 400, so
// the filter tells a scoped token nothing about other merchants.
func (s *Server) filteredEngine(r *http.Request) (e Engine, filtered bool, err error) {
	name := r.URL.Query().Get("merchant")
	if name == "" {
		return s.engineFor(r), false, nil
	}
	p := viewer(r)
	if !s.merchants.has(name) || !p.Sees(name) {
		return nil, false, badRequest("merchant", "not a merchant this token sees")
	}
	p.Merchants = []string{name}
	return &scopedEngine{Engine: s.engine, p: p}, true, nil
}

// summaryCap bounds how far the summary counts one attention kind.
const summaryCap = 1000

type attentionCount struct {
	Count int  `json:"count"`
	More  bool `json:"more"` // the count stopped at its cap
}

// summary serves GET /v1/summary, the console's headline numbers: refunds
// needing attention by kind, live actors, and notification outcomes and
// webhook lag when the server has them (all but the first only for
// unscoped tokens without a merchant filter).
func (s *Server) summary(w http.ResponseWriter, r *http.Request) {
	engine, filtered, err := s.filteredEngine(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	out := map[string]any{}
	counts := map[string]attentionCount{}
	for _, kind := range reservation.AttentionKinds {
		refs, err := engine.Attention(ctx, kind, "", summaryCap+1)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		counts[kind] = attentionCount{Count: min(len(refs), summaryCap), More: len(refs) > summaryCap}
	}
	out["attention"] = counts
	if viewer(r).Scoped() || filtered {
		// The rest counts every merchant's actors, notifications and
		// deliveries together: a scoped token, or a merchant filter, gets
		// its refunds' counts only.
		writeJSON(w, http.StatusOK, out)
		return
	}
	out["active_actors"] = s.engine.Active()
	if st := s.NotifyStats(); st != nil {
		out["notifications"] = st.Snapshot()
	}
	if err := s.durableCounters(ctx, out); err != nil { // counters.go
		s.writeError(w, r, err)
		return
	}
	if ec := s.opts.Events; ec != nil && ec.Webhooks != nil {
		lags, err := ec.Webhooks.Lag(ctx)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		views := make([]endpointView, 0, len(lags))
		for _, l := range lags {
			views = append(views, endpointView{Name: l.Name, Cursor: strconv.FormatUint(l.Cursor, 10), EventsBehind: l.EventsBehind,
				Parked: l.Parked, OldestUndeliveredAgeSeconds: l.OldestUndeliveredAge.Seconds(),
				Delivered: l.Delivered, FailedAttempts: l.FailedAttempts})
		}
		out["webhooks"] = views
	}
	writeJSON(w, http.StatusOK, out)
}
