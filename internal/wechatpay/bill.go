package wechatpay

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The trade bill (交易账单) API and file, as described in
// ../shared/wechatpay/BILL.md: step one GET TradeBillPath (signed request,
// signed answer) returns a SHA-1 and a short-lived download_url; step two
// GET download_url (signed request, unsigned answer) returns the file,
// checked against the SHA-1.

// TradeBillPath is the APIv3 endpoint of step one.
const TradeBillPath = "/v3/bill/tradebill"

// Bill types (BillRequest.Type).
const (
	BillTypeAll     = "ALL"
	BillTypeSuccess = "SUCCESS"
	BillTypeRefund  = "REFUND"
)

// DefaultMaxBillSize caps a downloaded bill (after decompression) when
// BillRequest.MaxSize is zero.
const DefaultMaxBillSize = 256 << 20

// Bill errors. They are declared here, beside the bill code, rather than
// in errors.go; every error DownloadBill returns wraps one of them or one
// of the verification sentinels.
var (
	// ErrNoBill is returned by DownloadBill when WeChat Pay has no bill
	// for the date (NO_STATEMENT_EXIST: no trade or refund that day). The
	// error is a *BillError.
	ErrNoBill = errors.New("wechatpay: no bill for that date")
	// ErrBillNotReady is returned by DownloadBill when the bill is still
	// being generated (STATEMENT_CREATING): retry later, bills are ready
	// from about 10:00 the next day. The error is a *BillError.
	ErrBillNotReady = errors.New("wechatpay: bill not ready yet")
	// ErrBillRequest is returned by DownloadBill for any other failure: a
	// transport error, another error answer (then a *BillError), a
	// malformed answer, a download URL on another host, a file over the
	// size limit.
	ErrBillRequest = errors.New("wechatpay: bill request failed")
	// ErrBillHash is returned by DownloadBill when the file's SHA-1 is not
	// the hash_value of step one.
	ErrBillHash = errors.New("wechatpay: bill hash mismatch")
	// ErrBillFormat is returned by ParseBill and the Bill methods for a
	// file that is not a bill in the documented layout.
	ErrBillFormat = errors.New("wechatpay: malformed bill")
)

// BillError is an error answer of the bill API.
type BillError struct {
	Status  int // HTTP status
	Code    string
	Message string
}

func (e *BillError) Error() string {
	return fmt.Sprintf("wechatpay: bill: HTTP %d %s: %s", e.Status, e.Code, limit(e.Message, maxLoggedMessage))
}

// Unwrap maps the code to ErrNoBill, ErrBillNotReady or ErrBillRequest.
func (e *BillError) Unwrap() error {
	switch e.Code {
	case "NO_STATEMENT_EXIST":
		return ErrNoBill
	case "STATEMENT_CREATING":
		return ErrBillNotReady
	}
	return ErrBillRequest
}

// BillRequest asks for one day's bill.
type BillRequest struct {
	// Date is the bill date, yyyy-MM-dd (Beijing time). Required.
	Date string
	// Type is BillTypeAll, BillTypeSuccess or BillTypeRefund. Empty means
	// BillTypeAll, as on WeChat Pay.
	Type string
	// Gzip asks for a compressed transfer (tar_type=GZIP); the returned
	// bytes are decompressed either way.
	Gzip bool
	// MaxSize caps the file in bytes. Zero means DefaultMaxBillSize.
	MaxSize int64
}

type billApply struct {
	HashType    string `json:"hash_type"`
	HashValue   string `json:"hash_value"`
	DownloadURL string `json:"download_url"`
}

// DownloadBill fetches a bill in the two steps of the API and returns the
// file exactly as WeChat Pay made it (UTF-8 BOM included, decompressed),
// after checking its SHA-1. Step one's answer must verify like any other
// response; step two's answer is unsigned by design, so it is trusted
// through the hash, and its URL must be on the Client's own host (the
// request to it is signed).
func (c *Client) DownloadBill(ctx context.Context, req BillRequest) ([]byte, error) {
	if _, err := time.Parse(time.DateOnly, req.Date); err != nil {
		return nil, fmt.Errorf("%w: bill: date %q is not yyyy-MM-dd", ErrInvalidArgument, req.Date)
	}
	typ := req.Type
	if typ == "" {
		typ = BillTypeAll
	}
	if typ != BillTypeAll && typ != BillTypeSuccess && typ != BillTypeRefund {
		return nil, fmt.Errorf("%w: bill: type %q", ErrInvalidArgument, typ)
	}
	maxSize := req.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxBillSize
	}
	q := url.Values{"bill_date": {req.Date}, "bill_type": {typ}}
	if req.Gzip {
		q.Set("tar_type", "GZIP")
	}

	status, header, raw, err := c.billGet(ctx, c.base+TradeBillPath+"?"+q.Encode(), "application/json", MaxResponseSize)
	if err != nil {
		return nil, err
	}
	if verr := c.verifier.Verify(HeadersFrom(header), raw); verr != nil {
		return nil, fmt.Errorf("wechatpay: bill: HTTP %d answer to %s failed verification: %w", status, TradeBillPath, verr)
	}
	if status != http.StatusOK {
		return nil, billError(status, raw)
	}
	var a billApply
	if err := json.Unmarshal(raw, &a); err != nil {
		return nil, fmt.Errorf("%w: bill: apply answer is not JSON: %s", ErrBillRequest, jsonErr(err))
	}
	want, err := hex.DecodeString(a.HashValue)
	if !strings.EqualFold(a.HashType, "SHA1") || err != nil || len(want) != sha1.Size {
		return nil, fmt.Errorf("%w: bill: unsupported hash %q %q", ErrBillRequest, limit(a.HashType, 16), limit(a.HashValue, 64))
	}
	dl, err := c.sameOrigin(a.DownloadURL)
	if err != nil {
		return nil, err
	}

	status, _, raw, err = c.billGet(ctx, dl, "*/*", maxSize)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, billError(status, raw)
	}
	if req.Gzip {
		if raw, err = gunzip(raw, maxSize); err != nil {
			return nil, err
		}
	}
	// The hash is of the file as made, BOM included (BILL.md pitfall 7).
	if got := sha1.Sum(raw); !bytes.Equal(got[:], want) {
		return nil, fmt.Errorf("%w: file sha1 %x, hash_value %s", ErrBillHash, got, a.HashValue)
	}
	return raw, nil
}

// sameOrigin accepts a download URL only on the Client's scheme and host:
// the request to it carries the merchant's signature.
func (c *Client) sameOrigin(raw string) (string, error) {
	u, err := url.Parse(raw)
	base, berr := url.Parse(c.base)
	if err != nil || berr != nil || u.Scheme != base.Scheme || u.Host != base.Host || u.User != nil {
		return "", fmt.Errorf("%w: bill: download_url %q is not on %s", ErrBillRequest, limit(raw, 200), c.base)
	}
	return u.String(), nil
}

// billGet sends one signed GET and reads at most maxBody bytes of the
// answer.
func (c *Client) billGet(ctx context.Context, rawURL, accept string, maxBody int64) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: bill: %s", ErrBillRequest, limit(err.Error(), maxLoggedMessage))
	}
	auth, err := c.signer.Load().Authorization(http.MethodGet, req.URL.RequestURI(), nil, c.now().Unix(), NewNonce())
	if err != nil {
		return 0, nil, nil, fmt.Errorf("wechatpay: bill: sign request: %w", err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", UserAgent)
	if s := c.verifier.PreferredSerial(); s != "" {
		req.Header.Set(HeaderSerial, s)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: bill: %s", ErrBillRequest, limit(err.Error(), maxLoggedMessage))
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return 0, nil, nil, fmt.Errorf("%w: bill: read answer: %s", ErrBillRequest, limit(err.Error(), maxLoggedMessage))
	}
	if int64(len(raw)) > maxBody {
		return 0, nil, nil, fmt.Errorf("%w: bill: answer over %d bytes", ErrBillRequest, maxBody)
	}
	c.log.Debug("wechatpay: bill call", "path", req.URL.Path, "http_status", resp.StatusCode,
		"request_id", limit(resp.Header.Get(HeaderRequestID), 128), "bytes", len(raw))
	return resp.StatusCode, resp.Header, raw, nil
}

func billError(status int, raw []byte) error {
	var e ErrorResponse
	if err := json.Unmarshal(raw, &e); err != nil || e.Code == "" {
		return &BillError{Status: status, Code: "HTTP_" + strconv.Itoa(status), Message: "answer without an error code"}
	}
	return &BillError{Status: status, Code: e.Code, Message: e.Message}
}

func gunzip(raw []byte, maxSize int64) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: bill: not gzip: %s", ErrBillRequest, limit(err.Error(), maxLoggedMessage))
	}
	out, err := io.ReadAll(io.LimitReader(zr, maxSize+1))
	if err != nil {
		return nil, fmt.Errorf("%w: bill: gunzip: %s", ErrBillRequest, limit(err.Error(), maxLoggedMessage))
	}
	if int64(len(out)) > maxSize {
		return nil, fmt.Errorf("%w: bill: decompressed file over %d bytes", ErrBillRequest, maxSize)
	}
	return out, nil
}

// Bill is a parsed bill file: the detail header and rows, and the summary
// header and row. Values are as in the file without their leading
// backtick; nothing else is changed.
type Bill struct {
	Header        []string
	Rows          [][]string // each exactly len(Header) values
	SummaryHeader []string
	Summary       []string // exactly len(SummaryHeader) values
	// RowLines[i] is the 1-based line of Rows[i] in the file, for reports.
	RowLines []int
}

// summaryMarker starts the summary header line.
const summaryMarker = "总交易单数"

// ParseBill parses a bill file (BILL.md §2): an optional UTF-8 BOM, the
// detail header, detail rows, the summary header (found by its first
// column 总交易单数, not by field count) and the summary row. Lines end in
// CRLF or LF. Every detail and summary value starts with one backtick,
// which is removed; fields are split on ",`" so that a comma inside a value
// (商品名称, 商户数据包) does not shift the columns. Errors wrap
// ErrBillFormat and name the line.
func ParseBill(data []byte) (*Bill, error) {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	lines := strings.Split(string(data), "\n")
	for i := range lines {
		lines[i] = strings.TrimSuffix(lines[i], "\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	bad := func(line int, format string, args ...any) error {
		return fmt.Errorf("%w: line %d: %s", ErrBillFormat, line, fmt.Sprintf(format, args...))
	}
	if len(lines) == 0 {
		return nil, fmt.Errorf("%w: empty file", ErrBillFormat)
	}
	if strings.HasPrefix(lines[0], "`") || !strings.Contains(lines[0], ",") {
		return nil, bad(1, "not a header line")
	}
	b := &Bill{Header: strings.Split(lines[0], ",")}
	i := 1
	for ; i < len(lines) && !strings.HasPrefix(lines[i], summaryMarker); i++ {
		if lines[i] == "" {
			continue
		}
		row, err := splitValues(lines[i])
		if err != nil {
			return nil, bad(i+1, "%v", err)
		}
		if len(row) != len(b.Header) {
			return nil, bad(i+1, "%d values, the header has %d columns", len(row), len(b.Header))
		}
		b.Rows = append(b.Rows, row)
		b.RowLines = append(b.RowLines, i+1)
	}
	if i >= len(lines) {
		return nil, fmt.Errorf("%w: no summary (a line starting %s); the file may be truncated", ErrBillFormat, summaryMarker)
	}
	b.SummaryHeader = strings.Split(lines[i], ",")
	if i+1 >= len(lines) {
		return nil, bad(i+1, "summary header without a summary row")
	}
	sum, err := splitValues(lines[i+1])
	if err != nil {
		return nil, bad(i+2, "%v", err)
	}
	if len(sum) != len(b.SummaryHeader) {
		return nil, bad(i+2, "%d summary values, the summary header has %d columns", len(sum), len(b.SummaryHeader))
	}
	b.Summary = sum
	for j := i + 2; j < len(lines); j++ {
		if lines[j] != "" {
			return nil, bad(j+1, "unexpected line after the summary")
		}
	}
	return b, nil
}

func splitValues(line string) ([]string, error) {
	if !strings.HasPrefix(line, "`") {
		return nil, errors.New("value line does not start with a backtick")
	}
	return strings.Split(line[1:], ",`"), nil
}

// Column returns the index of the named column of the detail header, or -1.
func (b *Bill) Column(name string) int {
	for i, h := range b.Header {
		if h == name {
			return i
		}
	}
	return -1
}

// BillRefund is one refund row of a REFUND or ALL bill. Amounts are fen.
type BillRefund struct {
	Line          int       // 1-based line in the file
	TradeTime     time.Time // 交易时间 (Beijing); for refunds often the payment time
	MchID         string    // 商户号
	TransactionID string    // 微信订单号
	OutTradeNo    string    // 商户订单号
	// RequestedAt and SucceededAt are 退款申请时间 and 退款成功时间; zero
	// when the column is absent (ALL bills) or empty.
	RequestedAt     time.Time
	SucceededAt     time.Time
	RefundID        string // 微信退款单号
	OutRefundNo     string // 商户退款单号
	Refund          int64  // 退款金额
	RequestedRefund int64  // 申请退款金额; 0 when absent (legacy layout)
	RefundType      string // 退款类型, e.g. ORIGINAL
	RefundStatus    string // 退款状态, e.g. SUCCESS, PROCESSING (a snapshot: not updated after the bill is made)
}

// beijing is the time zone of bill times (no zone is written).
var beijing = time.FixedZone("CST", 8*3600)

// Refunds returns the bill's refund rows: rows whose 交易状态 is REFUND, or
// every row when the bill has no such column. It needs 商户退款单号 and
// 退款金额; the other columns are read when present (by name, so the
// legacy layout works too).
func (b *Bill) Refunds() ([]BillRefund, error) {
	col := func(names ...string) int {
		for _, n := range names {
			if i := b.Column(n); i >= 0 {
				return i
			}
		}
		return -1
	}
	no, amount := col("商户退款单号"), col("退款金额")
	if no < 0 || amount < 0 {
		return nil, fmt.Errorf("%w: no 商户退款单号 or 退款金额 column: not a refund bill", ErrBillFormat)
	}
	state := col("交易状态")
	var (
		tradeTime, mch, txn, order = col("交易时间"), col("商户号"), col("微信订单号"), col("商户订单号")
		applied, succeeded         = col("退款申请时间"), col("退款成功时间")
		refundID, requested        = col("微信退款单号"), col("申请退款金额")
		refundType, refundStatus   = col("退款类型"), col("退款状态")
	)
	get := func(row []string, i int) string {
		if i < 0 {
			return ""
		}
		return row[i]
	}
	var out []BillRefund
	for k, row := range b.Rows {
		if state >= 0 && row[state] != "REFUND" {
			continue
		}
		line := b.RowLines[k]
		r := BillRefund{Line: line, MchID: get(row, mch), TransactionID: get(row, txn), OutTradeNo: get(row, order),
			RefundID: get(row, refundID), OutRefundNo: row[no], RefundType: get(row, refundType), RefundStatus: get(row, refundStatus)}
		var err error
		if r.Refund, err = ParseYuan(row[amount]); err != nil {
			return nil, fmt.Errorf("%w: line %d: 退款金额: %v", ErrBillFormat, line, err)
		}
		if s := get(row, requested); s != "" {
			if r.RequestedRefund, err = ParseYuan(s); err != nil {
				return nil, fmt.Errorf("%w: line %d: 申请退款金额: %v", ErrBillFormat, line, err)
			}
		}
		for _, f := range []struct {
			dst  *time.Time
			i    int
			name string
		}{{&r.TradeTime, tradeTime, "交易时间"}, {&r.RequestedAt, applied, "退款申请时间"}, {&r.SucceededAt, succeeded, "退款成功时间"}} {
			if s := get(row, f.i); s != "" {
				t, err := time.ParseInLocation(time.DateTime, s, beijing)
				if err != nil {
					return nil, fmt.Errorf("%w: line %d: %s %q is not yyyy-MM-dd HH:mm:ss", ErrBillFormat, line, f.name, limit(s, 40))
				}
				*f.dst = t
			}
		}
		if r.OutRefundNo == "" {
			return nil, fmt.Errorf("%w: line %d: empty 商户退款单号", ErrBillFormat, line)
		}
		out = append(out, r)
	}
	return out, nil
}

// BillSummary is the summary row; amounts in fen, zero when the column is
// absent. Fees keep their file form: they have five decimals.
type BillSummary struct {
	Count           int64  // 总交易单数
	SettlementTotal int64  // 应结订单总金额
	RefundTotal     int64  // 退款总金额 (legacy: 总退款金额)
	CouponRefund    int64  // 充值券退款总金额
	FeeTotal        string // 手续费总金额, e.g. "-0.02000"
	OrderTotal      int64  // 订单总金额
	RequestedTotal  int64  // 申请退款总金额
}

// Totals parses the summary row by column name.
func (b *Bill) Totals() (BillSummary, error) {
	var s BillSummary
	for i, h := range b.SummaryHeader {
		v := b.Summary[i]
		var dst *int64
		switch h {
		case "总交易单数":
			// Spreadsheet round trips write counts like "45.0".
			n, err := ParseYuan(v)
			if err != nil || n%100 != 0 {
				return s, fmt.Errorf("%w: summary 总交易单数 %q is not a count", ErrBillFormat, limit(v, 40))
			}
			s.Count = n / 100
			continue
		case "手续费总金额":
			s.FeeTotal = v
			continue
		case "应结订单总金额":
			dst = &s.SettlementTotal
		case "退款总金额", "总退款金额":
			dst = &s.RefundTotal
		case "充值券退款总金额":
			dst = &s.CouponRefund
		case "订单总金额":
			dst = &s.OrderTotal
		case "申请退款总金额":
			dst = &s.RequestedTotal
		default:
			continue
		}
		n, err := ParseYuan(v)
		if err != nil {
			return s, fmt.Errorf("%w: summary %s: %v", ErrBillFormat, h, err)
		}
		*dst = n
	}
	return s, nil
}

// ParseYuan converts a yuan amount as written in bills ("12.34", "0.1",
// "5", "-0.02", "0.00000") to fen, exactly, without floating point. Digits
// past the second decimal must be zeros.
func ParseYuan(s string) (int64, error) {
	orig := s
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(whole) > 15 || !allDigits(whole) || !allDigits(frac) {
		return 0, fmt.Errorf("%w: amount %q", ErrBillFormat, limit(orig, 40))
	}
	if len(frac) > 2 {
		if strings.Trim(frac[2:], "0") != "" {
			return 0, fmt.Errorf("%w: amount %q has fractions of a fen", ErrBillFormat, limit(orig, 40))
		}
		frac = frac[:2]
	}
	frac += strings.Repeat("0", 2-len(frac))
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt(frac, 10, 64)
	v := w*100 + f
	if neg {
		v = -v
	}
	return v, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
