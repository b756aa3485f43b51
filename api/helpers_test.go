package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

// statusFor is the spec's code -> status table, written out independently of
// api/errors.go so that a change there has to be made here too.
var statusFor = map[string]int{
	"invalid_argument":        http.StatusBadRequest,
	"not_found":               http.StatusNotFound,
	"route_not_found":         http.StatusNotFound,
	"unauthenticated":         http.StatusUnauthorized,
	"forbidden":               http.StatusForbidden,
	"merchant_scope":          http.StatusForbidden,
	"refund_window_closed":    http.StatusConflict,
	"archived":                http.StatusConflict,
	"method_not_allowed":      http.StatusMethodNotAllowed,
	"conflict":                http.StatusConflict,
	"out_trade_no_taken":      http.StatusConflict,
	"insufficient_refundable": http.StatusConflict,
	"reservation_canceled":    http.StatusConflict,
	"refund_limit_reached":    http.StatusConflict,
	"invalid_state":           http.StatusConflict,
	"outcome_mismatch":        http.StatusConflict,
	"refund_settling":         http.StatusConflict,
	"release_unconfirmed":     http.StatusConflict,
	"provider_has_refund":     http.StatusConflict,
	"merchant_not_configured": http.StatusConflict,
	"self_approval":           http.StatusForbidden,
	"idempotency_key_reused":  http.StatusUnprocessableEntity,
	"body_too_large":          http.StatusRequestEntityTooLarge,
	"internal":                http.StatusInternalServerError,
	"unavailable":             http.StatusServiceUnavailable,
	"encryption_unavailable":  http.StatusServiceUnavailable,
	"timeout":                 http.StatusGatewayTimeout,
	"rate_limited":            http.StatusTooManyRequests,
}

var refundNoRE = regexp.MustCompile(`^[0-9A-Za-z_-]{1,64}$`)

// testEnv is a real engine (bbolt journal in t.TempDir(), eventstore,
// in-process sandbox provider) behind the real handler.
type testEnv struct {
	handler http.Handler
	srv     *httptest.Server // nil when envOptions.noHTTP
	engine  *actors.Engine
	sim     *simprovider.Provider
	db      *journal.DB // the engine's journal
}

type envOptions struct {
	// delay is the sandbox's time from acceptance to success; zero succeeds
	// during Submit, time.Hour keeps refunds in flight for the whole test.
	delay time.Duration
	// notify routes sandbox notifications to the engine by refund number,
	// the way cmd/refundd does.
	notify bool
	fault  simprovider.Fault
	api    api.Options
	// noSync skips fsync (fuzzing only).
	noSync bool
	// noHTTP skips the httptest server; requests go to the handler directly.
	noHTTP bool
	idle   time.Duration
	// policy replaces the engine's (refund numbers "T..." by default).
	policy *reservation.Policy
	// spacing is the policy's RefundSpacing; zero: none.
	spacing time.Duration
	// engineLog is the engine's logger; nil: quiet.
	engineLog *slog.Logger
}

func newEnv(t testing.TB, o envOptions) *testEnv {
	t.Helper()
	var db *journal.DB
	if o.noSync {
		db = journaltest.OpenWith(t, &journal.Options{NoSync: true})
	} else {
		db = journaltest.Open(t)
	}
	quiet := quietLogger()
	var live atomic.Pointer[actors.Engine]
	sopts := simprovider.Options{Delay: o.delay, Fault: o.fault}
	if o.notify {
		sopts.Notify = func(no string, out reservation.Outcome) { notify(live.Load(), no, out) }
	}
	sim := simprovider.New(sopts)
	policy := reservation.Policy{RefundNoPrefix: "T"}
	if o.policy != nil {
		policy = *o.policy
	}
	if o.spacing > 0 {
		policy.RefundSpacing = o.spacing
	}
	engineLog := quiet
	if o.engineLog != nil {
		engineLog = o.engineLog
	}
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: sim, Encode: simprovider.Encode, Logger: engineLog, IdleTimeout: o.idle, Policy: policy,
	})
	if err != nil {
		t.Fatalf("actors.New: %v", err)
	}
	live.Store(engine)
	// Cleanups run last-in first-out: server, then engine, then journal.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := engine.Close(ctx); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	if o.api.Logger == nil {
		o.api.Logger = quiet
	}
	if o.api.Search == nil {
		o.api.Search = eventstore.Reader{DB: db}
	}
	if o.api.List == nil {
		o.api.List = eventstore.Reader{DB: db}
	}
	e := &testEnv{handler: api.New(engine, o.api), engine: engine, sim: sim, db: db}
	if !o.noHTTP {
		e.srv = httptest.NewServer(e.handler)
		t.Cleanup(e.srv.Close)
	}
	return e
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// notify is cmd/refundd's memory provider notification path: the engine's
// one notification call. An error (the engine closed at the end of a test)
// is left to a due time, which would recover it.
func notify(engine *actors.Engine, no string, o reservation.Outcome) {
	if engine == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = engine.RecordNotification(ctx, actors.ProviderPrincipal, reservation.Notification{RefundNo: no, Outcome: o})
}

// serve hands req to the handler directly, past the HTTP client's checks
// (header values with control characters, for one).
func (e *testEnv) serve(req *http.Request) response {
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)
	return response{status: rec.Code, header: rec.Header(), body: rec.Body.Bytes()}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return http.StatusText(r.status) + " " + string(r.body) }

// do sends one request. hdr holds header name/value pairs; Content-Type is
// application/json unless hdr sets it ("" removes it).
func (e *testEnv) do(t testing.TB, method, path, body string, hdr ...string) response {
	t.Helper()
	return e.doBytes(t, method, path, []byte(body), hdr...)
}

func (e *testEnv) doBytes(t testing.TB, method, path string, body []byte, hdr ...string) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	var req *http.Request
	var err error
	if e.srv != nil {
		req, err = http.NewRequest(method, e.srv.URL+path, rd)
	} else {
		req = httptest.NewRequest(method, path, rd)
	}
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" && hdr[i] == "Content-Type" {
			req.Header.Del(hdr[i])
			continue
		}
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if e.srv == nil {
		return e.serve(req)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// Views as the spec describes them, decoded independently of api/views.go.
type reservationJSON struct {
	ID            string       `json:"id"`
	Merchant      string       `json:"merchant"`
	UserID        string       `json:"user_id"`
	OutTradeNo    string       `json:"out_trade_no"`
	TransactionID string       `json:"transaction_id"`
	Amount        int64        `json:"amount"`
	Currency      string       `json:"currency"`
	PaidAt        *time.Time   `json:"paid_at"`
	Status        string       `json:"status"`
	Refunded      int64        `json:"refunded"`
	InFlight      int64        `json:"in_flight"`
	Refundable    int64        `json:"refundable"`
	Refunds       []refundJSON `json:"refunds"`
	RegisteredAt  time.Time    `json:"registered_at"`
}

type refundJSON struct {
	RefundNo      string            `json:"refund_no"`
	ReservationID string            `json:"reservation_id"`
	Merchant      string            `json:"merchant"`
	Amount        int64             `json:"amount"`
	State         string            `json:"state"`
	Reason        string            `json:"reason"`
	ReasonCode    string            `json:"reason_code"`
	Metadata      map[string]string `json:"metadata"`
	Code          string            `json:"code"`
	Attempts      int               `json:"attempts"`
	NextCheckAt   time.Time         `json:"next_check_at"` // zero when absent
	CreatedAt     time.Time         `json:"created_at"`
	UpdatedAt     time.Time         `json:"updated_at"`
	SucceededAt   *time.Time        `json:"succeeded_at"`
}

type errorJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field"`
}

var refundStates = map[string]bool{
	"PROCESSING": true, "SUCCEEDED": true, "FAILED": true, "UNKNOWN": true, "REJECTED": true, "ABNORMAL": true, "PENDING_APPROVAL": true,
}

// checkJSON fails unless r is a JSON answer.
func checkJSON(t testing.TB, r response) {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json (status %d, body %q)", ct, r.status, r.body)
	}
	if !json.Valid(r.body) {
		t.Fatalf("body is not JSON: status %d, %q", r.status, r.body)
	}
}

// errorOf checks the error shape {"error":{"code","message"[,"field"]}}: no
// other keys, a known code, and the status the table gives that code.
func errorOf(t testing.TB, r response) errorJSON {
	t.Helper()
	checkJSON(t, r)
	var top map[string]json.RawMessage
	if err := json.Unmarshal(r.body, &top); err != nil {
		t.Fatalf("error body is not an object: %q", r.body)
	}
	if len(top) != 1 || top["error"] == nil {
		t.Fatalf("error body must be {\"error\":{...}} only, got %s", r.body)
	}
	var inner map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &inner); err != nil {
		t.Fatalf("error member is not an object: %s", r.body)
	}
	for k := range inner {
		if k != "code" && k != "message" && k != "field" {
			t.Fatalf("unexpected key %q in error: %s", k, r.body)
		}
	}
	var d errorJSON
	dec := json.NewDecoder(bytes.NewReader(top["error"]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("error member: %v: %s", err, r.body)
	}
	if d.Code == "" || d.Message == "" {
		t.Fatalf("error needs a code and a message: %s", r.body)
	}
	want, ok := statusFor[d.Code]
	if !ok {
		t.Fatalf("unknown error code %q (status %d): %s", d.Code, r.status, r.body)
	}
	if r.status != want {
		t.Fatalf("code %q answered with status %d, the table says %d", d.Code, r.status, want)
	}
	return d
}

// wantError asserts status, code and (unless field is "*") the field.
func wantError(t testing.TB, r response, status int, code, field string) errorJSON {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	d := errorOf(t, r)
	if d.Code != code {
		t.Fatalf("code = %q, want %q; body %s", d.Code, code, r.body)
	}
	if field != "*" && d.Field != field {
		t.Fatalf("field = %q, want %q; body %s", d.Field, field, r.body)
	}
	return d
}

func decodeReservation(t testing.TB, r response, status int) reservationJSON {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	checkJSON(t, r)
	var v reservationJSON
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("reservation body: %v: %s", err, r.body)
	}
	checkReservation(t, v, r.body)
	return v
}

// checkReservation asserts the invariants every reservation view must keep.
func checkReservation(t testing.TB, v reservationJSON, raw []byte) {
	t.Helper()
	if !reservation.ValidReservationID(v.ID) || !reservation.ValidMerchant(v.Merchant) || v.Amount <= 0 || v.Currency != "CNY" {
		t.Fatalf("malformed reservation: %s", raw)
	}
	if v.Status != "ACCEPTED" && v.Status != "CANCELED" {
		t.Fatalf("status %q: %s", v.Status, raw)
	}
	if v.Refunded < 0 || v.InFlight < 0 || v.Refunded+v.InFlight > v.Amount {
		t.Fatalf("refunded %d + in flight %d > paid %d: %s", v.Refunded, v.InFlight, v.Amount, raw)
	}
	if v.Refundable != v.Amount-v.Refunded-v.InFlight {
		t.Fatalf("refundable %d != %d - %d - %d", v.Refundable, v.Amount, v.Refunded, v.InFlight)
	}
	if v.Refunds == nil || !bytes.Contains(raw, []byte(`"refunds":[`)) {
		t.Fatalf("refunds must be a JSON array, even when empty: %s", raw)
	}
	var refunded, held int64
	for _, rf := range v.Refunds {
		checkRefund(t, rf, v.ID, raw)
		if rf.Merchant != v.Merchant {
			t.Fatalf("refund %s of merchant %q in a reservation of %q: %s", rf.RefundNo, rf.Merchant, v.Merchant, raw)
		}
		switch rf.State {
		case "SUCCEEDED":
			refunded += rf.Amount
		case "FAILED":
		default:
			held += rf.Amount
		}
	}
	if refunded != v.Refunded || held != v.InFlight {
		t.Fatalf("totals do not match the refunds (%d/%d vs %d/%d): %s", v.Refunded, v.InFlight, refunded, held, raw)
	}
	if (v.Status == "CANCELED") != (v.Refunded == v.Amount) {
		t.Fatalf("status %s with refunded %d of %d", v.Status, v.Refunded, v.Amount)
	}
}

func decodeRefund(t testing.TB, r response, status int) refundJSON {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	checkJSON(t, r)
	var v refundJSON
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("refund body: %v: %s", err, r.body)
	}
	checkRefund(t, v, v.ReservationID, r.body)
	return v
}

func checkRefund(t testing.TB, v refundJSON, reservationID string, raw []byte) {
	t.Helper()
	if !refundNoRE.MatchString(v.RefundNo) || v.ReservationID != reservationID || !reservation.ValidMerchant(v.Merchant) || v.Amount <= 0 ||
		!refundStates[v.State] || v.CreatedAt.IsZero() || v.UpdatedAt.Before(v.CreatedAt) {
		t.Fatalf("malformed refund: %s", raw)
	}
	if (v.State == "SUCCEEDED") != (v.SucceededAt != nil) {
		t.Fatalf("succeeded_at must be set exactly when SUCCEEDED: %s", raw)
	}
}

// jsonKeys returns the sorted top-level keys of a JSON object.
func jsonKeys(t testing.TB, raw []byte) string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not an object: %s", raw)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return strings.Join(keys, ",")
}

// register registers id for user "u-"+id, order "ORD-"+id.
func (e *testEnv) register(t testing.TB, id string, amount int64) reservationJSON {
	t.Helper()
	r := e.do(t, http.MethodPost, "/v1/reservations", registerBody(id, amount))
	return decodeReservation(t, r, http.StatusCreated)
}

func registerBody(id string, amount int64) string {
	b, _ := json.Marshal(map[string]any{
		"id": id, "user_id": "u-" + id, "out_trade_no": "ORD-" + id, "amount": amount, "currency": "CNY",
	})
	return string(b)
}

// refund posts a refund request for the reservation's own user.
func (e *testEnv) refund(t testing.TB, id, key, body string) response {
	t.Helper()
	return e.do(t, http.MethodPost, "/v1/reservations/"+id+"/refunds", body, "Idempotency-Key", key)
}

func (e *testEnv) get(t testing.TB, id string) reservationJSON {
	t.Helper()
	return decodeReservation(t, e.do(t, http.MethodGet, "/v1/reservations/"+id, ""), http.StatusOK)
}

// succeed delivers a provider notification that refund no succeeded,
// complete as WeChat Pay sends it.
func (e *testEnv) succeed(t testing.TB, id, no string) {
	t.Helper()
	st, err := e.engine.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	r := st.Refund(no)
	pid := r.ProviderID
	if pid == "" {
		pid = simprovider.RefundID(no) // the memory provider's id
	}
	_, _, err = e.engine.Execute(context.Background(), id, actors.ProviderPrincipal, reservation.RecordOutcome{
		RefundNo: no, Source: reservation.SourceNotification,
		Outcome: reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: pid, OutTradeNo: st.OutTradeNo,
			RefundAmount: r.Amount, TotalAmount: st.Amount, SuccessTime: time.Now().UTC()},
	})
	if err != nil {
		t.Fatalf("record success of %s: %v", no, err)
	}
}

// waitFor polls cond until it holds or 30 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (e *testEnv) refundState(t testing.TB, id, no string) string {
	for _, rf := range e.get(t, id).Refunds {
		if rf.RefundNo == no {
			return rf.State
		}
	}
	return ""
}

// send sends req, built by the caller, to the test server as it is.
func (e *testEnv) send(t testing.TB, req *http.Request) response {
	t.Helper()
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// submitted waits until every refund of reservation id has been accepted
// by the provider, and returns the reservation as GET answers it then: a
// snapshot that only a new request can change.
func (e *testEnv) submitted(t testing.TB, id string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := e.engine.Await(ctx, id, func(st *reservation.State) bool {
		for _, rf := range st.Refunds {
			if rf.ProviderID == "" && !rf.State.Terminal() {
				return false
			}
		}
		return true
	}); err != nil {
		t.Fatalf("await submission of %s: %v", id, err)
	}
	return e.do(t, http.MethodGet, "/v1/reservations/"+id, "")
}
