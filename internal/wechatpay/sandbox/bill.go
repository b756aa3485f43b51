package sandbox

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// billURLTTL is how long a download_url stays valid (BILL.md §1: 5 min).
const billURLTTL = 5 * time.Minute

// billFile is a prepared bill behind a download token.
type billFile struct {
	data    []byte // as served: gzip when requested
	expires time.Time
}

// Refund bill layout (BILL.md §2): 29 detail columns, 7 summary columns.
const (
	refundBillHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类," +
		"应结订单金额,代金券金额,退款申请时间,退款成功时间,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态," +
		"商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
	billSummaryHeader = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"
	// utf8BOM starts real bill files (BILL.md §2, strongly indicated); it
	// is part of the hashed bytes.
	utf8BOM = "\ufeff"
)

// handleTradeBill serves GET /v3/bill/tradebill: step one of the bill
// download, answering the hash and a short-lived download_url.
func (s *Server) handleTradeBill(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, true) {
		return
	}
	q := r.URL.Query()
	// The provider-wide bill (no sub_mchid) is not served: these books are
	// one sub-merchant's.
	if e := checkSubMchID(s.cfg.SubMchID, q.Get("sub_mchid"), "query"); e != nil {
		s.writeError(w, e, sigOK)
		return
	}
	date, billType, tarType := q.Get("bill_date"), q.Get("bill_type"), q.Get("tar_type")
	if billType == "" {
		billType = "ALL"
	}
	day, err := time.ParseInLocation(time.DateOnly, date, beijing)
	now := s.cfg.Now().In(beijing)
	today := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, beijing)
	switch {
	case err != nil:
		s.writeError(w, queryError("bill_date", "格式须为yyyy-MM-dd"), sigOK)
		return
	case billType != "REFUND":
		s.writeError(w, queryError("bill_type", "沙箱仅提供REFUND账单"), sigOK)
		return
	case tarType != "" && tarType != "GZIP":
		s.writeError(w, queryError("tar_type", "仅支持GZIP"), sigOK)
		return
	case day.After(today):
		s.writeError(w, queryError("bill_date", "账单日期不能晚于今天"), sigOK)
		return
	case day.Before(today.AddDate(0, -3, 0)):
		s.writeError(w, queryError("bill_date", "仅支持下载三个月内的账单"), sigOK)
		return
	}
	if err := s.syncAll(); err != nil { // the bill shows nothing a restart could forget
		s.log.Error("save state before serving a bill", "err", err)
		s.writeError(w, errSystem(), sigOK)
		return
	}
	raw, n := s.refundBill(date)
	if n == 0 {
		s.writeError(w, newError(http.StatusBadRequest, "NO_STATEMENT_EXIST", "请求的账单文件不存在"), sigOK)
		return
	}
	sum := sha1.Sum(raw) // of the uncompressed bill, as WeChat Pay hashes it
	data := raw
	token := randomAlnum(32)
	dl := s.baseURL(r) + billDownloadPath + "?token=" + token
	if tarType == "GZIP" {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(raw)
		zw.Close()
		data = b.Bytes()
		dl += "&tartype=gzip"
	}
	s.mu.Lock()
	for t, f := range s.bills {
		if now.After(f.expires) {
			delete(s.bills, t)
		}
	}
	s.bills[token] = billFile{data: data, expires: now.Add(billURLTTL)}
	s.mu.Unlock()
	s.writeJSON(w, http.StatusOK, struct {
		HashType    string `json:"hash_type"`
		HashValue   string `json:"hash_value"`
		DownloadURL string `json:"download_url"`
	}{"SHA1", hex.EncodeToString(sum[:]), dl}, sigOK)
}

// handleBillDownload serves GET /v3/billdownload/file: the request is
// signed, the response is not (as on the real API).
func (s *Server) handleBillDownload(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, false) {
		return
	}
	token := r.URL.Query().Get("token")
	s.mu.Lock()
	f, found := s.bills[token]
	s.mu.Unlock()
	if !found || s.cfg.Now().After(f.expires) {
		s.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "下载链接无效或已过期"), sigOK)
		return
	}
	s.writeSigned(w, http.StatusOK, "application/octet-stream", f.data, sigNone)
}

func queryError(field, issue string) *apiError {
	e := paramError(field, issue)
	e.Detail.Location = "query"
	return e
}

// baseURL is where the download URL points: Config.BaseURL, else this
// request's scheme and host.
func (s *Server) baseURL(r *http.Request) string {
	if s.cfg.BaseURL != "" {
		return s.cfg.BaseURL
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return (&url.URL{Scheme: scheme, Host: r.Host}).String()
}

// refundBill renders the REFUND bill of date (yyyy-MM-dd, Beijing): the
// refunds created that day that are not CLOSED, in creation order, with
// their current status. It returns the file and its number of rows.
func (s *Server) refundBill(date string) ([]byte, int) {
	s.mu.Lock()
	var rows []*refund
	for _, r := range s.refunds {
		if r.status != wechatpay.RefundClosed && r.createdAt.In(beijing).Format(time.DateOnly) == date {
			rows = append(rows, r)
		}
	}
	slices.SortFunc(rows, func(a, b *refund) int {
		if c := a.createdAt.Compare(b.createdAt); c != 0 {
			return c
		}
		return strings.Compare(a.outRefundNo, b.outRefundNo)
	})
	var b strings.Builder
	b.WriteString(utf8BOM + refundBillHeader + "\r\n")
	var total int64
	sub := "0" // 特约商户号: 0 for a direct merchant (BILL.md)
	if s.cfg.SubMchID != "" {
		sub = s.cfg.SubMchID
	}
	for _, r := range rows {
		succeeded := ""
		if r.status == wechatpay.RefundSuccess {
			succeeded = beijingTime(r.succeededAt)
		}
		total += r.amount
		b.WriteString(billLine(
			beijingTime(r.order.paidAt), s.cfg.AppID, s.cfg.MchID, sub, "", r.order.transactionID, r.order.outTradeNo,
			r.order.openID, "JSAPI", "REFUND", "OTHERS", "CNY", "0.00", "0.00",
			beijingTime(r.createdAt), succeeded, r.refundID, r.outRefundNo, yuan(r.amount), "0.00", "ORIGINAL", r.status,
			"sandbox order", "", "0.00000", "0.60%", "0.00", yuan(r.amount), "",
		))
	}
	s.mu.Unlock()
	b.WriteString(billSummaryHeader + "\r\n")
	b.WriteString(billLine(fmt.Sprint(len(rows)), "0.00", yuan(total), "0.00", "0.00000", "0.00", yuan(total)))
	return []byte(b.String()), len(rows)
}

// billLine prefixes every value with a backtick (so spreadsheets keep long
// numbers as text) and ends the line with CRLF.
func billLine(vals ...string) string {
	return "`" + strings.Join(vals, ",`") + "\r\n"
}

func beijingTime(t time.Time) string { return t.In(beijing).Format(time.DateTime) }

// yuan formats fen as yuan with two decimals.
func yuan(fen int64) string {
	sign := ""
	if fen < 0 {
		sign, fen = "-", -fen
	}
	return fmt.Sprintf("%s%d.%02d", sign, fen/100, fen%100)
}
