package pgrefund

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

// Notify enables the WeChat Pay v3 notification endpoint.
type Notify struct {
	MchID    string
	Verifier *wechatpay.Verifier
	APIv3Key []byte
}

// Options configure a Server.
type Options struct {
	Store    *Store          // required
	Provider actors.Provider // required; called after the claim commits, never in a transaction
	// Encode builds a refund submission's bytes (the provider's encoder); required.
	Encode func(reservation.RefundRequest) ([]byte, error)
	// Token, if set, is required as "Authorization: Bearer" on every route
	// but /healthz and the notification endpoint. Empty means none.
	Token string
	// Prefix starts refund numbers; empty means "R" (refundd's default).
	Prefix string
	// Notify, if set, serves POST /v1/notify/wechatpay/refund.
	Notify *Notify
	// MaxWait caps ?wait=; zero means 10s.
	MaxWait time.Duration
	// Logger; nil means slog.Default().
	Logger *slog.Logger
}

// Server serves refundd's JSON API shape on the seeds' design.
type Server struct {
	opts Options
	mux  *http.ServeMux
	log  *slog.Logger
	bg   sync.WaitGroup // submissions answered before the provider was called
}

// NewServer builds the handler.
func NewServer(opts Options) *Server {
	if opts.Prefix == "" {
		opts.Prefix = "R"
	}
	if opts.MaxWait <= 0 {
		opts.MaxWait = 10 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), log: opts.Logger}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("POST /v1/reservations", s.auth(s.register))
	s.mux.HandleFunc("GET /v1/reservations/{id}", s.auth(s.getReservation))
	s.mux.HandleFunc("POST /v1/reservations/{id}/refunds", s.auth(s.refund))
	s.mux.HandleFunc("GET /v1/reservations/{id}/refunds/{no}", s.auth(s.getRefund))
	if opts.Notify != nil {
		s.mux.HandleFunc("POST /v1/notify/wechatpay/refund", s.notify)
	}
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Wait waits for submissions still running in the background.
func (s *Server) Wait() { s.bg.Wait() }

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.opts.Token == "" {
		return h
	}
	want := []byte("Bearer " + s.opts.Token)
	return func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeJSON(w, http.StatusUnauthorized, errorBody("unauthenticated", "a valid bearer token is required"))
			return
		}
		h(w, r)
	}
}

func errorBody(code, msg string) map[string]any {
	return map[string]any{"error": map[string]string{"code": code, "message": msg}}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) writeError(w http.ResponseWriter, err error) {
	code, status := CodeOf(err)
	if status >= 500 {
		s.log.Error("request failed", "err", err)
	}
	writeJSON(w, status, errorBody(code, err.Error()))
}

func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.Join(ErrInvalid, err)
	}
	return nil
}

// Views: refundd's JSON shapes.
type reservationView struct {
	ID            string       `json:"id"`
	UserID        string       `json:"user_id"`
	OutTradeNo    string       `json:"out_trade_no"`
	TransactionID string       `json:"transaction_id,omitempty"`
	Amount        int64        `json:"amount"`
	Currency      string       `json:"currency"`
	Status        string       `json:"status"`
	Refunded      int64        `json:"refunded"`
	InFlight      int64        `json:"in_flight"`
	Refundable    int64        `json:"refundable"`
	Refunds       []refundView `json:"refunds"`
	RegisteredAt  time.Time    `json:"registered_at"`
}

type refundView struct {
	RefundNo         string     `json:"refund_no"`
	ReservationID    string     `json:"reservation_id"`
	Amount           int64      `json:"amount"`
	State            string     `json:"state"`
	Reason           string     `json:"reason,omitempty"`
	ProviderRefundID string     `json:"provider_refund_id,omitempty"`
	Attempts         int        `json:"attempts"`
	CreatedAt        time.Time  `json:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at"`
	SucceededAt      *time.Time `json:"succeeded_at,omitempty"`
}

func viewRefund(r Refund) refundView {
	return refundView{RefundNo: r.RefundNo, ReservationID: r.ReservationID, Amount: r.Amount, State: r.Status, Reason: r.Reason,
		ProviderRefundID: r.ProviderRefundID, Attempts: r.Attempts, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, SucceededAt: r.SucceededAt}
}

func viewReservation(r Reservation) reservationView {
	v := reservationView{ID: r.ID, UserID: r.UserID, OutTradeNo: r.OutTradeNo, TransactionID: r.TransactionID, Amount: r.Amount,
		Currency: r.Currency, Status: r.Status, Refunded: r.Refunded, InFlight: r.InFlight,
		Refundable: r.Amount - r.Refunded - r.InFlight, Refunds: make([]refundView, 0, len(r.Refunds)), RegisteredAt: r.RegisteredAt}
	for _, f := range r.Refunds {
		v.Refunds = append(v.Refunds, viewRefund(f))
	}
	return v
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var req struct {
		ID            string `json:"id"`
		UserID        string `json:"user_id"`
		OutTradeNo    string `json:"out_trade_no"`
		TransactionID string `json:"transaction_id"`
		Amount        int64  `json:"amount"`
		Currency      string `json:"currency"`
		PaidAt        string `json:"paid_at"`
	}
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if !reservation.ValidReservationID(req.ID) || req.UserID == "" || req.OutTradeNo == "" || req.Amount <= 0 || req.Currency == "" {
		s.writeError(w, ErrInvalid)
		return
	}
	res, created, err := s.opts.Store.Register(r.Context(), Reservation{ID: req.ID, UserID: req.UserID, OutTradeNo: req.OutTradeNo,
		TransactionID: req.TransactionID, Amount: req.Amount, Currency: req.Currency})
	if err != nil {
		s.writeError(w, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, viewReservation(res))
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) {
	res, err := s.opts.Store.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, viewReservation(res))
}

func (s *Server) parseWait(r *http.Request) (time.Duration, error) {
	v := r.URL.Query().Get("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, ErrInvalid
	}
	return min(d, s.opts.MaxWait), nil
}

// refund claims, then submits to the provider after the claim committed:
// in the request when the caller waits (?wait=), otherwise in the
// background after answering 202.
func (s *Server) refund(w http.ResponseWriter, r *http.Request) {
	id, key := r.PathValue("id"), r.Header.Get("Idempotency-Key")
	wait, err := s.parseWait(r)
	if err != nil || !reservation.ValidIdempotencyKey(key) {
		s.writeError(w, ErrInvalid)
		return
	}
	var req struct {
		UserID string `json:"user_id"`
		Amount *int64 `json:"amount"`
		Reason string `json:"reason"`
	}
	if err := decode(r, &req); err != nil {
		s.writeError(w, err)
		return
	}
	if req.Amount != nil && *req.Amount <= 0 {
		s.writeError(w, ErrInvalid)
		return
	}
	ref, order, created, err := s.opts.Store.Claim(r.Context(), id, req.UserID, key, req.Amount, req.Reason, s.opts.Prefix)
	if err != nil {
		s.writeError(w, err)
		return
	}
	switch {
	case created && wait > 0:
		ref = s.submit(r.Context(), ref, order)
	case created:
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.submit(ctx, ref, order)
		}()
	case wait > 0 && !ref.Terminal():
		ref = s.await(r.Context(), id, ref, wait)
	}
	status := http.StatusOK
	if created && !ref.Terminal() {
		status = http.StatusAccepted
	}
	writeJSON(w, status, viewRefund(ref))
}

// submit calls the provider with the stable refund number and records its
// answer by conditional UPDATE; it returns the refund as recorded.
func (s *Server) submit(ctx context.Context, ref Refund, o Order) Refund {
	body, err := s.opts.Encode(reservation.RefundRequest{RefundNo: ref.RefundNo, OutTradeNo: o.OutTradeNo,
		TransactionID: o.TransactionID, Amount: ref.Amount, Total: o.Total, Currency: o.Currency, Reason: ref.Reason})
	if err != nil {
		s.log.Error("provider request body", "refund_no", ref.RefundNo, "err", err)
		return ref
	}
	out := outcome(s.opts.Provider.Submit(ctx, ref.RefundNo, body, 1))
	changed, err := s.opts.Store.Record(ctx, ref.RefundNo, out, 1)
	if err != nil {
		s.log.Error("recording the provider's answer failed; the refund stays as claimed", "refund_no", ref.RefundNo, "err", err)
		return ref
	}
	if !changed {
		// Someone (a notification) got there first: read what is stored.
		if cur, err := s.opts.Store.Refund(ctx, ref.ReservationID, ref.RefundNo); err == nil {
			return cur
		}
		return ref
	}
	ref.Status, ref.Attempts, ref.UpdatedAt = out.Status, ref.Attempts+1, time.Now().UTC()
	if out.ProviderID != "" {
		ref.ProviderRefundID = out.ProviderID
	}
	if out.Status == StateSucceeded {
		t := out.SuccessTime
		ref.SucceededAt = &t
	}
	return ref
}

// outcome maps a provider answer onto the seed's refund states: a
// rejection is a failure (it released nothing at the provider).
func outcome(o reservation.Outcome) Outcome {
	out := Outcome{ProviderID: o.ProviderID, Message: o.Message, SuccessTime: o.SuccessTime}
	switch o.Kind {
	case reservation.OutcomeSucceeded:
		out.Status = StateSucceeded
	case reservation.OutcomeFailed, reservation.OutcomeRejected:
		out.Status = StateFailed
	case reservation.OutcomeProcessing:
		out.Status = StateProcessing
	case reservation.OutcomeAbnormal:
		out.Status = StateAbnormal
	default:
		out.Status = StateUnknown
	}
	return out
}

// await polls a refund until it is final or wait passes.
func (s *Server) await(ctx context.Context, id string, ref Refund, wait time.Duration) Refund {
	deadline := time.Now().Add(wait)
	pause := 2 * time.Millisecond
	for !ref.Terminal() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ref
		case <-time.After(pause):
		}
		pause = min(pause*2, 50*time.Millisecond)
		cur, err := s.opts.Store.Refund(ctx, id, ref.RefundNo)
		if err != nil {
			return ref
		}
		ref = cur
	}
	return ref
}

func (s *Server) getRefund(w http.ResponseWriter, r *http.Request) {
	wait, err := s.parseWait(r)
	if err != nil {
		s.writeError(w, err)
		return
	}
	ref, err := s.opts.Store.Refund(r.Context(), r.PathValue("id"), r.PathValue("no"))
	if err != nil {
		s.writeError(w, err)
		return
	}
	if wait > 0 && !ref.Terminal() {
		ref = s.await(r.Context(), r.PathValue("id"), ref, wait)
	}
	writeJSON(w, http.StatusOK, viewRefund(ref))
}

// notify verifies and decrypts a v3 refund notification, checks it against
// the refund, and applies it (unique record + conditional UPDATE) before
// acknowledging with 204.
func (s *Server) notify(w http.ResponseWriter, r *http.Request) {
	n := s.opts.Notify
	fail := func(status int, msg string) {
		writeJSON(w, status, map[string]string{"code": "FAIL", "message": msg})
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wechatpay.MaxNotificationSize))
	if err != nil {
		fail(http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	_, res, err := wechatpay.ParseRefundNotification(n.Verifier, n.APIv3Key, wechatpay.HeadersFrom(r.Header), body)
	if err != nil {
		fail(http.StatusUnauthorized, "verification failed")
		return
	}
	if n.MchID != "" && res.MchID != n.MchID {
		fail(http.StatusBadRequest, "mchid does not match")
		return
	}
	t, err := s.opts.Store.NotifyTarget(r.Context(), res.OutRefundNo)
	if errors.Is(err, ErrNotFound) {
		fail(http.StatusNotFound, "unknown out_refund_no")
		return
	}
	if err != nil {
		fail(http.StatusInternalServerError, "temporarily unavailable")
		return
	}
	if res.OutTradeNo != t.OutTradeNo || res.Amount.Refund != t.Amount || res.Amount.Total != t.Total ||
		(t.ProviderID != "" && res.RefundID != "" && res.RefundID != t.ProviderID) {
		fail(http.StatusBadRequest, "does not match our records")
		return
	}
	success, _ := time.Parse(time.RFC3339, res.SuccessTime)
	if _, err := s.opts.Store.ApplyNotification(r.Context(), res.OutRefundNo, res.RefundStatus, res.RefundID, success, string(body)); err != nil {
		if errors.Is(err, ErrInvalid) {
			fail(http.StatusBadRequest, "unsupported refund_status")
			return
		}
		s.log.Error("notification not recorded; WeChat will retry", "out_refund_no", res.OutRefundNo, "err", err)
		fail(http.StatusInternalServerError, "temporarily unavailable")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
