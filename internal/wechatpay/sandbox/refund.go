package sandbox

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Limits of the refund API (PROTOCOL.md §1.2, §1.6, §1.8).
const (
	maxOrderNoLen     = 32
	maxReasonLen      = 80
	maxNotifyURLLen   = 256
	maxRefundsByOrder = 50
	// refundWindow is how long after payment an order can be refunded.
	refundWindow = 365 * 24 * time.Hour
)

// checkSubMchID applies WeChat Pay's partner rules to the sub_mchid a call
// names (PARTNER.md §1.8) for books of sub-merchant want ("" for a direct
// merchant). where is the parameter's location (body or query).
func checkSubMchID(want, got, where string) *apiError {
	field := "sub_mchid"
	if where == "body" {
		field = "/sub_mchid"
	}
	e := func(issue string) *apiError {
		pe := paramError(field, issue)
		pe.Detail.Location = where
		return pe
	}
	switch {
	case want == "" && got != "":
		return e("直连商户不可传入sub_mchid")
	case want != "" && got == "":
		// WeChat Pay's message names the v2 field even on v3.
		return e("受理机构必须传入sub_mch_id")
	case got != want:
		return errNoAuth()
	}
	return nil
}

// errNoAuth refuses a sub_mchid the provider is not authorised for: v2's
// text, v3's code for authorisation errors (PARTNER.md §1.8), 403 as the
// general table gives NO_AUTH.
func errNoAuth() *apiError {
	return newError(http.StatusForbidden, "NO_AUTH", "特约子商户商户号未授权服务商的产品权限")
}

var outRefundNoRE = regexp.MustCompile(`^[0-9A-Za-z_\-|*@]{1,64}$`)

// order is a paid order as WeChat Pay knows it.
type order struct {
	outTradeNo    string
	transactionID string
	total         int64
	paidAt        time.Time
	openID        string
	held          int64    // refunded or in flight: sum of refunds not CLOSED
	refundNos     []string // in creation order
	// lastAcceptedAt is when its latest refund was accepted, for
	// Config.MinRefundSpacing.
	lastAcceptedAt time.Time
}

// refund is an accepted refund.
type refund struct {
	outRefundNo  string
	refundID     string
	order        *order
	amount       int64
	reason       string
	notifyURL    string
	fundsAccount string
	from         []fundsFrom
	status       string
	outcome      string // the final status it will reach
	bodyHash     string // of the accepted request
	createdAt    time.Time
	succeededAt  time.Time
	// processingSince is when it last became PROCESSING: its acceptance,
	// or an accepted apply-abnormal-refund.
	processingSince time.Time
	channel         string // ORIGINAL until an abnormal refund is applied
	receivedAccount string // user_received_account
	abnormalType    string // type of the accepted apply-abnormal-refund, if any
	// pendingNotify counts notifications of the current status (original
	// copies, not injected duplicates) still being delivered; -1 while a
	// loaded refund waits for resume to send them again.
	pendingNotify int
}

// submission tracks every authenticated create call for one out_refund_no,
// accepted or not.
type submission struct {
	hashes []string // distinct body hashes, in order first seen
	calls  int
}

// RefundRecord is what the sandbox holds about one refund number.
type RefundRecord struct {
	OutRefundNo   string    `json:"out_refund_no"`
	RefundID      string    `json:"refund_id"`
	OutTradeNo    string    `json:"out_trade_no"`
	TransactionID string    `json:"transaction_id"`
	Status        string    `json:"status"` // PROCESSING, SUCCESS, CLOSED or ABNORMAL
	Refund        int64     `json:"refund"` // fen
	Total         int64     `json:"total"`  // order total, fen
	Reason        string    `json:"reason,omitempty"`
	NotifyURL     string    `json:"notify_url,omitempty"`
	CreateTime    time.Time `json:"create_time"`
	SuccessTime   time.Time `json:"success_time,omitzero"`
	// BodyHash is the hex SHA-256 of the request body that created it.
	BodyHash string `json:"body_hash"`
	// BodyHashes are the distinct bodies ever submitted with this refund
	// number, before or after acceptance, in order first seen. More than
	// one means the merchant reused the number with another body.
	BodyHashes []string `json:"body_hashes"`
	// Submissions counts authenticated create calls with this number. With
	// a StateFile the count is saved with the next change to the books, so
	// after a crash it may miss the last identical resubmissions.
	Submissions int `json:"submissions"`
	// AbnormalType is the type of the accepted apply-abnormal-refund call
	// (USER_BANK_CARD or MERCHANT_BANK_CARD); empty if none was accepted.
	AbnormalType string `json:"abnormal_type,omitempty"`
}

// CreateOrder registers a paid order of total fen, as WeChat Pay knows
// what was paid. An empty transactionID gets a generated one. Registering
// the same order again with the same total (and the same or an empty
// transaction id) is a no-op, so callers may retry.
//
// With a StateFile the order is saved before CreateOrder returns.
//
// Errors wrap ErrInvalidArgument (empty or over-long numbers, total <= 0),
// ErrOrderConflict or ErrStateFile.
func (s *Server) CreateOrder(outTradeNo, transactionID string, total int64) error {
	_, _, err := s.createOrder(outTradeNo, transactionID, total)
	return err
}

// createOrder is CreateOrder returning the order's transaction id and
// whether it was new.
func (s *Server) createOrder(outTradeNo, transactionID string, total int64) (string, bool, error) {
	txn, created, gen, err := s.addOrder(outTradeNo, transactionID, total)
	if err != nil {
		return "", false, err
	}
	// Also when it existed: a retry after a failed save must not return
	// before the order is durable.
	if err := s.sync(gen); err != nil {
		return "", false, err
	}
	return txn, created, nil
}

// addOrder registers the order in memory and returns the generation to
// sync.
func (s *Server) addOrder(outTradeNo, transactionID string, total int64) (string, bool, uint64, error) {
	if outTradeNo == "" || len(outTradeNo) > maxOrderNoLen || len(transactionID) > maxOrderNoLen {
		return "", false, 0, fmt.Errorf("%w: out_trade_no must be 1..%d bytes and transaction_id at most %d", ErrInvalidArgument, maxOrderNoLen, maxOrderNoLen)
	}
	if total <= 0 {
		return "", false, 0, fmt.Errorf("%w: total %d must be positive", ErrInvalidArgument, total)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[outTradeNo]; ok {
		if o.total != total || (transactionID != "" && transactionID != o.transactionID) {
			return "", false, 0, fmt.Errorf("%w: order %s has total %d and transaction_id %s", ErrOrderConflict, outTradeNo, o.total, o.transactionID)
		}
		return o.transactionID, false, s.gen, nil
	}
	now := s.cfg.Now()
	if transactionID == "" {
		s.seq++
		transactionID = fmt.Sprintf("4200%s%s%08d", now.In(beijing).Format("20060102"), randomDigits(8), s.seq%1e8)
	}
	if _, dup := s.byTxn[transactionID]; dup {
		return "", false, 0, fmt.Errorf("%w: transaction_id %s belongs to another order", ErrOrderConflict, transactionID)
	}
	o := &order{outTradeNo: outTradeNo, transactionID: transactionID, total: total, paidAt: now, openID: "o" + randomAlnum(27)}
	s.orders[outTradeNo] = o
	s.byTxn[transactionID] = o
	return transactionID, true, s.markLocked(), nil
}

// Refund returns what the sandbox holds about an accepted refund.
func (s *Server) Refund(outRefundNo string) (RefundRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[outRefundNo]
	if !ok {
		return RefundRecord{}, false
	}
	rec := RefundRecord{
		OutRefundNo: r.outRefundNo, RefundID: r.refundID, OutTradeNo: r.order.outTradeNo,
		TransactionID: r.order.transactionID, Status: r.status, Refund: r.amount, Total: r.order.total,
		Reason: r.reason, NotifyURL: r.notifyURL, CreateTime: r.createdAt, SuccessTime: r.succeededAt,
		BodyHash: r.bodyHash, AbnormalType: r.abnormalType,
	}
	if sub := s.submissions[outRefundNo]; sub != nil {
		rec.BodyHashes = slices.Clone(sub.hashes)
		rec.Submissions = sub.calls
	}
	return rec, true
}

// Submissions returns the distinct body hashes (hex SHA-256) submitted with
// a refund number, accepted or not, in order first seen.
func (s *Server) Submissions(outRefundNo string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.submissions[outRefundNo]; sub != nil {
		return slices.Clone(sub.hashes)
	}
	return nil
}

// Refunded returns the fen of an order held by refunds that are not CLOSED
// (PROCESSING, SUCCESS or ABNORMAL). It never exceeds the order total.
func (s *Server) Refunded(outTradeNo string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[outTradeNo]; ok {
		return o.held
	}
	return 0
}

// createRequest is the body of POST /v3/refund/domestic/refunds.
type createRequest struct {
	SubMchID      string          `json:"sub_mchid"`
	TransactionID string          `json:"transaction_id"`
	OutTradeNo    string          `json:"out_trade_no"`
	OutRefundNo   string          `json:"out_refund_no"`
	Reason        string          `json:"reason"`
	NotifyURL     string          `json:"notify_url"`
	FundsAccount  string          `json:"funds_account"`
	Amount        *amountRequest  `json:"amount"`
	GoodsDetail   json.RawMessage `json:"goods_detail"`
}

type amountRequest struct {
	Refund   *int64      `json:"refund"`
	Total    *int64      `json:"total"`
	Currency string      `json:"currency"`
	From     []fundsFrom `json:"from"`
}

type fundsFrom struct {
	Account string `json:"account"`
	Amount  int64  `json:"amount"`
}

// parseCreate decodes and checks a create body as far as it can be checked
// without the order.
func parseCreate(body []byte, subMchID string) (createRequest, *apiError) {
	var req createRequest
	if len(bytes.TrimSpace(body)) == 0 {
		return req, paramError("", "请求体为空")
	}
	var raw any
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return req, paramError("", "请求体不是合法的JSON")
	}
	if _, ok := raw.(map[string]any); !ok {
		return req, paramError("", "请求体须为JSON对象")
	}
	// APIv3 forbids null: absent fields must be omitted.
	if p, found := findNull(raw, ""); found {
		return req, paramError(p, "不允许使用null")
	}
	if err := json.Unmarshal(body, &req); err != nil {
		field := ""
		if te, ok := err.(*json.UnmarshalTypeError); ok {
			field = "/" + te.Field
		}
		return req, paramError(field, "字段类型错误")
	}
	if e := checkSubMchID(subMchID, req.SubMchID, "body"); e != nil {
		return req, e
	}
	switch {
	case req.TransactionID == "" && req.OutTradeNo == "":
		return req, paramError("/out_trade_no", "transaction_id和out_trade_no必须二选一")
	case len(req.TransactionID) > maxOrderNoLen:
		return req, paramError("/transaction_id", "长度超过32")
	case len(req.OutTradeNo) > maxOrderNoLen:
		return req, paramError("/out_trade_no", "长度超过32")
	case !outRefundNoRE.MatchString(req.OutRefundNo):
		return req, paramError("/out_refund_no", "须为1至64位数字、大小写字母或_-|*@")
	case len(req.Reason) > maxReasonLen:
		return req, paramError("/reason", "不可超过80个字节")
	case len(req.NotifyURL) > maxNotifyURLLen:
		return req, paramError("/notify_url", "长度超过256")
	case req.FundsAccount != "" && req.FundsAccount != "AVAILABLE" && req.FundsAccount != "UNSETTLED":
		return req, paramError("/funds_account", "取值错误")
	case req.Amount == nil:
		return req, paramError("/amount", "缺少必填参数")
	case req.Amount.Refund == nil || *req.Amount.Refund <= 0:
		return req, paramError("/amount/refund", "须为正整数(分)")
	case req.Amount.Total == nil || *req.Amount.Total <= 0:
		return req, paramError("/amount/total", "须为正整数(分)")
	case req.Amount.Currency != "CNY":
		return req, paramError("/amount/currency", "Currency code is invalid")
	}
	if req.NotifyURL != "" {
		u, err := url.Parse(req.NotifyURL)
		if err != nil || !httpURL(req.NotifyURL) || u.RawQuery != "" || u.Fragment != "" {
			return req, paramError("/notify_url", "须为不带参数的http(s)地址")
		}
	}
	if len(req.Amount.From) > 0 {
		var sum int64
		seen := map[string]bool{}
		for i, f := range req.Amount.From {
			field := "/amount/from/" + strconv.Itoa(i)
			if f.Account != "AVAILABLE" && f.Account != "UNAVAILABLE" {
				return req, paramError(field+"/account", "取值错误")
			}
			if seen[f.Account] {
				return req, paramError(field+"/account", "出资账户不可重复")
			}
			if f.Amount <= 0 {
				return req, paramError(field+"/amount", "须为正整数(分)")
			}
			seen[f.Account] = true
			sum += f.Amount
		}
		if sum != *req.Amount.Refund {
			return req, paramError("/amount/from", "出资金额之和须等于退款金额")
		}
	}
	return req, nil
}

// findNull returns the JSON Pointer of the first null in v, visiting object
// keys in sorted order so the answer is stable.
func findNull(v any, path string) (string, bool) {
	switch t := v.(type) {
	case nil:
		return path, true
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			if p, ok := findNull(t[k], path+"/"+k); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range t {
			if p, ok := findNull(e, path+"/"+strconv.Itoa(i)); ok {
				return p, true
			}
		}
	}
	return "", false
}

func bodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// handleCreate serves POST /v3/refund/domestic/refunds.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, true) {
		return
	}
	req, perr := parseCreate(body, s.cfg.SubMchID)
	if perr != nil {
		s.writeError(w, perr, sigOK)
		return
	}
	if !s.countCreate() {
		s.writeError(w, newError(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "频率限制,请降低频率后使用原参数重试"), sigOK)
		return
	}
	hash := bodyHash(body)
	tradeNo := s.recordSubmission(req, hash)
	f := s.takeAPIFault(OpCreate, tradeNo, req.OutRefundNo)
	mode, done := s.applyFaultBefore(w, f)
	if done {
		return
	}
	resp, aerr := s.create(req, hash)
	// Nothing is answered that a restart could forget.
	serr := s.syncAll()
	if f != nil && f.Kind == FaultResponseLost {
		s.loseResponse(w, f.Delay)
		return
	}
	if serr != nil {
		s.log.Error("save state before answering a create", "out_refund_no", req.OutRefundNo, "err", serr)
		s.writeError(w, errSystem(), mode)
		return
	}
	if aerr != nil {
		s.writeError(w, aerr, mode)
		return
	}
	s.writeJSON(w, http.StatusOK, resp, mode)
}

// handleQuery serves GET /v3/refund/domestic/refunds/{out_refund_no}.
func (s *Server) handleQuery(w http.ResponseWriter, r *http.Request, no string) {
	body, ok := s.readBody(w, r)
	if !ok || !s.authenticate(w, r, body, true) {
		return
	}
	if e := checkSubMchID(s.cfg.SubMchID, r.URL.Query().Get("sub_mchid"), "query"); e != nil {
		s.writeError(w, e, sigOK)
		return
	}
	if !outRefundNoRE.MatchString(no) {
		e := paramError("out_refund_no", "须为1至64位数字、大小写字母或_-|*@")
		e.Detail.Location = "uri_template"
		s.writeError(w, e, sigOK)
		return
	}
	s.mu.Lock()
	tradeNo := ""
	if rf, ok := s.refunds[no]; ok {
		tradeNo = rf.order.outTradeNo
	}
	s.mu.Unlock()
	f := s.takeAPIFault(OpQuery, tradeNo, no)
	mode, done := s.applyFaultBefore(w, f)
	if done {
		return
	}
	resp, found := s.snapshot(no)
	if err := s.syncAll(); err != nil {
		s.log.Error("save state before answering a query", "out_refund_no", no, "err", err)
		s.writeError(w, errSystem(), mode)
		return
	}
	if f != nil && f.Kind == FaultResponseLost {
		s.loseResponse(w, f.Delay)
		return
	}
	if !found {
		s.writeError(w, newError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "退款单不存在"), mode)
		return
	}
	s.writeJSON(w, http.StatusOK, resp, mode)
}

// applyFaultBefore acts on an API fault before the call is handled. It
// returns the signature mode for the response and whether the call has
// already been answered.
func (s *Server) applyFaultBefore(w http.ResponseWriter, f *Fault) (sigMode, bool) {
	if f == nil {
		return sigOK, false
	}
	s.log.Debug("injecting fault", "kind", f.Kind, "out_trade_no", f.OutTradeNo, "out_refund_no", f.OutRefundNo)
	switch f.Kind {
	case FaultDelay:
		if !s.wait(f.Delay) {
			s.writeError(w, newError(http.StatusServiceUnavailable, "SERVICE_UNAVAILABLE", "服务不可用"), sigOK)
			return sigOK, true
		}
	case FaultHTTP500:
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusInternalServerError)
		w.Write([]byte("<html><body><h1>500 Internal Server Error</h1></body></html>\n"))
		return sigOK, true
	case FaultSystemError:
		s.writeError(w, errSystem(), sigOK)
		return sigOK, true
	case FaultFrequencyLimited:
		s.writeError(w, newError(http.StatusTooManyRequests, "FREQUENCY_LIMITED", "频率限制"), sigOK)
		return sigOK, true
	case FaultNotEnough:
		s.writeError(w, newError(http.StatusForbidden, "NOT_ENOUGH", "基本账户余额不足，请充值后重新发起"), sigOK)
		return sigOK, true
	case FaultAccepted:
		s.writeSigned(w, http.StatusAccepted, "", nil, sigOK)
		return sigOK, true
	case FaultBadSignature:
		return sigBad, false
	case FaultProbeSignature:
		return sigProbe, false
	}
	return sigOK, false
}

// loseResponse answers a call whose effect has been applied as if the
// response were lost: 500 SYSTEM_ERROR, or with a delay, a held connection
// dropped without any response.
func (s *Server) loseResponse(w http.ResponseWriter, hold time.Duration) {
	if hold <= 0 {
		s.writeError(w, errSystem(), sigOK)
		return
	}
	s.wait(hold)
	// Aborts the connection without a response; net/http recovers it
	// quietly.
	panic(http.ErrAbortHandler)
}

// recordSubmission counts a create call and its body, and returns the
// order number the call refers to (resolved from transaction_id when
// needed) for fault matching.
func (s *Server) recordSubmission(req createRequest, hash string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub := s.submissions[req.OutRefundNo]
	if sub == nil {
		sub = &submission{}
		s.submissions[req.OutRefundNo] = sub
	}
	sub.calls++
	if !slices.Contains(sub.hashes, hash) {
		sub.hashes = append(sub.hashes, hash)
		s.markLocked() // a second body for one number is evidence to keep
	}
	if req.OutTradeNo != "" {
		return req.OutTradeNo
	}
	if o, ok := s.byTxn[req.TransactionID]; ok {
		return o.outTradeNo
	}
	return ""
}

// create applies a create request: idempotency, order checks, the
// refunded <= paid rule, then a new PROCESSING refund. It returns the
// response body.
func (s *Server) create(req createRequest, hash string) (refundResponse, *apiError) {
	s.mu.Lock()
	if r, ok := s.refunds[req.OutRefundNo]; ok {
		defer s.mu.Unlock()
		if r.bodyHash != hash {
			return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST",
				"请求内容和上次请求不一致,请核实后再试。原因主要是商户号不一致,或者商户订单号/商户退款单号已经被其他请求使用。")
		}
		return s.responseLocked(r), nil
	}
	o, aerr := s.findOrderLocked(req)
	if aerr != nil {
		s.mu.Unlock()
		return refundResponse{}, aerr
	}
	amount := *req.Amount.Refund
	switch {
	case *req.Amount.Total != o.total:
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "订单金额与原订单不一致,请核实后再试")
	case amount > o.total-o.held:
		// PARTNER.md §5: more than the order's remainder is a business-rule
		// refusal (v2: INVALID_REQUEST "refund_fee大于可退金额"); NOT_ENOUGH
		// means the merchant's balance is short (FaultNotEnough).
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "申请退款金额超过订单可退金额,请核实后再试")
	case len(o.refundNos) >= maxRefundsByOrder:
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "同一笔订单最多退款50次")
	}
	now := s.cfg.Now()
	// "交易时间超过一年的订单无法提交退款" (PROTOCOL.md §1.6: one year from
	// payment, paid time + 365 days). The code is not documented; a
	// business refusal of this request is INVALID_REQUEST.
	if now.After(o.paidAt.Add(refundWindow)) {
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusBadRequest, "INVALID_REQUEST", "订单已超过退款期限(支付成功后一年内可退款)")
	}
	// WeChat Pay: "同一笔订单多次退款的请求需相隔1分钟" (PROTOCOL.md §1.6,
	// doc 4012552567). The code and status of the refusal are not
	// documented; FREQUENCY_LIMITED is WeChat Pay's code for a refund
	// refused by a rate rule ("未受理", retry later with the same
	// parameters, §1.5), and 429 is the status WeChat Pay documents for
	// rate limiting (PARTNER.md §4), the same as FaultFrequencyLimited.
	if sp := s.cfg.MinRefundSpacing; sp > 0 && !o.lastAcceptedAt.IsZero() && now.Sub(o.lastAcceptedAt) < sp {
		s.mu.Unlock()
		return refundResponse{}, newError(http.StatusTooManyRequests, "FREQUENCY_LIMITED",
			fmt.Sprintf("频率限制,同一笔订单多次退款的请求需相隔1分钟(本沙箱要求相隔%s),请稍后使用原参数重试", sp))
	}
	s.seq++
	r := &refund{
		outRefundNo: req.OutRefundNo, order: o, amount: amount,
		refundID:  fmt.Sprintf("50300%s%s%010d", now.In(beijing).Format("20060102"), randomDigits(6), s.seq%1e10),
		reason:    req.Reason,
		notifyURL: req.NotifyURL, fundsAccount: req.FundsAccount, from: req.Amount.From,
		status: wechatpay.RefundProcessing, outcome: wechatpay.RefundSuccess,
		bodyHash: hash, createdAt: now, processingSince: now,
		channel: channelOriginal, receivedAccount: accountUserBalance,
	}
	if r.notifyURL == "" {
		r.notifyURL = s.cfg.NotifyURL
	}
	if fs := s.takeFaultsLocked(stageOutcome, "", o.outTradeNo, r.outRefundNo, false); len(fs) > 0 {
		r.outcome = fs[0].Outcome
	}
	o.held += amount
	o.refundNos = append(o.refundNos, r.outRefundNo)
	o.lastAcceptedAt = now
	s.refunds[r.outRefundNo] = r
	s.byRefundID[r.refundID] = r
	s.markLocked()
	resp := s.responseLocked(r) // the acceptance: PROCESSING
	s.log.Debug("refund accepted", "out_refund_no", r.outRefundNo, "out_trade_no", o.outTradeNo, "refund", amount, "outcome", r.outcome)
	s.processLocked(r) // unlocks
	return resp, nil
}

// processLocked schedules the outcome of a refund that has just become
// PROCESSING, then unlocks s.mu. With no processing delay the outcome is
// reached before it returns.
func (s *Server) processLocked(r *refund) {
	delay := s.cfg.scale(s.cfg.ProcessingDelay)
	if delay > 0 && !s.closed {
		no := r.outRefundNo
		s.timers[no] = time.AfterFunc(delay, func() { s.finalize(no) })
	}
	s.mu.Unlock()
	if delay <= 0 {
		s.finalize(r.outRefundNo)
	}
}

// findOrderLocked resolves the request's order by transaction_id or
// out_trade_no; both given must agree.
func (s *Server) findOrderLocked(req createRequest) (*order, *apiError) {
	var o *order
	if req.TransactionID != "" {
		o = s.byTxn[req.TransactionID]
	} else {
		o = s.orders[req.OutTradeNo]
	}
	if o == nil {
		return nil, newError(http.StatusNotFound, "RESOURCE_NOT_EXISTS", "订单不存在")
	}
	if req.TransactionID != "" && req.OutTradeNo != "" && req.OutTradeNo != o.outTradeNo {
		return nil, newError(http.StatusBadRequest, "INVALID_REQUEST", "transaction_id与out_trade_no不匹配")
	}
	return o, nil
}

// finalize moves a PROCESSING refund to its outcome, saves the books, then
// starts its notifications, so nothing is notified that a restart could
// forget.
func (s *Server) finalize(no string) {
	s.mu.Lock()
	r, ok := s.refunds[no]
	delete(s.timers, no)
	if !ok || s.closed || r.status != wechatpay.RefundProcessing {
		s.mu.Unlock()
		return
	}
	r.status = r.outcome
	switch r.status {
	case wechatpay.RefundSuccess:
		r.succeededAt = s.cfg.Now()
	case wechatpay.RefundClosed:
		r.order.held -= r.amount // the money never left
	}
	status := r.status
	jobs := s.notificationsLocked(r)
	r.pendingNotify += originals(jobs)
	gen := s.markLocked()
	s.mu.Unlock()
	if err := s.sync(gen); err != nil {
		// Memory still holds the outcome; it is saved with the next change,
		// or decided again after a restart.
		s.log.Error("save state after a refund outcome", "out_refund_no", no, "err", err)
	}
	s.mu.Lock()
	s.startLocked(jobs)
	s.mu.Unlock()
	s.log.Debug("refund final", "out_refund_no", no, "status", status, "notifications", len(jobs))
}

// startLocked starts delivering jobs unless the server is closed (their
// refunds then stay pending and are notified after a reload). s.mu must be
// held.
func (s *Server) startLocked(jobs []notifyJob) {
	if s.closed {
		return
	}
	for _, j := range jobs {
		s.wg.Add(1) // under s.mu with closed false, so Close waits for it
		go s.deliver(j)
	}
}

// snapshot returns the query response for a refund.
func (s *Server) snapshot(no string) (refundResponse, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.refunds[no]
	if !ok {
		return refundResponse{}, false
	}
	return s.responseLocked(r), true
}

// refundResponse is the Refund object of the create and query responses
// (PROTOCOL.md §1.3). Slices are never nil: APIv3 sends no nulls.
type refundResponse struct {
	RefundID            string            `json:"refund_id"`
	OutRefundNo         string            `json:"out_refund_no"`
	TransactionID       string            `json:"transaction_id"`
	OutTradeNo          string            `json:"out_trade_no"`
	Channel             string            `json:"channel"`
	UserReceivedAccount string            `json:"user_received_account"`
	SuccessTime         string            `json:"success_time,omitempty"`
	CreateTime          string            `json:"create_time"`
	Status              string            `json:"status"`
	FundsAccount        string            `json:"funds_account"`
	Amount              amountResponse    `json:"amount"`
	PromotionDetail     []json.RawMessage `json:"promotion_detail"`
}

type amountResponse struct {
	Total            int64       `json:"total"`
	Refund           int64       `json:"refund"`
	From             []fundsFrom `json:"from"`
	PayerTotal       int64       `json:"payer_total"`
	PayerRefund      int64       `json:"payer_refund"`
	SettlementRefund int64       `json:"settlement_refund"`
	SettlementTotal  int64       `json:"settlement_total"`
	DiscountRefund   int64       `json:"discount_refund"`
	Currency         string      `json:"currency"`
	RefundFee        int64       `json:"refund_fee"`
}

func (s *Server) responseLocked(r *refund) refundResponse {
	funds := r.fundsAccount
	if funds == "" {
		funds = "UNSETTLED"
	}
	from := r.from
	if from == nil {
		from = []fundsFrom{}
	}
	resp := refundResponse{
		RefundID: r.refundID, OutRefundNo: r.outRefundNo, TransactionID: r.order.transactionID, OutTradeNo: r.order.outTradeNo,
		Channel: r.channel, UserReceivedAccount: r.receivedAccount,
		CreateTime: rfc3339(r.createdAt), Status: r.status, FundsAccount: funds,
		Amount: amountResponse{
			Total: r.order.total, Refund: r.amount, From: from,
			PayerTotal: r.order.total, PayerRefund: r.amount, SettlementRefund: r.amount, SettlementTotal: r.order.total,
			Currency: "CNY",
		},
		PromotionDetail: []json.RawMessage{},
	}
	if r.status == wechatpay.RefundSuccess {
		resp.SuccessTime = rfc3339(r.succeededAt)
	}
	return resp
}

// rfc3339 formats t as WeChat Pay does: Beijing time, "+08:00".
func rfc3339(t time.Time) string { return t.In(beijing).Format(time.RFC3339) }
