package wechatpay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// billSampleA is BILL.md §3 A: a REFUND bill as in gunsluo/wechatpay-go's
// tests (LF line ends, no BOM).
const billSampleA = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,退款申请时间,退款成功时间,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\n" +
	"`2021-01-24 16:16:25,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000844202101245866928772,`S20210124161554311546,`ofyak5qR_1wYsC99CsWA6R9MJazA,`NATIVE,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`2021-02-01 14:33:21,`2021-02-01 14:33:24,`50300807172021020106006664916,`S20210201143320649393,`0.01,`0.00,`ORIGINAL,`SUCCESS,`for testing,`cipher code,`0.00000,`1.00%,`0.00,`0.01,`\n" +
	"`2021-01-19 16:31:18,`wx81be3101902f7cb2,`1601959334,`0,`,`4200000846202101197461830397,`S20210119083100844726118382,`ofyak5qR_1wYsC99CsWA6R9MJazA,`NATIVE,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`2021-02-01 14:00:45,`2021-02-01 14:00:50,`50300907032021020105978998710,`S20210201140044552846,`0.01,`0.00,`ORIGINAL,`SUCCESS,`Package Venue,`,`0.00000,`1.00%,`0.00,`0.01,`\n" +
	"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\n" +
	"`2,`0.00,`0.02,`0.00,`0.00000,`0.00,`0.02"

// billSampleB is BILL.md §3 B (an ALL bill, first and last two lines) in
// its real framing: a UTF-8 BOM and CRLF after every line.
const billSampleB = "\ufeff交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注\r\n" +
	"`2019-02-19 05:01:46,`wxab8acd895ab1638a,`1921000401,`0,`harryma007,`4200000263201902167700134212,`autotest_20190216081946_82335,`oHkLxtx0vUqe-18p_AXTZ1innxkCY,`JSAPI,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`50000709672019011908420787722,`REF4200000263201902167700963919,`0.01,`0.00,`ORIGINAL,`SUCCESS,`系统拨测-cheeryin-test_micropay_succ,`,`0.00000,`39.00%,`0.00,`0.01,`\r\n" +
	"总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额\r\n" +
	"`45.0,`0.47,`0.14,`0.0,`0.08,`0.47,`0.14\r\n"

func TestParseBill_RefundSample(t *testing.T) {
	b, err := wechatpay.ParseBill([]byte(billSampleA))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Header) != 29 || len(b.Rows) != 2 || b.RowLines[1] != 3 {
		t.Fatalf("header %d columns, %d rows, lines %v", len(b.Header), len(b.Rows), b.RowLines)
	}
	refunds, err := b.Refunds()
	if err != nil {
		t.Fatal(err)
	}
	r := refunds[0]
	bj := time.FixedZone("CST", 8*3600)
	want := wechatpay.BillRefund{Line: 2, TradeTime: time.Date(2021, 1, 24, 16, 16, 25, 0, bj), MchID: "1601959334",
		TransactionID: "4200000844202101245866928772", OutTradeNo: "S20210124161554311546",
		RequestedAt: time.Date(2021, 2, 1, 14, 33, 21, 0, bj), SucceededAt: time.Date(2021, 2, 1, 14, 33, 24, 0, bj),
		RefundID: "50300807172021020106006664916", OutRefundNo: "S20210201143320649393", Refund: 1, RequestedRefund: 1,
		RefundType: "ORIGINAL", RefundStatus: "SUCCESS"}
	if !r.TradeTime.Equal(want.TradeTime) || !r.RequestedAt.Equal(want.RequestedAt) || !r.SucceededAt.Equal(want.SucceededAt) {
		t.Fatalf("times %v %v %v", r.TradeTime, r.RequestedAt, r.SucceededAt)
	}
	r.TradeTime, r.RequestedAt, r.SucceededAt = want.TradeTime, want.RequestedAt, want.SucceededAt
	if r != want {
		t.Fatalf("row\n%+v\nwant\n%+v", r, want)
	}
	if b.Rows[1][b.Column("商户数据包")] != "" || b.Rows[1][b.Column("费率备注")] != "" {
		t.Fatal("a bare backtick must be an empty value")
	}
	sum, err := b.Totals()
	if err != nil {
		t.Fatal(err)
	}
	if sum != (wechatpay.BillSummary{Count: 2, RefundTotal: 2, FeeTotal: "0.00000", RequestedTotal: 2}) {
		t.Fatalf("summary %+v", sum)
	}
}

func TestParseBill_AllSampleWithBOMAndCRLF(t *testing.T) {
	b, err := wechatpay.ParseBill([]byte(billSampleB))
	if err != nil {
		t.Fatal(err)
	}
	if b.Header[0] != "交易时间" {
		t.Fatalf("BOM not removed: %q", b.Header[0])
	}
	refunds, err := b.Refunds()
	if err != nil {
		t.Fatal(err)
	}
	if len(refunds) != 1 || refunds[0].OutRefundNo != "REF4200000263201902167700963919" || refunds[0].Refund != 1 ||
		!refunds[0].RequestedAt.IsZero() || refunds[0].RefundStatus != "SUCCESS" {
		t.Fatalf("refunds %+v", refunds)
	}
	if strings.ContainsRune(refunds[0].RefundStatus, '\r') {
		t.Fatal("CR left in a value")
	}
	sum, err := b.Totals()
	if err != nil || sum.Count != 45 || sum.RefundTotal != 14 || sum.SettlementTotal != 47 || sum.FeeTotal != "0.08" {
		t.Fatalf("summary %+v, %v", sum, err)
	}
}

func TestParseBill_CommaInsideValue(t *testing.T) {
	line := strings.Split(billSampleA, "\n")
	row := strings.Replace(line[1], "`for testing,", "`for testing, with a comma,", 1)
	b, err := wechatpay.ParseBill([]byte(strings.Join([]string{line[0], row, line[3], "`1,`0.00,`0.01,`0.00,`0.00000,`0.00,`0.01"}, "\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Rows[0][b.Column("商品名称")]; got != "for testing, with a comma" {
		t.Fatalf("商品名称 = %q", got)
	}
	if got := b.Rows[0][b.Column("商户退款单号")]; got != "S20210201143320649393" {
		t.Fatalf("columns shifted: 商户退款单号 = %q", got)
	}
}

func TestParseBill_Malformed(t *testing.T) {
	lines := strings.Split(billSampleA, "\n")
	tests := []struct {
		name, text, want string
	}{
		{"empty", "", "empty file"},
		{"only a BOM", "\ufeff\r\n", "empty file"},
		{"header with backticks", "`a,`b\n", "line 1"},
		{"truncated before the summary", strings.Join(lines[:2], "\n"), "no summary"},
		{"summary header without values", strings.Join(lines[:4], "\n"), "without a summary row"},
		{"row without backtick", strings.Join([]string{lines[0], strings.TrimPrefix(lines[1], "`"), lines[3], lines[4]}, "\n"), "line 2"},
		{"short row", strings.Join([]string{lines[0], "`a,`b", lines[3], lines[4]}, "\n"), "2 values, the header has 29"},
		{"short summary", strings.Join([]string{lines[0], lines[1], lines[3], "`1,`2"}, "\n"), "2 summary values"},
		{"text after the summary", billSampleA + "\nmore", "after the summary"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := wechatpay.ParseBill([]byte(tt.text))
			if !errors.Is(err, wechatpay.ErrBillFormat) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("ParseBill: %v, want ErrBillFormat mentioning %q", err, tt.want)
			}
		})
	}
	t.Run("bad amount", func(t *testing.T) {
		b, err := wechatpay.ParseBill([]byte(strings.Replace(billSampleA, "`0.01,`0.00,`ORIGINAL", "`0.0x,`0.00,`ORIGINAL", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Refunds(); !errors.Is(err, wechatpay.ErrBillFormat) || !strings.Contains(err.Error(), "line 2") {
			t.Fatalf("Refunds: %v", err)
		}
	})
	t.Run("not a refund bill", func(t *testing.T) {
		b, err := wechatpay.ParseBill([]byte("a,b\n`1,`2\n总交易单数,x\n`1,`2\n"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Refunds(); !errors.Is(err, wechatpay.ErrBillFormat) {
			t.Fatalf("Refunds: %v", err)
		}
	})
}

func TestParseYuan(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0.01", 1, true}, {"12.34", 1234, true}, {"0.1", 10, true}, {"5", 500, true}, {"45.0", 4500, true},
		{"-0.02", -2, true}, {"-0.02000", -2, true}, {"0.00000", 0, true}, {"1000000.00", 100000000, true},
		{"0.001", 0, false}, {"", 0, false}, {".5", 0, false}, {"1.2.3", 0, false}, {"1e3", 0, false}, {"+1", 0, false},
		{"1,000.00", 0, false}, {"9999999999999999", 0, false},
	}
	for _, tt := range tests {
		got, err := wechatpay.ParseYuan(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseYuan(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func FuzzParseBill(f *testing.F) {
	f.Add([]byte(billSampleA))
	f.Add([]byte(billSampleB))
	f.Add([]byte("a,b\n`1,`2\n总交易单数,x\n`1,`2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := wechatpay.ParseBill(data)
		if err != nil {
			if !errors.Is(err, wechatpay.ErrBillFormat) {
				t.Fatalf("error %v does not wrap ErrBillFormat", err)
			}
			return
		}
		for i, r := range b.Rows {
			if len(r) != len(b.Header) {
				t.Fatalf("row %d has %d values for %d columns", i, len(r), len(b.Header))
			}
		}
		if rs, err := b.Refunds(); err == nil {
			for _, r := range rs {
				if r.OutRefundNo == "" {
					t.Fatal("refund without a number")
				}
			}
		}
		_, _ = b.Totals()
	})
}

// billEnv is a sandbox with paid orders and a merchant client for it.
type billEnv struct {
	sb     *sandbox.Server
	srv    *httptest.Server
	keys   sandbox.Keys
	client *wechatpay.Client
	date   string
}

func newBillEnv(t *testing.T, wrap func(http.Handler) http.Handler) *billEnv {
	t.Helper()
	keys, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(keys.Config())
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = sb
	if wrap != nil {
		h = wrap(sb)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); sb.Close() })
	v, err := keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: srv.URL, MchID: keys.MchID, Signer: keys.Signer(), Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	e := &billEnv{sb: sb, srv: srv, keys: keys, client: client, date: time.Now().In(time.FixedZone("CST", 8*3600)).Format(time.DateOnly)}
	ctx := context.Background()
	for i, amount := range []int64{300, 250} {
		order := fmt.Sprintf("BILL-O%d", i+1)
		if err := sb.CreateOrder(order, "", 1000); err != nil {
			t.Fatal(err)
		}
		no := fmt.Sprintf("BILL-R%d", i+1)
		body, err := client.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: amount, Total: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if o := client.Submit(ctx, no, body, 1); o.Kind == reservation.OutcomeRejected || o.Kind == reservation.OutcomeUnknown {
			t.Fatalf("submit %s: %+v", no, o)
		}
	}
	return e
}

func TestDownloadBill_Sandbox(t *testing.T) {
	e := newBillEnv(t, nil)
	ctx := context.Background()
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip=%v", gz), func(t *testing.T) {
			raw, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: e.date, Type: wechatpay.BillTypeRefund, Gzip: gz})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(raw, []byte("\ufeff")) {
				t.Fatal("the file is returned as made, BOM included")
			}
			b, err := wechatpay.ParseBill(raw)
			if err != nil {
				t.Fatal(err)
			}
			refunds, err := b.Refunds()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, r := range refunds {
				got[r.OutRefundNo] = r.Refund
				if r.OutTradeNo == "" || r.RefundID == "" || r.RequestedAt.IsZero() {
					t.Fatalf("row %+v lacks order, refund id or time", r)
				}
			}
			if len(got) != 2 || got["BILL-R1"] != 300 || got["BILL-R2"] != 250 {
				t.Fatalf("refunds %v", got)
			}
			if sum, err := b.Totals(); err != nil || sum.Count != 2 || sum.RefundTotal != 550 {
				t.Fatalf("summary %+v, %v", sum, err)
			}
		})
	}
	t.Run("no bill that day", func(t *testing.T) {
		_, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: time.Now().AddDate(0, 0, -2).Format(time.DateOnly), Type: wechatpay.BillTypeRefund})
		var be *wechatpay.BillError
		if !errors.Is(err, wechatpay.ErrNoBill) || !errors.As(err, &be) || be.Code != "NO_STATEMENT_EXIST" {
			t.Fatalf("DownloadBill: %v, want ErrNoBill", err)
		}
	})
	t.Run("bad arguments send nothing", func(t *testing.T) {
		for _, req := range []wechatpay.BillRequest{{Date: "2026/03/01"}, {Date: "2026-03-01", Type: "REFUNDS"}} {
			if _, err := e.client.DownloadBill(ctx, req); !errors.Is(err, wechatpay.ErrInvalidArgument) {
				t.Fatalf("DownloadBill(%+v): %v", req, err)
			}
		}
	})
	t.Run("size limit", func(t *testing.T) {
		_, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: e.date, Type: wechatpay.BillTypeRefund, MaxSize: 100})
		if !errors.Is(err, wechatpay.ErrBillRequest) || !strings.Contains(err.Error(), "over 100 bytes") {
			t.Fatalf("DownloadBill: %v", err)
		}
	})
}

// tamper rewrites answers on their way to the client.
func tamper(rewrite func(r *http.Request, status int, body []byte, h http.Header) []byte) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			body := rewrite(r, rec.Code, rec.Body.Bytes(), rec.Header())
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			_, _ = w.Write(body)
		})
	}
}

func TestDownloadBill_Tampered(t *testing.T) {
	ctx := context.Background()
	t.Run("changed file", func(t *testing.T) {
		e := newBillEnv(t, tamper(func(r *http.Request, _ int, body []byte, _ http.Header) []byte {
			if r.URL.Path == "/v3/billdownload/file" {
				return bytes.Replace(body, []byte("`3.00,"), []byte("`0.03,"), 1)
			}
			return body
		}))
		_, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: e.date, Type: wechatpay.BillTypeRefund})
		if !errors.Is(err, wechatpay.ErrBillHash) {
			t.Fatalf("DownloadBill: %v, want ErrBillHash", err)
		}
	})
	t.Run("changed apply answer", func(t *testing.T) {
		e := newBillEnv(t, tamper(func(r *http.Request, _ int, body []byte, _ http.Header) []byte {
			if r.URL.Path == wechatpay.TradeBillPath {
				return bytes.Replace(body, []byte(`"hash_value":"`), []byte(`"hash_value":"0`), 1)
			}
			return body
		}))
		_, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: e.date, Type: wechatpay.BillTypeRefund})
		if !errors.Is(err, wechatpay.ErrBadSignature) {
			t.Fatalf("DownloadBill: %v, want a verification failure", err)
		}
	})
	t.Run("download url elsewhere", func(t *testing.T) {
		var e *billEnv
		e = newBillEnv(t, tamper(func(r *http.Request, _ int, body []byte, h http.Header) []byte {
			if r.URL.Path != wechatpay.TradeBillPath {
				return body
			}
			// A correctly signed answer pointing at another host: only the
			// sandbox's key could make it, so re-sign with it.
			var a map[string]string
			_ = json.Unmarshal(body, &a)
			a["download_url"] = "http://attacker.example/v3/billdownload/file?token=x"
			out, _ := json.Marshal(a)
			sh, err := wechatpay.SignHeaders(e.keys.PlatformKey, e.keys.PublicKeyID, time.Now().Unix(), wechatpay.NewNonce(), out)
			if err != nil {
				t.Error(err)
			}
			sh.Set(h)
			return out
		}))
		_, err := e.client.DownloadBill(ctx, wechatpay.BillRequest{Date: e.date, Type: wechatpay.BillTypeRefund})
		if !errors.Is(err, wechatpay.ErrBillRequest) || !strings.Contains(err.Error(), "attacker.example") {
			t.Fatalf("DownloadBill: %v, want ErrBillRequest naming the foreign URL", err)
		}
	})
}

var _ = io.Discard
