package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

// The accounts of the multi-merchant tests: two direct merchants A and B,
// and service provider P with sub-merchants S1 and S2 (testMchID's keys
// are A's).
const (
	mchA  = testMchID
	mchB  = "1900000201"
	mchP  = "1900000300"
	subS1 = "1900000301"
	subS2 = "1900000302"
	subS9 = "1900000309" // not authorised
)

var (
	keysB = sync.OnceValues(func() (Keys, error) { return GenerateKeys(mchB) })
	keysP = sync.OnceValues(func() (Keys, error) { return GenerateKeys(mchP) })
)

func mustKeys(t testing.TB, f func() (Keys, error)) Keys {
	t.Helper()
	k, err := f()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type multiFixture struct {
	mu      *Multi
	http    *httptest.Server
	a, b, p *merchant
	ka, kp  Keys
	kb      Keys
}

var (
	bookA  = wechatpay.Merchant{MchID: mchA}
	bookB  = wechatpay.Merchant{MchID: mchB}
	bookS1 = wechatpay.Merchant{MchID: mchP, SubMchID: subS1}
	bookS2 = wechatpay.Merchant{MchID: mchP, SubMchID: subS2}
)

// newMultiFixture serves A, B, P/S1 and P/S2; edit may change each book's
// config.
func newMultiFixture(t *testing.T, edit func(wechatpay.Merchant, *Config)) *multiFixture {
	t.Helper()
	ka, kb, kp := keys(t), mustKeys(t, keysB), mustKeys(t, keysP)
	var cfgs []Config
	for _, b := range []struct {
		k  Keys
		mc wechatpay.Merchant
	}{{ka, bookA}, {kb, bookB}, {kp, bookS1}, {kp, bookS2}} {
		c := b.k.Config()
		c.SubMchID = b.mc.SubMchID
		if edit != nil {
			edit(b.mc, &c)
		}
		cfgs = append(cfgs, c)
	}
	mu, err := NewMulti(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(mu)
	t.Cleanup(func() {
		mu.Close()
		hs.Close()
	})
	return &multiFixture{mu: mu, http: hs, ka: ka, kb: kb, kp: kp,
		a: newMerchant(t, hs.URL, ka), b: newMerchant(t, hs.URL, kb), p: newMerchant(t, hs.URL, kp)}
}

func (f *multiFixture) order(t *testing.T, mc wechatpay.Merchant, outTradeNo string, total int64) {
	t.Helper()
	if err := f.mu.Book(mc).CreateOrder(outTradeNo, "", total); err != nil {
		t.Fatal(err)
	}
}

// partnerBody is a create body naming sub (omitted when empty).
func partnerBody(sub, outTradeNo, outRefundNo string, refund, total int64) []byte {
	var m map[string]any
	json.Unmarshal(refundBody(outTradeNo, outRefundNo, refund, total, ""), &m)
	if sub != "" {
		m["sub_mchid"] = sub
	}
	b, _ := json.Marshal(m)
	return b
}

// TestMulti_PartnerRules: each call is answered as WeChat Pay answers it,
// by the books of the merchant it belongs to, signed with that account's
// WeChat Pay key.
func TestMulti_PartnerRules(t *testing.T) {
	f := newMultiFixture(t, nil)
	f.order(t, bookA, "OA", 1000)
	f.order(t, bookS1, "OS", 1000)
	decodeRefund(t, f.a.create("OA", "RA", 100, 1000, ""))
	decodeRefund(t, f.p.must(http.MethodPost, refundsPath, partnerBody(subS1, "OS", "RS", 100, 1000)))
	signerB := f.kb.Signer()
	aWithBKey := wechatpay.Signer{MchID: mchA, SerialNo: f.ka.MerchantSerial, Key: f.kb.MerchantKey}
	pWithAKey := wechatpay.Signer{MchID: mchP, SerialNo: f.kp.MerchantSerial, Key: f.ka.MerchantKey}
	unknown := wechatpay.Signer{MchID: "1900000999", SerialNo: f.kb.MerchantSerial, Key: f.kb.MerchantKey}
	cases := []struct {
		name     string
		as       *merchant
		signer   *wechatpay.Signer
		method   string
		target   string
		body     []byte
		status   int
		code     string
		verifier *merchant // whose WeChat Pay key signs the answer; nil: none known
	}{
		{"sub-merchant create", f.p, nil, "POST", refundsPath, partnerBody(subS1, "OS", "RS2", 100, 1000), 200, "", f.p},
		{"sub-merchant query", f.p, nil, "GET", refundsPath + "/RS?sub_mchid=" + subS1, nil, 200, "", f.p},
		{"provider without sub_mchid", f.p, nil, "POST", refundsPath, partnerBody("", "OS", "RS3", 100, 1000), 400, "PARAM_ERROR", f.p},
		{"provider query without sub_mchid", f.p, nil, "GET", refundsPath + "/RS", nil, 400, "PARAM_ERROR", f.p},
		{"unauthorised sub_mchid create", f.p, nil, "POST", refundsPath, partnerBody(subS9, "OS", "RS4", 100, 1000), 403, "NO_AUTH", f.p},
		{"unauthorised sub_mchid query", f.p, nil, "GET", refundsPath + "/RS?sub_mchid=" + subS9, nil, 403, "NO_AUTH", f.p},
		{"unauthorised sub_mchid bill", f.p, nil, "GET", tradeBillPath + "?bill_date=2026-01-01&bill_type=REFUND&sub_mchid=" + subS9, nil, 403, "NO_AUTH", f.p},
		{"provider's own mchid as sub_mchid", f.p, nil, "POST", refundsPath, partnerBody(mchP, "OS", "RS5", 100, 1000), 400, "PARAM_ERROR", f.p},
		{"another sub-merchant's refund", f.p, nil, "GET", refundsPath + "/RS?sub_mchid=" + subS2, nil, 404, "RESOURCE_NOT_EXISTS", f.p},
		{"another sub-merchant's order", f.p, nil, "POST", refundsPath, partnerBody(subS2, "OS", "RS6", 100, 1000), 404, "RESOURCE_NOT_EXISTS", f.p},
		{"direct merchant with sub_mchid", f.a, nil, "POST", refundsPath, partnerBody(subS1, "OA", "RA2", 100, 1000), 400, "PARAM_ERROR", f.a},
		{"direct query with sub_mchid", f.a, nil, "GET", refundsPath + "/RA?sub_mchid=" + subS1, nil, 400, "PARAM_ERROR", f.a},
		{"direct merchant's refund queried by another", f.b, &signerB, "GET", refundsPath + "/RA", nil, 404, "RESOURCE_NOT_EXISTS", f.b},
		{"direct merchant's order refunded by another", f.b, &signerB, "POST", refundsPath, refundBody("OA", "RB", 100, 1000, ""), 404, "RESOURCE_NOT_EXISTS", f.b},
		{"signed with the wrong merchant's key", f.a, &aWithBKey, "GET", refundsPath + "/RA", nil, 401, "SIGN_ERROR", f.a},
		{"provider signed with a merchant's key", f.p, &pWithAKey, "GET", refundsPath + "/RS?sub_mchid=" + subS1, nil, 401, "SIGN_ERROR", f.p},
		{"unknown mchid", f.b, &unknown, "GET", refundsPath + "/RA", nil, 401, "SIGN_ERROR", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := tc.as.send(tc.method, tc.target, tc.body, reqOpts{signer: tc.signer})
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tc.status || r.code() != tc.code {
				t.Fatalf("%d %s, want %d %s", r.status, r.body, tc.status, tc.code)
			}
			if tc.verifier != nil {
				if err := tc.verifier.verifier.Verify(wechatpay.HeadersFrom(r.header), r.body); err != nil {
					t.Fatalf("answer not signed with the account's WeChat Pay key: %v", err)
				}
			}
		})
	}
	// Every refusal is counted, and served to tests.
	want := map[int]int{}
	for _, tc := range cases {
		if tc.status == 400 || tc.status == 401 || tc.status == 403 {
			want[tc.status]++
		}
	}
	if got := f.mu.Refusals(); !reflect.DeepEqual(got, want) {
		t.Errorf("refusals %v, want %v", got, want)
	}
	resp, err := http.Get(f.http.URL + "/sandbox/refusals")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var served map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&served); err != nil || served["403"] != want[403] || served["401"] != want[401] || served["400"] != want[400] {
		t.Errorf("GET /sandbox/refusals: %v %v, want %v", served, err, want)
	}
	// Nothing refused was booked anywhere.
	for _, mc := range f.mu.Books() {
		for _, no := range []string{"RS3", "RS4", "RS5", "RS6", "RA2", "RB"} {
			if _, ok := f.mu.Book(mc).Refund(no); ok {
				t.Errorf("%s booked refused refund %s", mc, no)
			}
		}
	}
}

// TestMulti_BooksSeparated: every merchant has its own orders and refunds,
// and WeChat Pay's per-order rules apply to each merchant's order, even
// when two merchants use the same order and refund numbers.
func TestMulti_BooksSeparated(t *testing.T) {
	var offset atomic.Int64
	f := newMultiFixture(t, func(_ wechatpay.Merchant, c *Config) {
		c.MinRefundSpacing = time.Minute
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	})
	for _, mc := range []wechatpay.Merchant{bookA, bookB, bookS1, bookS2} {
		f.order(t, mc, "O1", 1000)
	}
	steps := []struct {
		name   string
		as     *merchant
		body   []byte
		status int
		code   string
	}{
		{"A refunds 800 of its O1", f.a, refundBody("O1", "R1", 800, 1000, ""), 200, ""},
		{"B refunds all of its O1 at once", f.b, refundBody("O1", "R1", 1000, 1000, ""), 200, ""},
		{"S1 refunds 1000", f.p, partnerBody(subS1, "O1", "R1", 1000, 1000), 200, ""},
		{"S2 refunds 1000 under the same numbers", f.p, partnerBody(subS2, "O1", "R1", 1000, 1000), 200, ""},
		{"A: 60s spacing of its own order", f.a, refundBody("O1", "R2", 100, 1000, ""), 429, "FREQUENCY_LIMITED"},
		{"S1: nothing left of its order", f.p, partnerBody(subS1, "O1", "R2", 1, 1000), 400, "INVALID_REQUEST"},
	}
	for _, s := range steps {
		r, err := s.as.send(http.MethodPost, refundsPath, s.body, reqOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if r.status != s.status || r.code() != s.code {
			t.Fatalf("%s: %d %s, want %d %s", s.name, r.status, r.body, s.status, s.code)
		}
	}
	offset.Store(int64(time.Minute))
	decodeRefund(t, f.a.create("O1", "R2", 200, 1000, ""))
	if r := f.a.create("O1", "R3", 1, 1000, ""); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("A over-refund: %d %s", r.status, r.body)
	}
	want := map[wechatpay.Merchant]int64{bookA: 1000, bookB: 1000, bookS1: 1000, bookS2: 1000}
	for mc, n := range want {
		if got := f.mu.Book(mc).Refunded("O1"); got != n {
			t.Errorf("%s refunded %d of O1, want %d", mc, got, n)
		}
	}
	if rec, ok := f.mu.Book(bookA).Refund("R2"); !ok || rec.Refund != 200 {
		t.Fatalf("A's R2: %+v %v", rec, ok)
	}
	for _, mc := range []wechatpay.Merchant{bookB, bookS1, bookS2} {
		if _, ok := f.mu.Book(mc).Refund("R2"); ok {
			t.Errorf("%s holds A's R2", mc)
		}
	}
	// The 特约商户号 column of a sub-merchant's bill is its sub_mchid.
	today := time.Now().Add(time.Minute).In(beijing).Format(time.DateOnly)
	raw, n := f.mu.Book(bookS1).refundBill(today)
	if n != 1 || !strings.Contains(string(raw), "`"+subS1) || !strings.Contains(string(raw), "`"+mchP) {
		t.Fatalf("S1 bill (%d rows): %s", n, raw)
	}
}

// TestMulti_PartnerNotification: a sub-merchant's notification is signed
// and encrypted with the provider's keys and names sp_mchid and sub_mchid.
func TestMulti_PartnerNotification(t *testing.T) {
	kp := mustKeys(t, keysP)
	rc := newReceiver(t, kp, nil)
	v2 := make(chan wechatpay.Merchant, 1)
	v2srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		env, _, err := wechatpay.ParseRefundNotificationV2(kp.APIv2Key, body)
		if err == nil {
			select {
			case v2 <- env.Merchant():
			default:
			}
		}
		w.Write(wechatpay.V2Ack(err == nil, ""))
	}))
	defer v2srv.Close()
	f := newMultiFixture(t, func(mc wechatpay.Merchant, c *Config) {
		c.NotifyURL = rc.url()
		if mc == bookS1 {
			c.NotifyURLV2 = v2srv.URL
		}
	})
	f.order(t, bookS1, "O1", 1000)
	decodeRefund(t, f.p.must(http.MethodPost, refundsPath, partnerBody(subS1, "O1", "R1", 100, 1000)))
	eventually(t, 10*time.Second, "the notification", func() bool { return rc.count() > 0 })
	got := rc.all()[0]
	if got.err != nil {
		t.Fatalf("notification did not verify with the provider's keys: %v", got.err)
	}
	if got.res.Merchant() != bookS1 || got.res.SpMchID != mchP || got.res.MchID != "" {
		t.Fatalf("resource names %+v", got.res)
	}
	select {
	case mc := <-v2:
		if mc != bookS1 {
			t.Fatalf("v2 envelope names %+v", mc)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no v2 notification decrypted with the provider's APIv2 key")
	}
}

// TestMulti_FiftyRefundsPerMerchantOrder: the 50-refund cap counts one
// merchant's order, not every order of that number.
func TestMulti_FiftyRefundsPerMerchantOrder(t *testing.T) {
	f := newMultiFixture(t, nil)
	f.order(t, bookS1, "O1", 1000)
	f.order(t, bookS2, "O1", 1000)
	for i := range 50 {
		no := "R" + strconv.Itoa(i)
		decodeRefund(t, f.p.must(http.MethodPost, refundsPath, partnerBody(subS1, "O1", no, 1, 1000)))
	}
	if r := f.p.must(http.MethodPost, refundsPath, partnerBody(subS1, "O1", "R50", 1, 1000)); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("51st refund of S1's O1: %d %s", r.status, r.body)
	}
	decodeRefund(t, f.p.must(http.MethodPost, refundsPath, partnerBody(subS2, "O1", "R50", 1, 1000)))
}

// TestMulti_PartnerClient: the wechatpay client in partner mode, one
// Client for the provider's account, against the sandbox.
func TestMulti_PartnerClient(t *testing.T) {
	f := newMultiFixture(t, nil)
	f.order(t, bookS1, "O1", 1000)
	v, err := f.kp.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	c, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: f.http.URL, Partner: true, Signer: f.kp.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	req := reservation.RefundRequest{RefundNo: "R1", OutTradeNo: "O1", Amount: 100, Total: 1000}
	ctx := context.Background()
	for _, tc := range []struct {
		sub  string
		want reservation.OutcomeKind
		code string
	}{
		{subS1, reservation.OutcomeProcessing, ""},
		{subS9, reservation.OutcomeRejected, "NO_AUTH"},
		{subS2, reservation.OutcomeRejected, "RESOURCE_NOT_EXISTS"}, // S1's order is not S2's
	} {
		m, err := c.For(wechatpay.Target{SubMchID: tc.sub})
		if err != nil {
			t.Fatal(err)
		}
		body, err := m.RequestBody(req)
		if err != nil {
			t.Fatal(err)
		}
		if o := m.Submit(ctx, req.RefundNo, body, 1); o.Kind != tc.want || o.Code != tc.code {
			t.Fatalf("sub %s: submit %+v, want %s %s", tc.sub, o, tc.want, tc.code)
		}
	}
	m, _ := c.For(wechatpay.Target{SubMchID: subS1})
	if o := m.Query(ctx, "R1"); o.Kind != reservation.OutcomeSucceeded || o.RefundAmount != 100 {
		t.Fatalf("query: %+v", o)
	}
	m2, _ := c.For(wechatpay.Target{SubMchID: subS2})
	if o := m2.Query(ctx, "R1"); o.Kind != reservation.OutcomeNotFound {
		t.Fatalf("query under the other sub-merchant: %+v", o)
	}
}

// TestMulti_Admin: admin routes per book.
func TestMulti_Admin(t *testing.T) {
	f := newMultiFixture(t, nil)
	post := func(path, body string) int {
		resp, err := http.Post(f.http.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post("/sandbox/books/"+mchP+"-"+subS1+"/orders", `{"out_trade_no":"O1","total":700}`); got != http.StatusCreated {
		t.Fatalf("create order: %d", got)
	}
	if got := post("/sandbox/orders", `{"out_trade_no":"O1","total":700}`); got != http.StatusNotFound {
		t.Fatalf("book-less admin route: %d", got)
	}
	if got := post("/sandbox/books/"+subS9+"/orders", `{"out_trade_no":"O1","total":700}`); got != http.StatusNotFound {
		t.Fatalf("unknown book: %d", got)
	}
	if _, ok := f.mu.Book(bookS1).orderJSON("O1"); !ok {
		t.Fatal("order not in S1's books")
	}
	if _, ok := f.mu.Book(bookS2).orderJSON("O1"); ok {
		t.Fatal("order in S2's books")
	}
	resp, err := http.Get(f.http.URL + "/sandbox/books")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var books []struct{ Name, MchID, SubMchID string }
	if err := json.NewDecoder(resp.Body).Decode(&books); err != nil || len(books) != 4 || books[2].Name != mchP+"-"+subS1 {
		t.Fatalf("books %+v %v", books, err)
	}
}

func TestNewMulti_Invalid(t *testing.T) {
	ka, kb, kp := keys(t), mustKeys(t, keysB), mustKeys(t, keysP)
	sub := func(k Keys, s string) Config { c := k.Config(); c.SubMchID = s; return c }
	mixed := sub(kp, subS2)
	mixed.APIv3Key = kb.APIv3Key
	cases := []struct {
		name string
		cfgs []Config
	}{
		{"none", nil},
		{"twice", []Config{ka.Config(), ka.Config()}},
		{"direct and provider", []Config{ka.Config(), sub(ka, subS1)}},
		{"sub-merchants with different keys", []Config{sub(kp, subS1), mixed}},
		{"sub_mchid is the provider", []Config{sub(kp, mchP)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if m, err := NewMulti(tc.cfgs); !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("NewMulti = %v, %v; want ErrInvalidConfig", m, err)
			}
		})
	}
}

// TestCreate_OneYearWindow: an order paid more than 365 days ago cannot be
// refunded.
func TestCreate_OneYearWindow(t *testing.T) {
	var offset atomic.Int64
	f := newFixture(t, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		c.MaxSkew = 400 * 24 * time.Hour // requests are signed on the real clock
	})
	f.m.verifier.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	f.order(t, "O1", 1000)
	for _, s := range []struct {
		at     time.Duration
		no     string
		status int
		code   string
	}{
		{364 * 24 * time.Hour, "R1", 200, ""},
		{365*24*time.Hour + time.Second, "R2", 400, "INVALID_REQUEST"},
		{365*24*time.Hour + time.Second, "R1", 200, ""}, // a resubmission of an accepted refund is answered
	} {
		offset.Store(int64(s.at))
		r := f.m.create("O1", s.no, 100, 1000, "")
		if r.status != s.status || r.code() != s.code {
			t.Fatalf("%s at +%s: %d %s, want %d %s", s.no, s.at, r.status, r.body, s.status, s.code)
		}
	}
}
