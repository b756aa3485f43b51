package api_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

const ntMchID = "1900000001"

// ntEnv is a refundd HTTP server with notifications enabled, a WeChat Pay
// platform key to sign notifications with, and a provider whose clock the
// test moves.
type ntEnv struct {
	t        *testing.T
	srv      *httptest.Server
	api      *api.Server
	engine   *actors.Engine
	q        *quarantine.Store
	platform *rsa.PrivateKey
	v3Key    []byte // the key notifications are encrypted with
	v2Key    []byte
	keys     *api.NotifyKeys // the account's, on keysNow's clock
	keysNow  atomic.Int64
	now      atomic.Int64
	queries  atomic.Int64 // provider queries made
}

var ntKey *rsa.PrivateKey

func ntPlatformKey(t *testing.T) *rsa.PrivateKey {
	if ntKey == nil {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		ntKey = k
	}
	return ntKey
}

func newNtEnv(t *testing.T) *ntEnv {
	t.Helper()
	return newNtEnvOn(t, journaltest.Open(t), time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC))
}

// newNtEnvOn is newNtEnv on journal db, its clocks reading now.
func newNtEnvOn(t *testing.T, db *journal.DB, now time.Time) *ntEnv {
	t.Helper()
	e := &ntEnv{t: t, platform: ntPlatformKey(t), v3Key: []byte("0123456789abcdef0123456789abcdef"), v2Key: []byte("v2keyv2keyv2keyv2keyv2keyv2key12")}
	e.now.Store(now.UnixNano())
	clock := func() time.Time { return time.Unix(0, e.now.Load()).UTC() }
	provider := simprovider.New(simprovider.Options{Delay: time.Hour, Now: clock,
		Fault: func(op, _ string, _ int) (simprovider.Injected, bool) {
			if op == "query" {
				e.queries.Add(1)
			}
			return simprovider.Injected{}, false
		}})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	engine, err := actors.New(actors.Config{Store: eventstore.New(db), Provider: provider, Encode: simprovider.Encode, Logger: log,
		Policy: reservation.Policy{RefundNoPrefix: "N"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	e.engine = engine
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey("PUB_KEY_ID_TEST", &e.platform.PublicKey); err != nil {
		t.Fatal(err)
	}
	if e.q, err = quarantine.Open(t.TempDir(), quarantine.Options{}); err != nil {
		t.Fatal(err)
	}
	e.keys = api.NewNotifyKeys(e.v3Key, e.v2Key)
	e.keysNow.Store(time.Now().UnixNano())
	e.keys.Now = func() time.Time { return time.Unix(0, e.keysNow.Load()) }
	e.api = api.New(engine, api.Options{Logger: log, Notify: &api.NotifyConfig{
		Accounts:   []api.NotifyAccount{{Name: "default", MchID: ntMchID, Verifier: v, Keys: e.keys}},
		Quarantine: e.q,
	}})
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// refund registers a reservation of 10000 fen and requests a refund of 4000
// that stays PROCESSING (the provider's delay is an hour).
func (e *ntEnv) refund(id string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, _, err := e.engine.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u",
		OutTradeNo: "ORD-" + id, Amount: 10000, Currency: "CNY"}); err != nil {
		e.t.Fatal(err)
	}
	amount := int64(4000)
	st, _, err := e.engine.Execute(ctx, id, "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount})
	if err != nil {
		e.t.Fatal(err)
	}
	no := st.RefundByKey("k").No
	waitFor(e.t, "provider accepted", func() bool {
		st, _ := e.engine.Get(ctx, id)
		return st.Refund(no).ProviderID != ""
	})
	return no
}

func (e *ntEnv) state(id, no string) *reservation.Refund {
	st, err := e.engine.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Refund(no)
}

type ntNotice struct {
	no, outTradeNo, status, mchID string
	event                         string // event_type; empty derives it from the status
	refund, total                 int64
	probe, tamper, stale          bool
}

func (e *ntEnv) postV3(n ntNotice) (int, string) {
	e.t.Helper()
	body, h := e.v3Request(n)
	return e.sendV3(body, h)
}

// v3Request builds and signs a notification: its body and headers.
func (e *ntEnv) v3Request(n ntNotice) ([]byte, wechatpay.Headers) {
	e.t.Helper()
	if n.mchID == "" {
		n.mchID = ntMchID
	}
	body, err := wechatpay.BuildRefundNotification(e.v3Key, wechatpay.Notification{ID: "EV-" + n.no, CreateTime: "2026-11-30T16:00:00+08:00", EventType: n.event},
		wechatpay.RefundResource{MchID: n.mchID, OutTradeNo: n.outTradeNo, OutRefundNo: n.no, RefundID: simprovider.RefundID(n.no),
			RefundStatus: n.status, SuccessTime: "2026-11-30T16:00:00+08:00",
			Amount: wechatpay.RefundAmount{Total: n.total, Refund: n.refund, PayerTotal: n.total, PayerRefund: n.refund}})
	if err != nil {
		e.t.Fatal(err)
	}
	ts := time.Now().Unix()
	if n.stale {
		ts -= 3600
	}
	h, err := wechatpay.SignHeaders(e.platform, "PUB_KEY_ID_TEST", ts, wechatpay.NewNonce(), body)
	if err != nil {
		e.t.Fatal(err)
	}
	if n.probe {
		h.Signature = "WECHATPAY/SIGNTEST/" + h.Signature
	}
	if n.tamper {
		body = bytes.Replace(body, []byte(`"id":"EV-`), []byte(`"id":"XX-`), 1)
	}
	return body, h
}

func (e *ntEnv) sendV3(body []byte, h wechatpay.Headers) (int, string) {
	e.t.Helper()
	return e.sendV3To("/v1/notify/wechatpay/refund", body, h)
}

func (e *ntEnv) sendV3To(path string, body []byte, h wechatpay.Headers) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.Set(req.Header)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func (e *ntEnv) counts() map[string]int64 { return e.api.NotifyStats().Snapshot() }

func TestNotifyV3_AppliesOnceThenAcknowledgesDuplicates(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	n := ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000}
	if code, body := e.postV3(n); code != http.StatusNoContent {
		t.Fatalf("first notification: %d %s", code, body)
	}
	if r := e.state("r1", no); r.State != reservation.Succeeded {
		t.Fatalf("state after notification: %s", r.State)
	}
	for range 3 { // WeChat re-sends until it sees our ack
		if code, body := e.postV3(n); code != http.StatusNoContent {
			t.Fatalf("duplicate: %d %s", code, body)
		}
	}
	if c := e.counts(); c["applied"] != 1 || c["duplicate"] != 3 {
		t.Fatalf("counts %v, want applied 1 duplicate 3", c)
	}
	if entries, _, _ := e.q.Stats(); entries != 0 {
		t.Fatalf("accepted notifications were quarantined: %d", entries)
	}
}

func TestNotifyV3_RefusedNotificationsAreKeptCountedAndRetried(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	good := ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000}
	cases := []struct {
		name    string
		n       ntNotice
		status  int
		outcome string
		kept    bool
	}{
		{"tampered body", func() ntNotice { x := good; x.tamper = true; return x }(), 401, "rejected", true},
		{"stale timestamp", func() ntNotice { x := good; x.stale = true; return x }(), 401, "rejected", true},
		{"signature probe", func() ntNotice { x := good; x.probe = true; return x }(), 401, "probe", false},
		{"refund amount differs", func() ntNotice { x := good; x.refund = 4001; return x }(), 400, "mismatch", true},
		{"order total differs", func() ntNotice { x := good; x.total = 20000; return x }(), 400, "mismatch", true},
		{"other order", func() ntNotice { x := good; x.outTradeNo = "ORD-x"; return x }(), 400, "mismatch", true},
		{"other merchant", func() ntNotice { x := good; x.mchID = "1900000002"; return x }(), 400, "mismatch", true},
		{"unknown refund number", func() ntNotice { x := good; x.no = "N-r9-1"; return x }(), 404, "unknown_refund", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := e.counts()[tc.outcome]
			keptBefore, _, _ := e.q.Stats()
			code, body := e.postV3(tc.n)
			if code != tc.status || !strings.Contains(body, `"code":"FAIL"`) {
				t.Fatalf("answer %d %s, want %d with code FAIL", code, body, tc.status)
			}
			if got := e.counts()[tc.outcome]; got != before+1 {
				t.Fatalf("%s count %d, want %d", tc.outcome, got, before+1)
			}
			kept, _, _ := e.q.Stats()
			if (kept > keptBefore) != tc.kept {
				t.Fatalf("quarantined %v, want %v", kept > keptBefore, tc.kept)
			}
			if r := e.state("r1", no); r.State != reservation.Processing {
				t.Fatalf("a refused notification changed the refund to %s", r.State)
			}
		})
	}
}

func TestNotifyV3_ContradictionOfTerminalStateIsAConflict(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	n := ntNotice{no: no, outTradeNo: "ORD-r1", status: "SUCCESS", refund: 4000, total: 10000}
	if code, _ := e.postV3(n); code != http.StatusNoContent {
		t.Fatal("success not applied")
	}
	n.status = "CLOSED"
	if code, body := e.postV3(n); code != http.StatusNoContent {
		t.Fatalf("conflict answer: %d %s", code, body)
	}
	r := e.state("r1", no)
	if r.State != reservation.Succeeded || r.Conflicts != 1 {
		t.Fatalf("state %s conflicts %d, want SUCCEEDED with 1 conflict", r.State, r.Conflicts)
	}
}

func (e *ntEnv) postV2(no, outTradeNo, mchID string, refund, total int64) (int, string) {
	e.t.Helper()
	return e.sendV2(e.v2Body(no, outTradeNo, mchID, refund, total))
}

func (e *ntEnv) v2Body(no, outTradeNo, mchID string, refund, total int64) []byte {
	e.t.Helper()
	body, err := wechatpay.BuildRefundNotificationV2(e.v2Key,
		wechatpay.V2Envelope{ReturnCode: "SUCCESS", AppID: "wx0", MchID: mchID, NonceStr: wechatpay.NewNonce()},
		wechatpay.V2RefundInfo{OutRefundNo: no, OutTradeNo: outTradeNo, RefundID: "x", TotalFee: total, RefundFee: refund,
			RefundStatus: "SUCCESS", SuccessTime: "2026-11-30 16:00:00"})
	if err != nil {
		e.t.Fatal(err)
	}
	return body
}

func (e *ntEnv) sendV2(body []byte) (int, string) {
	e.t.Helper()
	resp, err := http.Post(e.srv.URL+"/v1/notify/wechatpay/v2/refund", "text/xml", bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestNotifyV2_IsOnlyAHintConfirmedByQuery(t *testing.T) {
	e := newNtEnv(t)
	no := e.refund("r1")
	code, body := e.postV2(no, "ORD-r1", ntMchID, 4000, 10000)
	if code != 200 || !strings.Contains(body, "<return_code><![CDATA[SUCCESS]]></return_code>") {
		t.Fatalf("v2 ack: %d %s", code, body)
	}
	// The provider still says PROCESSING: the hint alone changed nothing.
	waitFor(t, "the hinted query", func() bool { return e.state("r1", no).Queries == 1 })
	if r := e.state("r1", no); r.State != reservation.Processing {
		t.Fatalf("a v2 hint was applied without confirmation: %s", r.State)
	}
	// Once the provider has really refunded, the next hint's query applies it.
	e.now.Add(int64(2 * time.Hour))
	if code, _ := e.postV2(no, "ORD-r1", ntMchID, 4000, 10000); code != 200 {
		t.Fatal("second hint refused")
	}
	waitFor(t, "SUCCEEDED via query", func() bool { return e.state("r1", no).State == reservation.Succeeded })

	// A v2 notification that disagrees with our records is refused.
	if code, body := e.postV2(no, "ORD-r1", ntMchID, 9999, 10000); code == 200 || !strings.Contains(body, "FAIL") {
		t.Fatalf("mismatched v2: %d %s", code, body)
	}
	if code, body := e.postV2(no, "ORD-r1", "1900000002", 4000, 10000); code == 200 || !strings.Contains(body, "FAIL") {
		t.Fatalf("other merchant's v2: %d %s", code, body)
	}
	if code, body := e.postV2(no, "ORD-r1", ntMchID, 4000, 10000); code != 200 || !strings.Contains(body, "SUCCESS") {
		t.Fatalf("hint for a settled refund must be acknowledged: %d %s", code, body)
	}
	resp, _ := http.Post(e.srv.URL+"/v1/notify/wechatpay/v2/refund", "text/xml", strings.NewReader("<xml><return_code>SUCCESS</return_code><req_info>!!!</req_info></xml>"))
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode == 200 || !strings.Contains(string(b), "FAIL") {
		t.Fatalf("garbage v2: %d %s", resp.StatusCode, b)
	}
}

// errorCounter counts the log records at ERROR and above by message.
type errorCounter struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (h *errorCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *errorCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		h.mu.Lock()
		h.msgs[r.Message]++
		h.mu.Unlock()
	}
	return nil
}
func (h *errorCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *errorCounter) WithGroup(string) slog.Handler      { return h }

// Anyone can post to the notification endpoint: when the quarantine cannot
// be written (a full disk, a directory gone), its failures are logged
// rate-limited like the refusals, and the refusals are still counted and
// answered so that WeChat retries.
func TestNotify_QuarantineFailureIsLoggedRateLimited(t *testing.T) {
	counter := &errorCounter{msgs: map[string]int{}}
	engine, err := actors.New(actors.Config{Store: eventstore.New(journaltest.Open(t)), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
		Logger: slog.New(slog.DiscardHandler), Policy: reservation.Policy{RefundNoPrefix: "N"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	dir := filepath.Join(t.TempDir(), "quarantine")
	q, err := quarantine.Open(dir, quarantine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey("PUB_KEY_ID_TEST", &ntPlatformKey(t).PublicKey); err != nil {
		t.Fatal(err)
	}
	s := api.New(engine, api.Options{Logger: slog.New(counter), Notify: &api.NotifyConfig{
		Accounts:   []api.NotifyAccount{{Name: "default", MchID: ntMchID, Verifier: v, APIv3Key: []byte("0123456789abcdef0123456789abcdef")}},
		Quarantine: q,
	}})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for range n {
		resp, err := http.Post(srv.URL+"/v1/notify/wechatpay/refund", "application/json", strings.NewReader(`{"forged":true}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("a forged notification got %d, want 401", resp.StatusCode)
		}
	}
	if got := s.NotifyStats().Snapshot()["rejected"]; got != n {
		t.Fatalf("%d refusals counted, want %d", got, n)
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if got := counter.msgs["could not keep a refused notification"]; got != 1 {
		t.Fatalf("%d forged notifications logged the quarantine failure %d times, want once per interval", n, got)
	}
	if got := counter.msgs["wechatpay notification refused; WeChat will retry"]; got != 1 {
		t.Fatalf("the refusal was logged %d times, want once per interval", got)
	}
}

// With one account (what the --wechatpay-* flags configure) the legacy
// routes and the account's own routes take the same notifications, counted
// under the default merchant; another account's name is no route's.
func TestNotify_OneAccountLegacyAndAccountRoutes(t *testing.T) {
	e := newNtEnv(t)
	for i, tc := range []struct {
		path   string
		status int
		counts string // the default merchant's outcome
	}{
		{"/v1/notify/wechatpay/refund", http.StatusNoContent, "applied"},
		{"/v1/notify/wechatpay/accounts/default/refund", http.StatusNoContent, "applied"},
		{"/v1/notify/wechatpay/accounts/other/refund", http.StatusNotFound, ""},
	} {
		t.Run(tc.path, func(t *testing.T) {
			id := "r" + strconv.Itoa(i)
			no := e.refund(id)
			before := e.api.NotifyStats().ByMerchant()
			body, h := e.v3Request(ntNotice{no: no, outTradeNo: "ORD-" + id, status: "SUCCESS", refund: 4000, total: 10000})
			if code, answer := e.sendV3To(tc.path, body, h); code != tc.status {
				t.Fatalf("answer %d %s, want %d", code, answer, tc.status)
			}
			after := e.api.NotifyStats().ByMerchant()
			want := reservation.Processing
			if tc.counts != "" {
				want = reservation.Succeeded
				if after[reservation.DefaultMerchant][tc.counts] != before[reservation.DefaultMerchant][tc.counts]+1 {
					t.Fatalf("not counted under the default merchant: %v", after)
				}
			} else if after[api.Unattributed]["rejected"] != before[api.Unattributed]["rejected"]+1 {
				t.Fatalf("not counted as unattributed: %v", after)
			}
			if r := e.state(id, no); r.State != want {
				t.Fatalf("refund is %s, want %s", r.State, want)
			}
		})
	}
	// The account's v2 route is the legacy v2 route's twin.
	no := e.refund("v2")
	body := e.v2Body(no, "ORD-v2", ntMchID, 4000, 10000)
	resp, err := http.Post(e.srv.URL+"/v1/notify/wechatpay/accounts/default/v2/refund", "text/xml", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("v2 on the account route: %d", resp.StatusCode)
	}
	waitFor(t, "the hinted query", func() bool { return e.state("v2", no).Queries == 1 })
}

// An empty quarantine is listed as an empty array, as the OpenAPI
// document says, not null (which the console's operations view could not
// read: "Cannot read properties of null").
func TestNotifyQuarantine_EmptyIsAnArray(t *testing.T) {
	q, err := quarantine.Open(t.TempDir(), quarantine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := newOpsEnv(t, opsOptions{tokens: "operator:" + tokOperator, quarantine: q})
	r := e.do(t, http.MethodGet, "/v1/notify/quarantine", "", bearer(tokOperator)...)
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"entries":[]}` {
		t.Fatalf("empty quarantine: %d %s, want 200 {\"entries\":[]}", r.status, r.body)
	}
}
