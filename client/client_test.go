package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/client"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

func newClient(t testing.TB, url, token string) *client.Client {
	t.Helper()
	c, err := client.New(url, client.Options{Token: token, BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func amount(v int64) *int64 { return &v }

func register(t *testing.T, c *client.Client, id string, paid int64) {
	t.Helper()
	if _, _, err := c.RegisterReservation(context.Background(), client.Registration{
		ID: id, UserID: "u-" + id, OutTradeNo: "OT-" + id, Amount: paid, Currency: "CNY"}); err != nil {
		t.Fatalf("register %s: %v", id, err)
	}
}

// The lifecycle and every read, against the real service.
func TestClient_EveryRouteAgainstRefundd(t *testing.T) {
	r := newRefundd(t, refunddOptions{})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	ops := newClient(t, r.URL, operatorToken)

	res, created, err := svc.RegisterReservation(ctx, client.Registration{ID: "r1", UserID: "u1", OutTradeNo: "OT1", Amount: 10000, Currency: "CNY"})
	if err != nil || !created || res.Refundable != 10000 || res.Status == "" || res.Merchant != "default" {
		t.Fatalf("register: %+v created=%v err=%v", res, created, err)
	}
	if _, created, err := svc.RegisterReservation(ctx, client.Registration{ID: "r1", UserID: "u1", OutTradeNo: "OT1", Amount: 10000, Currency: "CNY"}); err != nil || created {
		t.Fatalf("register again: created=%v err=%v, want a replay", created, err)
	}
	// Naming the single merchant is the same registration.
	if _, created, err := svc.RegisterReservation(ctx, client.Registration{ID: "r1", UserID: "u1", OutTradeNo: "OT1", Amount: 10000,
		Currency: "CNY", Merchant: "default"}); err != nil || created {
		t.Fatalf("register again naming the merchant: created=%v err=%v, want a replay", created, err)
	}
	rf, err := svc.RequestRefund(ctx, "r1", client.RefundRequest{UserID: "u1", Amount: amount(3000), Reason: "late", IdempotencyKey: "order-7-line-1", Wait: 2 * time.Second})
	if err != nil || rf.State != client.StateSucceeded || rf.Amount != 3000 || !rf.Terminal() || rf.Merchant != "default" {
		t.Fatalf("refund with wait: %+v err=%v", rf, err)
	}
	again, err := svc.RequestRefund(ctx, "r1", client.RefundRequest{UserID: "u1", Amount: amount(3000), Reason: "late", IdempotencyKey: "order-7-line-1"})
	if err != nil || again.RefundNo != rf.RefundNo {
		t.Fatalf("same key again: %+v err=%v, want refund %s", again, err, rf.RefundNo)
	}
	got, err := svc.GetRefund(ctx, "r1", rf.RefundNo, time.Second)
	if err != nil || got.State != client.StateSucceeded || got.Merchant != "default" {
		t.Fatalf("get refund: %+v %v", got, err)
	}
	res, err = svc.GetReservation(ctx, "r1")
	if err != nil || res.Refunded != 3000 || res.Refundable != 7000 || len(res.Refunds) != 1 {
		t.Fatalf("get reservation: %+v %v", res, err)
	}
	tl, err := ops.Timeline(ctx, "r1")
	if err != nil || tl.ReservationID != "r1" || tl.Merchant != "default" || len(tl.Events) < 2 {
		t.Fatalf("timeline: %+v %v", tl, err)
	}
	found, err := ops.Search(ctx, rf.RefundNo, 5)
	if err != nil || len(found.Matches) != 1 || found.Matches[0].By != "refund_no" || found.Matches[0].RefundNo != rf.RefundNo ||
		found.Matches[0].Reservation.ID != "r1" {
		t.Fatalf("search: %+v %v", found, err)
	}
	refunds, err := ops.ListRefunds(ctx, client.ListQuery{States: []string{client.StateSucceeded}, AmountMin: 3000, Limit: 1})
	if err != nil || len(refunds.Refunds) != 1 || refunds.Refunds[0].RefundNo != rf.RefundNo || refunds.Refunds[0].OutTradeNo == "" || refunds.NextCursor != "" {
		t.Fatalf("list refunds: %+v %v", refunds, err)
	}
	if none, err := ops.ListRefunds(ctx, client.ListQuery{AmountMin: 3001}); err != nil || len(none.Refunds) != 0 {
		t.Fatalf("list refunds over 3001 fen: %+v %v", none, err)
	}
	reservations, err := ops.ListReservations(ctx, client.ListQuery{UserID: "u1", RefundStates: []string{client.StateSucceeded}, Oldest: true})
	if err != nil || len(reservations.Reservations) != 1 || reservations.Reservations[0].ID != "r1" {
		t.Fatalf("list reservations: %+v %v", reservations, err)
	}
	if _, err := ops.ListReservations(ctx, client.ListQuery{ReasonCode: "other"}); err != nil {
		t.Fatalf("a reservation list ignores the refunds' reason code: %v", err)
	}
	who, err := ops.Whoami(ctx)
	if err != nil || who.Role != "operator" || !slices.Contains(who.Permissions, "operate") || len(who.Merchants) != 0 {
		t.Fatalf("whoami: %+v %v", who, err)
	}
	sum, err := ops.Summary(ctx)
	if err != nil || len(sum.Attention) == 0 {
		t.Fatalf("summary: %+v %v", sum, err)
	}
	list, err := ops.ListAttention(ctx, client.AttentionQuery{State: "UNKNOWN", Limit: 10})
	if err != nil || len(list.Refunds) != 0 || list.Next != "" {
		t.Fatalf("attention: %+v %v", list, err)
	}
	page, err := svc.Events(ctx, client.EventsQuery{Types: []string{client.EventRefundSucceeded}})
	if err != nil || len(page.Events) != 1 || page.Events[0].RefundNo != rf.RefundNo || page.Events[0].Amount != 3000 ||
		page.Events[0].Merchant != "default" {
		t.Fatalf("events: %+v %v", page, err)
	}
	if err := svc.Healthz(ctx); err != nil {
		t.Fatalf("healthz: %v", err)
	}
	if err := svc.Ready(ctx); err != nil {
		t.Fatalf("ready: %v", err)
	}
	m, err := ops.Metrics(ctx)
	if err != nil || !bytes.Contains(m, []byte("refundd_journal_commit_duration_seconds")) {
		t.Fatalf("metrics: %v\n%.300s", err, m)
	}
	doc, err := svc.OpenAPI(ctx)
	if err != nil || !json.Valid(doc) {
		t.Fatalf("openapi: %v", err)
	}
	head, err := ops.AuditHead(ctx)
	if err != nil || head.Head.Global == 0 || len(head.Head.Hash) != 64 {
		t.Fatalf("audit head: %+v %v", head, err)
	}
	creds, err := ops.Credentials(ctx)
	if err != nil || len(creds.Accounts) != 1 || creds.Accounts[0].Keys[0].Source != "sandbox" || !creds.Accounts[0].APIv3Key {
		t.Fatalf("credentials: %+v %v", creds, err)
	}
	if _, err := svc.Credentials(ctx); err == nil {
		t.Fatal("a service token read the credentials")
	}
	// The sandbox provider reads no credential files: nothing to reload.
	var reloadErr *client.Error
	if _, err := ops.ReloadCredentials(ctx); !errors.As(err, &reloadErr) || reloadErr.Code != client.CodeRestartRequired || reloadErr.Status != 409 {
		t.Fatalf("reload with the sandbox provider: %v", err)
	}
	if _, err := svc.ReloadCredentials(ctx); !errors.As(err, &reloadErr) || reloadErr.Code != client.CodeForbidden {
		t.Fatalf("a service token reloaded the credentials: %v", err)
	}
	stats, err := ops.NotifyStats(ctx)
	if err != nil || stats.Notifications == nil {
		t.Fatalf("notify stats: %+v %v", stats, err)
	}
	if q, err := ops.NotifyQuarantine(ctx); err != nil || len(q) != 0 {
		t.Fatalf("quarantine: %+v %v", q, err)
	}
	backup, err := ops.Backup(ctx)
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	n, err := io.Copy(io.Discard, backup)
	backup.Close()
	if err != nil || n == 0 {
		t.Fatalf("backup: %d bytes, %v", n, err)
	}
}

// Failures come back as *client.Error with the API's code, status, field
// and request id.
func TestClient_ErrorsCarryTheAPIsCodes(t *testing.T) {
	r := newRefundd(t, refunddOptions{})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	register(t, svc, "e1", 1000)
	tests := []struct {
		name   string
		call   func() error
		code   client.Code
		status int
		field  string
	}{
		{"unknown reservation", func() error { _, err := svc.GetReservation(ctx, "nope"); return err }, client.CodeNotFound, 404, ""},
		{"more than refundable", func() error {
			_, err := svc.RequestRefund(ctx, "e1", client.RefundRequest{UserID: "u-e1", Amount: amount(5000)})
			return err
		}, client.CodeInsufficientRefundable, 409, ""},
		{"bad reservation id", func() error {
			_, _, err := svc.RegisterReservation(ctx, client.Registration{ID: "bad id", UserID: "u", OutTradeNo: "x", Amount: 1})
			return err
		}, client.CodeInvalid, 400, "id"},
		{"no token", func() error { _, err := newClient(t, r.URL, "").GetReservation(ctx, "e1"); return err }, client.CodeUnauthenticated, 401, ""},
		{"reader may not refund", func() error {
			_, err := newClient(t, r.URL, readerToken).RequestRefund(ctx, "e1", client.RefundRequest{UserID: "u-e1"})
			return err
		}, client.CodeForbidden, 403, ""},
		{"operator action on a final refund", func() error {
			rf, err := svc.RequestRefund(ctx, "e1", client.RefundRequest{UserID: "u-e1", Amount: amount(100), Wait: 2 * time.Second})
			if err != nil {
				return err
			}
			_, err = newClient(t, r.URL, operatorToken).ResolveRefund(ctx, "e1", rf.RefundNo, "again")
			return err
		}, client.CodeInvalidState, 409, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var e *client.Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want a *client.Error", err)
			}
			if e.Code != tt.code || e.Status != tt.status || e.Field != tt.field || e.RequestID == "" || e.Message == "" {
				t.Fatalf("err = %+v, want code %s status %d field %q, a message and a request id", e, tt.code, tt.status, tt.field)
			}
			if client.ErrorCode(err) != tt.code || !errors.Is(err, &client.Error{Code: tt.code}) {
				t.Fatalf("ErrorCode/errors.Is do not see %s in %v", tt.code, err)
			}
		})
	}
}

// attempts records the requests that reached a route of the real server,
// in front of it.
type attempts struct {
	mu   sync.Mutex
	keys []string
}

func (a *attempts) add(key string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.keys = append(a.keys, key)
	return len(a.keys)
}

func (a *attempts) get() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.keys...)
}

// A refund whose answers are lost is retried with the one key of the
// logical call, and makes exactly one refund.
func TestClient_RetriesReuseTheIdempotencyKey(t *testing.T) {
	var seen attempts
	r := newRefundd(t, refunddOptions{front: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if req.Method != http.MethodPost || !strings.HasSuffix(req.URL.Path, "/refunds") {
				next.ServeHTTP(w, req)
				return
			}
			if n := seen.add(req.Header.Get("Idempotency-Key")); n <= 2 {
				// The server acts on the request; its answer never
				// arrives (the connection drops).
				next.ServeHTTP(httptest.NewRecorder(), req)
				panic(http.ErrAbortHandler)
			}
			next.ServeHTTP(w, req)
		})
	}})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	register(t, svc, "k1", 1000)
	rf, err := svc.RequestRefund(ctx, "k1", client.RefundRequest{UserID: "u-k1", Amount: amount(400)})
	if err != nil {
		t.Fatalf("refund after two lost answers: %v", err)
	}
	keys := seen.get()
	if len(keys) != 3 || keys[0] == "" || keys[1] != keys[0] || keys[2] != keys[0] {
		t.Fatalf("attempts carried keys %q, want three attempts with one key", keys)
	}
	res, err := svc.GetReservation(ctx, "k1")
	if err != nil || len(res.Refunds) != 1 || res.Refunds[0].RefundNo != rf.RefundNo || res.Refundable != 600 {
		t.Fatalf("reservation after retries: %+v %v, want the one refund %s", res, err, rf.RefundNo)
	}
	// A second logical call is a second refund, under a new key.
	if _, err := svc.RequestRefund(ctx, "k1", client.RefundRequest{UserID: "u-k1", Amount: amount(100)}); err != nil {
		t.Fatal(err)
	}
	if keys := seen.get(); len(keys) != 4 || keys[3] == keys[0] {
		t.Fatalf("second call's key %q, want a new one (first %q)", keys[3:], keys[0])
	}
}

// What is retried, and what never is.
func TestClient_RetriesOnlyWhatIsSafe(t *testing.T) {
	tests := []struct {
		name string
		// failures answered before the real server is reached
		status, failures int
		call             func(c *client.Client) error
		wantAttempts     int
		wantErr          bool
		operator         bool // call with the operator's token, else the service's
	}{
		{"GET through two 503s", 503, 2, func(c *client.Client) error { _, err := c.GetReservation(context.Background(), "s1"); return err }, 3, false, false},
		{"GET through a 429", 429, 1, func(c *client.Client) error { _, err := c.GetReservation(context.Background(), "s1"); return err }, 2, false, false},
		{"GET gives up after MaxAttempts", 503, 100, func(c *client.Client) error { _, err := c.GetReservation(context.Background(), "s1"); return err }, 4, true, false},
		{"keyed refund through a 504", 504, 1, func(c *client.Client) error {
			_, err := c.RequestRefund(context.Background(), "s1", client.RefundRequest{UserID: "u-s1", Amount: amount(1)})
			return err
		}, 2, false, false},
		{"operator action never", 503, 1, func(c *client.Client) error {
			_, err := c.ReconcileRefund(context.Background(), "s1", "T-s1-1")
			return err
		}, 1, true, true},
		{"replay never", 503, 1, func(c *client.Client) error {
			return c.ReplayParked(context.Background(), "orders", "evt_00000000000000000001")
		}, 1, true, true},
		{"4xx never", 400, 1, func(c *client.Client) error { _, err := c.GetReservation(context.Background(), "s1"); return err }, 1, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var n atomic.Int64
			r := newRefundd(t, refunddOptions{front: func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
					if !strings.HasPrefix(req.URL.Path, "/v1/reservations/s1") && !strings.HasPrefix(req.URL.Path, "/v1/webhooks") {
						next.ServeHTTP(w, req)
						return
					}
					if n.Add(1) <= int64(tt.failures) {
						w.Header().Set("Content-Type", "application/json")
						w.WriteHeader(tt.status)
						_, _ = io.WriteString(w, `{"error":{"code":"unavailable","message":"injected"}}`)
						return
					}
					next.ServeHTTP(w, req)
				})
			}})
			register(t, newClient(t, r.URL, serviceToken), "s1", 1000)
			token := serviceToken
			if tt.operator {
				token = operatorToken
			}
			err := tt.call(newClient(t, r.URL, token))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if got := n.Load(); got != int64(tt.wantAttempts) {
				t.Fatalf("%d attempts, want %d", got, tt.wantAttempts)
			}
		})
	}
}

// The operator actions, on refunds the sandbox refuses.
func TestClient_OperatorActions(t *testing.T) {
	fault := func(op, no string, attempt int) (simprovider.Injected, bool) {
		switch {
		case op == "submit" && attempt == 1 && (strings.HasPrefix(no, "T-rej-") || strings.HasPrefix(no, "T-ab-")):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected, Code: "NOT_ENOUGH"}}, true
		case op == "submit" && strings.HasPrefix(no, "T-abn-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL"}}, true
		case op == "submit" && strings.HasPrefix(no, "T-pay-"):
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal, Code: "USER_ACCOUNT_ABNORMAL",
				ProviderID: "50300000012026120400000002"}}, true
		}
		return simprovider.Injected{}, false
	}
	r := newRefundd(t, refunddOptions{fault: fault})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	ops := newClient(t, r.URL, operatorToken)
	held := func(id, state string) *client.Refund {
		t.Helper()
		register(t, svc, id, 1000)
		rf, err := svc.RequestRefund(ctx, id, client.RefundRequest{UserID: "u-" + id})
		if err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for rf.State != state {
			if time.Now().After(deadline) {
				t.Fatalf("refund %s is %s, want %s", rf.RefundNo, rf.State, state)
			}
			if rf, err = svc.GetRefund(ctx, id, rf.RefundNo, 200*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		return rf
	}
	rf := held("rej", client.StateRejected)
	if _, err := ops.ResubmitRefund(ctx, "rej", rf.RefundNo, "balance topped up"); err != nil {
		t.Fatalf("resubmit: %v", err)
	}
	if got, err := svc.GetRefund(ctx, "rej", rf.RefundNo, 5*time.Second); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("after resubmit: %+v %v", got, err)
	}
	rf = held("ab", client.StateRejected)
	if got, err := ops.AbandonRefund(ctx, "ab", rf.RefundNo, "paid in cash"); err != nil || got.State != client.StateFailed {
		t.Fatalf("abandon: %+v %v", got, err)
	}
	rf = held("abn", client.StateAbnormal)
	if got, err := ops.ReconcileRefund(ctx, "abn", rf.RefundNo); err != nil || got.RefundNo != rf.RefundNo {
		t.Fatalf("reconcile: %+v %v", got, err)
	}
	if got, err := ops.ResolveRefund(ctx, "abn", rf.RefundNo, "paid to the balance by hand"); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("resolve: %+v %v", got, err)
	}
	rf = held("pay", client.StateAbnormal)
	// This server holds no WeChat Pay key to encrypt a card for.
	card := client.AbnormalPayout{Type: client.AbnormalUserBankCard, BankType: "ICBC_DEBIT", BankAccount: "6222020200112233445", RealName: "张三"}
	var apiErr *client.Error
	if _, err := ops.ApplyAbnormalRefund(ctx, "pay", rf.RefundNo, card); !errors.As(err, &apiErr) || apiErr.Code != client.CodeEncryptionUnavailable {
		t.Fatalf("apply-abnormal to a card without a key: %v", err)
	}
	if s := card.String(); strings.Contains(s, card.BankAccount) || strings.Contains(s, card.RealName) {
		t.Fatalf("AbnormalPayout.String shows a bank detail: %s", s)
	}
	if _, err := ops.ApplyAbnormalRefund(ctx, "pay", rf.RefundNo, client.AbnormalPayout{Type: "ORIGINAL"}); !errors.As(err, &apiErr) || apiErr.Code != client.CodeInvalid || apiErr.Field != "type" {
		t.Fatalf("apply-abnormal with a bad type: %v", err)
	}
	if got, err := ops.ApplyAbnormalRefund(ctx, "pay", rf.RefundNo, client.AbnormalPayout{Type: client.AbnormalMerchantBankCard}); err != nil ||
		got.State != client.StateProcessing || got.AbnormalType != client.AbnormalMerchantBankCard {
		t.Fatalf("apply-abnormal to the merchant's account: %+v %v", got, err)
	}
}

// ?wait= holds the answer until the refund is terminal; without it the
// answer comes at once.
func TestClient_WaitHoldsTheAnswer(t *testing.T) {
	r := newRefundd(t, refunddOptions{delay: time.Second}) // the sandbox answers by notification a second later
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	register(t, svc, "wt1", 1000)
	register(t, svc, "wt2", 1000)
	rf, err := svc.RequestRefund(ctx, "wt1", client.RefundRequest{UserID: "u-wt1"})
	if err != nil || rf.State != client.StateProcessing {
		t.Fatalf("without wait: %+v %v, want PROCESSING", rf, err)
	}
	if got, err := svc.GetRefund(ctx, "wt1", rf.RefundNo, 10*time.Second); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("GetRefund with wait: %+v %v, want SUCCEEDED", got, err)
	}
	if got, err := svc.RequestRefund(ctx, "wt2", client.RefundRequest{UserID: "u-wt2", Wait: 10 * time.Second}); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("RequestRefund with wait: %+v %v, want SUCCEEDED", got, err)
	}
}

// Four eyes through the client: a held refund is approved by another
// person (and then paid), refused to its requester's name with
// CodeSelfApproval, and rejected with a reason.
func TestClient_Approval(t *testing.T) {
	r := newRefundd(t, refunddOptions{policy: &reservation.Policy{RefundNoPrefix: "T", ApproveAll: true}})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	approver := newClient(t, r.URL, approverToken)
	register(t, svc, "ap", 10000)
	rf, err := svc.RequestRefund(ctx, "ap", client.RefundRequest{UserID: "u-ap", Amount: amount(4000)})
	if err != nil || rf.State != client.StatePendingApproval || !rf.ApprovalRequired || rf.RequestedBy != "service:shop" || rf.ApprovalExpiresAt == nil {
		t.Fatalf("request: %+v %v", rf, err)
	}
	page, err := approver.ListAttention(ctx, client.AttentionQuery{State: client.StatePendingApproval})
	if err != nil || len(page.Refunds) != 1 || page.Refunds[0].RefundNo != rf.RefundNo {
		t.Fatalf("pending list: %+v %v", page, err)
	}
	var ce *client.Error
	if _, err := newClient(t, r.URL, selfApproverToken).ApproveRefund(ctx, "ap", rf.RefundNo); !errors.As(err, &ce) || ce.Code != client.CodeSelfApproval {
		t.Fatalf("self-approval: %v", err)
	}
	if _, err := newClient(t, r.URL, operatorToken).ApproveRefund(ctx, "ap", rf.RefundNo); !errors.As(err, &ce) || ce.Code != client.CodeForbidden {
		t.Fatalf("operator approval: %v", err)
	}
	got, err := approver.ApproveRefund(ctx, "ap", rf.RefundNo)
	if err != nil || got.ApprovedBy != "approver:finance" || got.ApprovedAt == nil {
		t.Fatalf("approve: %+v %v", got, err)
	}
	if got, err := svc.GetRefund(ctx, "ap", rf.RefundNo, 5*time.Second); err != nil || got.State != client.StateSucceeded {
		t.Fatalf("after approval: %+v %v", got, err)
	}
	rf2, err := svc.RequestRefund(ctx, "ap", client.RefundRequest{UserID: "u-ap", Amount: amount(1000)})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := approver.RejectRefund(ctx, "ap", rf2.RefundNo, "not justified"); err != nil || got.State != client.StateFailed ||
		got.Code != "APPROVAL_REJECTED" || got.RejectedBy != "approver:finance" {
		t.Fatalf("reject: %+v %v", got, err)
	}
}

// TestClient_ReasonCodeAndMetadata: the client sends a refund's reason
// code and metadata and reads them back, on the refund and in the feed; a
// retry with other metadata is the server's key conflict.
func TestClient_ReasonCodeAndMetadata(t *testing.T) {
	r := newRefundd(t, refunddOptions{})
	ctx := context.Background()
	svc := newClient(t, r.URL, serviceToken)
	register(t, svc, "r1", 10000)
	md := map[string]string{"order": "O-7", "agent": "张三"}
	req := client.RefundRequest{UserID: "u-r1", Amount: amount(100), ReasonCode: client.ReasonDuplicate, Metadata: md,
		IdempotencyKey: "k1", Wait: 2 * time.Second}
	rf, err := svc.RequestRefund(ctx, "r1", req)
	if err != nil || rf.ReasonCode != client.ReasonDuplicate || !maps.Equal(rf.Metadata, md) {
		t.Fatalf("refund: %+v err=%v", rf, err)
	}
	got, err := svc.GetRefund(ctx, "r1", rf.RefundNo, 0)
	if err != nil || got.ReasonCode != client.ReasonDuplicate || !maps.Equal(got.Metadata, md) {
		t.Fatalf("get refund: %+v err=%v", got, err)
	}
	page, err := svc.Events(ctx, client.EventsQuery{Types: []string{client.EventRefundRequested}})
	if err != nil || len(page.Events) != 1 || page.Events[0].Data.ReasonCode != client.ReasonDuplicate || !maps.Equal(page.Events[0].Data.Metadata, md) {
		t.Fatalf("events: %+v err=%v", page, err)
	}
	req.Metadata = map[string]string{"order": "O-8"}
	var ce *client.Error
	if _, err := svc.RequestRefund(ctx, "r1", req); !errors.As(err, &ce) || ce.Code != client.CodeIdempotencyKeyReused {
		t.Fatalf("retry with other metadata: %v", err)
	}
}
