package sandbox

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

const testMchID = "1900000109"

// testKeys are generated once: RSA key generation is the slowest step of
// these tests, especially under -race.
var testKeys = sync.OnceValues(func() (Keys, error) { return GenerateKeys(testMchID) })

func keys(t testing.TB) Keys {
	t.Helper()
	k, err := testKeys()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// fixture is a sandbox behind a real HTTP server plus a merchant client.
type fixture struct {
	sb   *Server
	http *httptest.Server
	m    *merchant
	keys Keys
}

// newFixture starts a sandbox with the test keys; edit may change the
// config before New.
func newFixture(t *testing.T, edit func(*Config)) *fixture {
	t.Helper()
	k := keys(t)
	cfg := k.Config()
	if edit != nil {
		edit(&cfg)
	}
	sb, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(sb)
	t.Cleanup(func() {
		sb.Close()
		hs.Close()
	})
	return &fixture{sb: sb, http: hs, keys: k, m: newMerchant(t, hs.URL, k)}
}

func (f *fixture) order(t *testing.T, outTradeNo string, total int64) {
	t.Helper()
	if err := f.sb.CreateOrder(outTradeNo, "", total); err != nil {
		t.Fatal(err)
	}
}

// merchant is a test WeChat Pay merchant built only from the wechatpay
// primitives: it signs requests with a Signer and verifies responses with a
// Verifier.
type merchant struct {
	t        *testing.T
	base     string
	client   *http.Client
	signer   wechatpay.Signer
	verifier *wechatpay.Verifier
}

func newMerchant(t *testing.T, base string, k Keys) *merchant {
	v, err := k.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	return &merchant{t: t, base: base, client: &http.Client{Timeout: 10 * time.Second}, signer: k.Signer(), verifier: v}
}

// response is a raw answer and the result of verifying its signature.
type response struct {
	status    int
	header    http.Header
	body      []byte
	verifyErr error
}

// code returns the error code of an error body.
func (r response) code() string {
	var e struct {
		Code string `json:"code"`
	}
	json.Unmarshal(r.body, &e)
	return e.Code
}

// reqOpts tampers with a request.
type reqOpts struct {
	signBody  []byte // sign these bytes instead of the body sent
	timestamp int64  // zero: now
	signer    *wechatpay.Signer
	noAuth    bool
	header    map[string]string // set ("" deletes)
	client    *http.Client
}

// send signs and sends a request to target (path and query, escaped).
func (m *merchant) send(method, target string, body []byte, o reqOpts) (response, error) {
	m.t.Helper()
	req, err := http.NewRequest(method, m.base+target, bytes.NewReader(body))
	if err != nil {
		m.t.Fatal(err)
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "refundd-test/1")
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
	}
	if !o.noAuth {
		signer := m.signer
		if o.signer != nil {
			signer = *o.signer
		}
		ts := o.timestamp
		if ts == 0 {
			ts = time.Now().Unix()
		}
		signed := body
		if o.signBody != nil {
			signed = o.signBody
		}
		auth, err := signer.Authorization(method, req.URL.RequestURI(), signed, ts, wechatpay.NewNonce())
		if err != nil {
			m.t.Fatal(err)
		}
		req.Header.Set("Authorization", auth)
	}
	for k, v := range o.header {
		if v == "" && k == "User-Agent" {
			req.Header.Set(k, "") // an explicit empty value stops Go's default one
		} else if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	client := m.client
	if o.client != nil {
		client = o.client
	}
	resp, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b,
		verifyErr: m.verifier.Verify(wechatpay.HeadersFrom(resp.Header), b)}, nil
}

// must sends a correctly signed request and requires a verified answer.
func (m *merchant) must(method, target string, body []byte) response {
	m.t.Helper()
	r, err := m.send(method, target, body, reqOpts{})
	if err != nil {
		m.t.Fatal(err)
	}
	if r.verifyErr != nil {
		m.t.Fatalf("%s %s: response signature: %v (status %d, body %s)", method, target, r.verifyErr, r.status, r.body)
	}
	return r
}

// refundReq is a create body as a merchant writes it.
type refundReq struct {
	TransactionID string `json:"transaction_id,omitempty"`
	OutTradeNo    string `json:"out_trade_no,omitempty"`
	OutRefundNo   string `json:"out_refund_no"`
	Reason        string `json:"reason,omitempty"`
	NotifyURL     string `json:"notify_url,omitempty"`
	Amount        struct {
		Refund   int64  `json:"refund"`
		Total    int64  `json:"total"`
		Currency string `json:"currency"`
	} `json:"amount"`
}

func refundBody(outTradeNo, outRefundNo string, refund, total int64, notifyURL string) []byte {
	var r refundReq
	r.OutTradeNo, r.OutRefundNo, r.NotifyURL, r.Reason = outTradeNo, outRefundNo, notifyURL, "test"
	r.Amount.Refund, r.Amount.Total, r.Amount.Currency = refund, total, "CNY"
	b, _ := json.Marshal(r)
	return b
}

// refundResp is the part of the Refund object the tests read.
type refundResp struct {
	RefundID      string `json:"refund_id"`
	OutRefundNo   string `json:"out_refund_no"`
	OutTradeNo    string `json:"out_trade_no"`
	TransactionID string `json:"transaction_id"`
	Status        string `json:"status"`
	SuccessTime   string `json:"success_time"`
	CreateTime    string `json:"create_time"`
	Amount        struct {
		Refund int64 `json:"refund"`
		Total  int64 `json:"total"`
	} `json:"amount"`
}

func decodeRefund(t *testing.T, r response) refundResp {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.status, r.body)
	}
	var out refundResp
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
	return out
}

func (m *merchant) create(outTradeNo, outRefundNo string, refund, total int64, notifyURL string) response {
	m.t.Helper()
	return m.must(http.MethodPost, refundsPath, refundBody(outTradeNo, outRefundNo, refund, total, notifyURL))
}

func (m *merchant) query(outRefundNo string) response {
	m.t.Helper()
	return m.must(http.MethodGet, refundsPath+"/"+outRefundNo, nil)
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(2 * time.Millisecond) // poll interval, not a wait for an event
	}
}

// receiver is a merchant notification endpoint that verifies and decrypts
// v3 notifications with wechatpay.ParseRefundNotification.
type receiver struct {
	srv *httptest.Server
	// status decides the answer to the n-th request (1-based) that
	// verified; nil means 204.
	status func(n int) int

	mu  sync.Mutex
	got []received
}

type received struct {
	at   time.Time
	err  error // verification or decryption error
	n    wechatpay.Notification
	res  wechatpay.RefundResource
	sent int // status answered
}

func newReceiver(t *testing.T, k Keys, status func(n int) int) *receiver {
	rc := &receiver{status: status}
	v, err := k.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, wechatpay.MaxNotificationSize+1))
		n, res, err := wechatpay.ParseRefundNotification(v, k.APIv3Key, wechatpay.HeadersFrom(r.Header), body)
		rc.mu.Lock()
		rec := received{at: time.Now(), err: err, n: n, res: res}
		code := http.StatusNoContent
		if err != nil {
			code = http.StatusUnauthorized
		} else {
			ok := 0
			for _, g := range rc.got {
				if g.err == nil {
					ok++
				}
			}
			if rc.status != nil {
				code = rc.status(ok + 1)
			}
		}
		rec.sent = code
		rc.got = append(rc.got, rec)
		rc.mu.Unlock()
		if code >= 300 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			io.WriteString(w, `{"code":"FAIL","message":"失败"}`)
			return
		}
		w.WriteHeader(code)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) all() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.got)
}

func (rc *receiver) url() string { return rc.srv.URL + "/notify/refund" }

// hasPrefix is strings.HasPrefix for readability in tables.
func hasPrefix(s, p string) bool { return strings.HasPrefix(s, p) }
