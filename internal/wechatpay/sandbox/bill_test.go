package sandbox

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

type billApply struct {
	HashType    string `json:"hash_type"`
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
}

// applyBill runs step one and returns its answer.
func applyBill(t *testing.T, m *merchant, query string) billApply {
	t.Helper()
	r := m.must("GET", tradeBillPath+"?"+query, nil)
	if r.status != 200 {
		t.Fatalf("tradebill: %d %s", r.status, r.body)
	}
	var a billApply
	if err := json.Unmarshal(r.body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// download runs step two: a signed GET of download_url whose answer is not
// signed.
func download(t *testing.T, m *merchant, downloadURL string) response {
	t.Helper()
	u, err := url.Parse(downloadURL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme+"://"+u.Host != m.base {
		t.Fatalf("download_url %s does not point at the sandbox %s", downloadURL, m.base)
	}
	r, err := m.send("GET", u.RequestURI(), nil, reqOpts{header: map[string]string{"Accept": "*/*"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestTradeBill_RefundBill(t *testing.T) {
	f := newFixture(t, nil)
	f.order(t, "O1", 1000)
	f.order(t, "O2", 500)
	f.order(t, "O3", 700)
	for _, ft := range []Fault{
		{Kind: FaultOutcome, OutTradeNo: "O2", Outcome: "ABNORMAL"},
		{Kind: FaultOutcome, OutTradeNo: "O3", Outcome: "CLOSED"},
	} {
		if err := f.sb.SetFault(ft); err != nil {
			t.Fatal(err)
		}
	}
	f.m.create("O1", "R1", 300, 1000, "")
	f.m.create("O2", "R2", 200, 500, "")
	f.m.create("O3", "R3", 700, 700, "") // CLOSED: not in the bill
	r1, _ := f.sb.Refund("R1")
	r2, _ := f.sb.Refund("R2")
	date := r1.CreateTime.In(beijing).Format(time.DateOnly)

	a := applyBill(t, f.m, "bill_date="+date+"&bill_type=REFUND")
	if a.HashType != "SHA1" || !strings.HasPrefix(a.DownloadURL, f.http.URL+billDownloadPath+"?token=") {
		t.Fatalf("apply answer %+v", a)
	}
	r := download(t, f.m, a.DownloadURL)
	if r.status != 200 || r.header.Get("Wechatpay-Signature") != "" {
		t.Fatalf("download: %d, signature header %q", r.status, r.header.Get("Wechatpay-Signature"))
	}
	sum := sha1.Sum(r.body)
	if hex.EncodeToString(sum[:]) != a.HashValue {
		t.Fatalf("sha1 %x != hash_value %s", sum, a.HashValue)
	}

	text := string(r.body)
	if !strings.HasPrefix(text, "\ufeff") || !strings.HasSuffix(text, "\r\n") || strings.Contains(strings.ReplaceAll(text, "\r\n", ""), "\n") {
		t.Fatal("bill must start with a BOM and use CRLF line endings throughout")
	}
	lines := strings.Split(strings.TrimSuffix(strings.TrimPrefix(text, "\ufeff"), "\r\n"), "\r\n")
	if len(lines) != 5 {
		t.Fatalf("%d lines, want header, 2 rows, summary header, summary:\n%s", len(lines), text)
	}
	header := strings.Split(lines[0], ",")
	if len(header) != 29 || header[17] != "商户退款单号" || header[21] != "退款状态" || strings.Contains(lines[0], "`") {
		t.Fatalf("header %q", lines[0])
	}
	// Split each row as SDKs do: drop the first backtick, split on ",`".
	fields := func(line string) []string {
		if !strings.HasPrefix(line, "`") {
			t.Fatalf("row does not start with a backtick: %q", line)
		}
		return strings.Split(line[1:], ",`")
	}
	col := func(row []string, name string) string {
		for i, h := range header {
			if h == name {
				return row[i]
			}
		}
		t.Fatalf("no column %s", name)
		return ""
	}
	want := []struct {
		rec                     RefundRecord
		status, amount, success string
	}{
		{r1, "SUCCESS", "3.00", r1.SuccessTime.In(beijing).Format(time.DateTime)},
		{r2, "ABNORMAL", "2.00", ""},
	}
	for i, w := range want {
		row := fields(lines[1+i])
		if len(row) != 29 {
			t.Fatalf("row %d has %d fields", i, len(row))
		}
		if col(row, "商户退款单号") != w.rec.OutRefundNo || col(row, "微信退款单号") != w.rec.RefundID ||
			col(row, "商户订单号") != w.rec.OutTradeNo || col(row, "微信订单号") != w.rec.TransactionID ||
			col(row, "商户号") != testMchID || col(row, "交易状态") != "REFUND" || col(row, "退款状态") != w.status ||
			col(row, "退款金额") != w.amount || col(row, "申请退款金额") != w.amount || col(row, "退款成功时间") != w.success ||
			col(row, "退款申请时间") != w.rec.CreateTime.In(beijing).Format(time.DateTime) || col(row, "订单金额") != "0.00" {
			t.Fatalf("row %d: %q", i, lines[1+i])
		}
	}
	if lines[3] != billSummaryHeader || lines[4] != "`2,`0.00,`5.00,`0.00,`0.00000,`0.00,`5.00" {
		t.Fatalf("summary %q / %q", lines[3], lines[4])
	}

	// The GZIP variant hashes the uncompressed file.
	g := applyBill(t, f.m, "bill_date="+date+"&bill_type=REFUND&tar_type=GZIP")
	if !strings.HasSuffix(g.DownloadURL, "&tartype=gzip") || g.HashValue != a.HashValue {
		t.Fatalf("gzip apply %+v", g)
	}
	zr, err := gzip.NewReader(bytes.NewReader(download(t, f.m, g.DownloadURL).body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, r.body) {
		t.Fatalf("gzip bill differs (%v)", err)
	}
}

func TestTradeBill_Errors(t *testing.T) {
	var offset atomic.Int64
	f := newFixture(t, func(c *Config) {
		c.Now = func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
		c.MaxSkew = time.Hour // the test moves the sandbox clock
	})
	f.order(t, "O1", 1000)
	f.m.create("O1", "R1", 300, 1000, "")
	rec, _ := f.sb.Refund("R1")
	day := rec.CreateTime.In(beijing)
	tests := []struct {
		name, query string
		status      int
		code        string
	}{
		{"no refunds that day", "bill_date=" + day.AddDate(0, 0, -1).Format(time.DateOnly) + "&bill_type=REFUND", 400, "NO_STATEMENT_EXIST"},
		{"future date", "bill_date=" + day.AddDate(0, 0, 1).Format(time.DateOnly) + "&bill_type=REFUND", 400, "PARAM_ERROR"},
		{"older than three months", "bill_date=" + day.AddDate(0, -4, 0).Format(time.DateOnly) + "&bill_type=REFUND", 400, "PARAM_ERROR"},
		{"bad date", "bill_date=20240101&bill_type=REFUND", 400, "PARAM_ERROR"},
		{"default type ALL not served", "bill_date=" + day.Format(time.DateOnly), 400, "PARAM_ERROR"},
		{"bad tar type", "bill_date=" + day.Format(time.DateOnly) + "&bill_type=REFUND&tar_type=ZIP", 400, "PARAM_ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.m.must("GET", tradeBillPath+"?"+tt.query, nil)
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
		})
	}
	a := applyBill(t, f.m, "bill_date="+day.Format(time.DateOnly)+"&bill_type=REFUND")
	u, _ := url.Parse(a.DownloadURL)
	if r, _ := f.m.send("GET", u.RequestURI(), nil, reqOpts{noAuth: true, header: map[string]string{"Accept": "*/*"}}); r.status != 401 || r.code() != "SIGN_ERROR" {
		t.Fatalf("unsigned download: %d %s", r.status, r.body)
	}
	if r := download(t, f.m, f.http.URL+billDownloadPath+"?token=nope"); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("unknown token: %d %s", r.status, r.body)
	}
	offset.Store(int64(6 * time.Minute))
	if r := download(t, f.m, a.DownloadURL); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("expired download_url: %d %s", r.status, r.body)
	}
}
