package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
)

// EventFeed is what GET /v1/events needs; feed.Feed implements it.
type EventFeed interface {
	// Read returns up to limit events after the cursor, in global order,
	// and the cursor to continue from (see feed.Read). It fails with
	// feed.ErrUnknownType for an unknown type; any other error is internal.
	Read(ctx context.Context, after uint64, limit int, types []string) ([]feed.Event, uint64, error)
	// Wait returns nil once the journal has a record after the cursor, or
	// ctx's error when ctx ends first.
	Wait(ctx context.Context, after uint64) error
	// Last returns the cursor of the journal's last record.
	Last(ctx context.Context) (uint64, error)
}

// Webhooks is what the webhook routes need; webhook.Dispatcher implements
// it. Errors: webhook.ErrUnknownEndpoint, webhook.ErrNotParked; anything
// else is internal.
type Webhooks interface {
	Lag(ctx context.Context) ([]webhook.EndpointLag, error)
	Parked(ctx context.Context, endpoint string) ([]webhook.ParkedEvent, error)
	Replay(ctx context.Context, endpoint, eventID string) error
	ReplayAll(ctx context.Context, endpoint string) (int, error)
}

var (
	_ EventFeed = (*feed.Feed)(nil)
	_ Webhooks  = (*webhook.Dispatcher)(nil)
)

// EventsConfig enables the event feed and, with Webhooks, the webhook
// routes.
type EventsConfig struct {
	// Feed serves GET /v1/events; required.
	Feed EventFeed
	// Webhooks serves /v1/webhooks...; nil leaves those routes out.
	Webhooks Webhooks
	// MaxWait caps the feed's ?wait=; zero means 20s. Keep it below the
	// HTTP server's WriteTimeout.
	MaxWait time.Duration
	// Done, when closed, ends long-polls at once with what they have, so a
	// graceful shutdown does not wait out every ?wait= (close it from
	// http.Server.RegisterOnShutdown). Nil means long-polls end only by
	// their wait or the client leaving.
	Done <-chan struct{}
}

// scanBudget bounds how long one feed request keeps scanning stretches of
// the journal that hold no matching event before answering an empty page
// that still advances the cursor.
const scanBudget = time.Second

// eventRoutes registers the feed and webhook routes when Options.Events is
// set.
func (s *Server) eventRoutes() {
	if s.opts.Events == nil || s.opts.Events.Feed == nil {
		return
	}
	ec := *s.opts.Events
	if ec.MaxWait <= 0 {
		ec.MaxWait = 20 * time.Second
	}
	r := s.router
	r.HandleFunc("/v1/events", func(w http.ResponseWriter, req *http.Request) { s.getEvents(w, req, ec) }).
		Methods(http.MethodGet)
	if ec.Webhooks == nil {
		return
	}
	wh := ec.Webhooks
	r.HandleFunc("/v1/webhooks", func(w http.ResponseWriter, req *http.Request) { s.getWebhooks(w, req, wh) }).
		Methods(http.MethodGet)
	r.HandleFunc("/v1/webhooks/{endpoint}/parked", func(w http.ResponseWriter, req *http.Request) {
		s.getParked(w, req, wh)
	}).Methods(http.MethodGet)
	r.HandleFunc("/v1/webhooks/{endpoint}/parked/replay", func(w http.ResponseWriter, req *http.Request) {
		s.replayAllParked(w, req, wh)
	}).Methods(http.MethodPost)
	r.HandleFunc("/v1/webhooks/{endpoint}/parked/{event_id}/replay", func(w http.ResponseWriter, req *http.Request) {
		s.replayParked(w, req, wh)
	}).Methods(http.MethodPost)
}

// eventsQuery is a validated GET /v1/events query.
type eventsQuery struct {
	after uint64
	limit int
	types []string
	wait  time.Duration
}

func parseEventsQuery(r *http.Request, maxWait time.Duration) (eventsQuery, error) {
	q := eventsQuery{limit: feed.DefaultLimit}
	values := r.URL.Query()
	for name, vs := range values {
		switch name {
		case "after", "limit", "types", "wait":
		default:
			return q, badRequest(name, "unknown parameter; use after, limit, types or wait")
		}
		if len(vs) > 1 {
			return q, badRequest(name, "given more than once")
		}
	}
	if v, ok := values["after"]; ok {
		after, err := parseCursor(v[0])
		if err != nil {
			return q, err
		}
		q.after = after
	}
	if v, ok := values["limit"]; ok {
		n, err := strconv.Atoi(v[0])
		if err != nil || n < 1 || n > feed.MaxLimit || strings.TrimLeft(v[0], "0123456789") != "" {
			return q, badRequest("limit", "must be an integer from 1 to "+strconv.Itoa(feed.MaxLimit))
		}
		q.limit = n
	}
	if v, ok := values["types"]; ok {
		for t := range strings.SplitSeq(v[0], ",") {
			if !feed.KnownType(t) {
				return q, badRequest("types", "must be a comma-separated list of "+strings.Join(feed.Types(), ", "))
			}
			q.types = append(q.types, t)
		}
	}
	if v, ok := values["wait"]; ok {
		d, err := time.ParseDuration(v[0])
		if err != nil || d < 0 {
			return q, badRequest("wait", "must be a duration such as 5s")
		}
		q.wait = min(d, maxWait)
	}
	return q, nil
}

// parseCursor accepts a cursor as returned in "next" (decimal digits) or an
// event id, meaning "after that event".
func parseCursor(v string) (uint64, error) {
	if strings.HasPrefix(v, "evt_") {
		g, err := feed.ParseID(v)
		if err != nil {
			return 0, badRequest("after", "is not a valid event id")
		}
		return g, nil
	}
	if v == "" || len(v) > 20 || strings.TrimLeft(v, "0123456789") != "" {
		return 0, badRequest("after", "must be a cursor from \"next\" or an event id")
	}
	g, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, badRequest("after", "must be a cursor from \"next\" or an event id")
	}
	return g, nil
}

type eventsPage struct {
	Events []feed.Event `json:"events"`
	Next   string       `json:"next"`
}

// getEvents serves GET /v1/events: a page of events after the cursor,
// waiting up to ?wait= for the first one when there is nothing yet.
func (s *Server) getEvents(w http.ResponseWriter, r *http.Request, ec EventsConfig) {
	q, err := parseEventsQuery(r, ec.MaxWait)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	start := time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), q.wait+s.opts.RequestTimeout)
	defer cancel()
	last, err := ec.Feed.Last(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if q.after > last {
		// A cursor this journal never gave out: another deployment's, or
		// one from before a restore. Continuing would silently skip events.
		s.writeError(w, r, badRequest("after", "is beyond the end of this journal (last cursor "+
			strconv.FormatUint(last, 10)+")"))
		return
	}
	cur := q.after
	p := viewer(r)
	for {
		events, next, err := ec.Feed.Read(ctx, cur, q.limit, q.types)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if p.Scoped() {
			// Other merchants' events are left out as if never journaled;
			// a page left empty is a stretch without matches, as for types.
			events = slices.DeleteFunc(events, func(e feed.Event) bool { return !p.Sees(e.Merchant) })
		}
		elapsed := time.Since(start)
		if len(events) > 0 || (next != cur && elapsed >= max(q.wait, scanBudget)) {
			writeJSON(w, http.StatusOK, eventsPage{Events: events, Next: strconv.FormatUint(next, 10)})
			return
		}
		if next != cur { // a stretch without matches: keep scanning
			cur = next
			continue
		}
		if elapsed >= q.wait || isClosed(ec.Done) {
			writeJSON(w, http.StatusOK, eventsPage{Events: events, Next: strconv.FormatUint(cur, 10)})
			return
		}
		err = s.waitEvents(ctx, ec, cur, q.wait-elapsed)
		if err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			s.writeError(w, r, err)
			return
		}
		if err != nil {
			// The wait is over (or the client left, or the server is
			// shutting down): answer what there is.
			writeJSON(w, http.StatusOK, eventsPage{Events: []feed.Event{}, Next: strconv.FormatUint(cur, 10)})
			return
		}
	}
}

// waitEvents waits up to d for a record after cur, ending early when
// ec.Done is closed.
func (s *Server) waitEvents(ctx context.Context, ec EventsConfig, cur uint64, d time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	if ec.Done != nil {
		go func() {
			select {
			case <-ec.Done:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	return ec.Feed.Wait(wctx, cur)
}

func isClosed(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

type endpointView struct {
	Name                        string  `json:"name"`
	Cursor                      string  `json:"cursor"`
	EventsBehind                uint64  `json:"events_behind"`
	Parked                      int     `json:"parked"`
	OldestUndeliveredAgeSeconds float64 `json:"oldest_undelivered_age_seconds"`
	Delivered                   uint64  `json:"delivered"`
	FailedAttempts              uint64  `json:"failed_attempts"`
}

func (s *Server) getWebhooks(w http.ResponseWriter, r *http.Request, wh Webhooks) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	lags, err := wh.Lag(ctx)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	views := make([]endpointView, len(lags))
	for i, l := range lags {
		views[i] = endpointView{Name: l.Name, Cursor: strconv.FormatUint(l.Cursor, 10), EventsBehind: l.EventsBehind,
			Parked: l.Parked, OldestUndeliveredAgeSeconds: l.OldestUndeliveredAge.Seconds(),
			Delivered: l.Delivered, FailedAttempts: l.FailedAttempts}
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoints": views})
}

func (s *Server) getParked(w http.ResponseWriter, r *http.Request, wh Webhooks) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	name := pathVars(r)["endpoint"]
	parked, err := wh.Parked(ctx, name)
	if err != nil {
		s.writeError(w, r, webhookError(err))
		return
	}
	if p := viewer(r); p.Scoped() {
		parked = slices.DeleteFunc(parked, func(e webhook.ParkedEvent) bool { return !p.Sees(e.Event.Merchant) })
	}
	writeJSON(w, http.StatusOK, map[string]any{"endpoint": name, "parked": parked})
}

func (s *Server) replayParked(w http.ResponseWriter, r *http.Request, wh Webhooks) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	vars := pathVars(r)
	id := vars["event_id"]
	if _, err := feed.ParseID(id); err != nil {
		s.writeError(w, r, badRequest("event_id", "is not a valid event id"))
		return
	}
	if p := viewer(r); p.Scoped() {
		// Another merchant's parked event is answered as one not parked.
		parked, err := wh.Parked(ctx, vars["endpoint"])
		if err != nil {
			s.writeError(w, r, webhookError(err))
			return
		}
		// Only an event seen parked here is replayed, so one parked
		// after this look cannot slip through unchecked.
		i := slices.IndexFunc(parked, func(e webhook.ParkedEvent) bool { return e.Event.ID == id })
		if i < 0 || !p.Sees(parked[i].Event.Merchant) {
			s.writeError(w, r, webhookError(webhook.ErrNotParked))
			return
		}
	}
	if err := wh.Replay(ctx, vars["endpoint"], id); err != nil {
		s.writeError(w, r, webhookError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"endpoint": vars["endpoint"], "event_id": id, "status": "replaying"})
}

func (s *Server) replayAllParked(w http.ResponseWriter, r *http.Request, wh Webhooks) {
	ctx, cancel := s.ctx(r)
	defer cancel()
	name := pathVars(r)["endpoint"]
	n, err := wh.ReplayAll(ctx, name)
	if err != nil {
		s.writeError(w, r, webhookError(err))
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"endpoint": name, "replaying": n})
}

// webhookError maps the dispatcher's "no such thing" errors to not_found.
func webhookError(err error) error {
	switch {
	case errors.Is(err, webhook.ErrUnknownEndpoint):
		return &apiError{code: string(reservation.CodeNotFound), field: "endpoint", msg: "no such webhook endpoint"}
	case errors.Is(err, webhook.ErrNotParked):
		return &apiError{code: string(reservation.CodeNotFound), field: "event_id", msg: "the event is not parked at this endpoint"}
	}
	return err
}
