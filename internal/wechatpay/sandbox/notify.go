package sandbox

import (
	"bytes"
	"encoding/xml"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// RetrySchedule returns WeChat Pay's notification retry schedule
// (PROTOCOL.md §3.6), unscaled: the waits before each retry after a failed
// attempt. A notification is tried at once and then after each of these,
// so at most 16 times over 24h04m.
func RetrySchedule() []time.Duration {
	return []time.Duration{
		15 * time.Second, 15 * time.Second, 30 * time.Second, 3 * time.Minute, 10 * time.Minute,
		20 * time.Minute, 30 * time.Minute, 30 * time.Minute, 30 * time.Minute, 60 * time.Minute,
		3 * time.Hour, 3 * time.Hour, 3 * time.Hour, 6 * time.Hour, 6 * time.Hour,
	}
}

// Notification channels (Delivery.Channel).
const (
	ChannelV3 = "v3"
	ChannelV2 = "v2"
)

// Delivery is one attempt to deliver a notification.
type Delivery struct {
	Channel        string    `json:"channel"`         // ChannelV3 or ChannelV2
	OutRefundNo    string    `json:"out_refund_no"`   //
	NotificationID string    `json:"notification_id"` // v3 envelope id; empty for v2
	RefundStatus   string    `json:"refund_status"`   // SUCCESS, CLOSED or ABNORMAL
	URL            string    `json:"url"`             //
	Copy           int       `json:"copy"`            // 0 for the original, 1.. for injected duplicates
	Attempt        int       `json:"attempt"`         // 1 for the first try of this copy
	Signature      string    `json:"signature"`       // v3: "ok", "probe" or "bad"; v2: "none"
	At             time.Time `json:"at"`              // real time the attempt started (time.Now, not Config.Now)
	HTTPStatus     int       `json:"http_status"`     // 0 when no response arrived
	Err            string    `json:"err,omitempty"`   // transport error
	Acked          bool      `json:"acked"`           // v3: 2xx; v2: 200 with return_code SUCCESS
	Last           bool      `json:"last"`            // no further attempt of this copy follows (acked or schedule exhausted)
}

// Deliveries returns the notification attempts made for a refund, in the
// order they completed.
func (s *Server) Deliveries(outRefundNo string) []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries[outRefundNo])
}

// notifyJob is one copy of one notification, retried on its own.
type notifyJob struct {
	channel string
	no      string
	id      string // v3 envelope id
	status  string // refund status notified
	url     string
	body    []byte
	hold    time.Duration // wait before the first attempt
	copy    int
	first   sigMode // signature of the first attempt (v3)
}

// originals counts the original copies among jobs: the notifications a
// refund waits on (injected duplicates are extra).
func originals(jobs []notifyJob) int {
	n := 0
	for _, j := range jobs {
		if j.copy == 0 {
			n++
		}
	}
	return n
}

// notificationsLocked builds the notifications of a refund that has just
// reached its final state, applying notification faults. s.mu must be held.
func (s *Server) notificationsLocked(r *refund) []notifyJob {
	var late, dup *Fault
	first := sigOK
	for _, f := range s.takeFaultsLocked(stageNotify, "", r.order.outTradeNo, r.outRefundNo, true) {
		switch f.Kind {
		case FaultNotifyDrop:
			s.log.Debug("notification dropped by fault", "out_refund_no", r.outRefundNo)
			return nil
		case FaultNotifyLate:
			late = &f
		case FaultNotifyDuplicate:
			dup = &f
		case FaultNotifyProbe:
			first = sigProbe
		case FaultNotifyBadSignature:
			if first == sigOK {
				first = sigBad
			}
		}
	}
	var originals []notifyJob
	if r.notifyURL != "" {
		if j, ok := s.v3JobLocked(r); ok {
			j.first = first
			originals = append(originals, j)
		}
	}
	if s.cfg.NotifyURLV2 != "" {
		if j, ok := s.v2JobLocked(r); ok {
			originals = append(originals, j)
		}
	}
	var jobs []notifyJob
	for _, j := range originals {
		if late != nil {
			j.hold = late.Delay
		}
		jobs = append(jobs, j)
		if dup != nil {
			for c := 1; c <= dup.Repeat; c++ {
				d := j
				d.copy, d.hold, d.first = c, j.hold+dup.Delay, sigOK
				jobs = append(jobs, d)
			}
		}
	}
	return jobs
}

// v3JobLocked encrypts the refund resource into a v3 notification body.
func (s *Server) v3JobLocked(r *refund) (notifyJob, bool) {
	res := wechatpay.RefundResource{
		MchID: s.cfg.MchID, SubMchID: s.cfg.SubMchID, TransactionID: r.order.transactionID, OutTradeNo: r.order.outTradeNo,
		RefundID: r.refundID, OutRefundNo: r.outRefundNo, RefundStatus: r.status,
		UserReceivedAccount: r.receivedAccount,
		Amount:              wechatpay.RefundAmount{Total: r.order.total, Refund: r.amount, PayerTotal: r.order.total, PayerRefund: r.amount},
	}
	if s.cfg.SubMchID != "" {
		// Partner resources name the provider as sp_mchid (PARTNER.md §1.5).
		res.MchID, res.SpMchID = "", s.cfg.MchID
	}
	if r.status == wechatpay.RefundSuccess {
		res.SuccessTime = rfc3339(r.succeededAt)
	}
	n := wechatpay.Notification{ID: newUUID(), CreateTime: rfc3339(s.cfg.Now())}
	// Real captures carry associated_data "refund" (PROTOCOL.md §3.2).
	n.Resource.AssociatedData = "refund"
	body, err := wechatpay.BuildRefundNotification(s.keys.apiV3Key(s.cfg.Now()), n, res)
	if err != nil {
		s.log.Error("build v3 notification", "out_refund_no", r.outRefundNo, "err", err)
		return notifyJob{}, false
	}
	return notifyJob{channel: ChannelV3, no: r.outRefundNo, id: n.ID, status: r.status, url: r.notifyURL, body: body}, true
}

// v2Status maps a v3 refund status to the APIv2 one.
func v2Status(status string) string {
	switch status {
	case wechatpay.RefundClosed:
		return wechatpay.V2RefundClose
	case wechatpay.RefundAbnormal:
		return wechatpay.V2RefundChange
	}
	return wechatpay.V2RefundSuccess
}

// v2JobLocked builds the APIv2 XML notification of a refund.
func (s *Server) v2JobLocked(r *refund) (notifyJob, bool) {
	account := "REFUND_SOURCE_UNSETTLED_FUNDS"
	if r.fundsAccount == "AVAILABLE" {
		account = "REFUND_SOURCE_RECHARGE_FUNDS"
	}
	info := wechatpay.V2RefundInfo{
		TransactionID: r.order.transactionID, OutTradeNo: r.order.outTradeNo, RefundID: r.refundID, OutRefundNo: r.outRefundNo,
		TotalFee: r.order.total, SettlementTotalFee: r.order.total, RefundFee: r.amount, SettlementRefundFee: r.amount,
		RefundStatus: v2Status(r.status), RefundRecvAccount: r.receivedAccount, RefundAccount: account, RefundRequestSource: "API",
	}
	if r.status == wechatpay.RefundSuccess {
		info.SuccessTime = r.succeededAt.In(beijing).Format(time.DateTime)
	}
	env := wechatpay.V2Envelope{AppID: s.cfg.AppID, MchID: s.cfg.MchID, SubMchID: s.cfg.SubMchID, NonceStr: randomAlnum(32)}
	body, err := wechatpay.BuildRefundNotificationV2(s.cfg.APIv2Key, env, info)
	if err != nil {
		s.log.Error("build v2 notification", "out_refund_no", r.outRefundNo, "err", err)
		return notifyJob{}, false
	}
	return notifyJob{channel: ChannelV2, no: r.outRefundNo, status: r.status, url: s.cfg.NotifyURLV2, body: body}, true
}

// deliver runs one notification copy: an optional hold, then attempts
// until one is acknowledged or the schedule is exhausted. It stops at
// Close.
func (s *Server) deliver(j notifyJob) {
	defer s.wg.Done()
	if !s.wait(j.hold) {
		return
	}
	schedule := RetrySchedule()
	for attempt := 1; ; attempt++ {
		mode := sigOK
		if attempt == 1 {
			mode = j.first
		}
		d := s.attempt(j, attempt, mode)
		if s.ctx.Err() != nil {
			return // closed mid-attempt: not a real failure, record nothing
		}
		d.Last = d.Acked || attempt > len(schedule)
		s.mu.Lock()
		s.deliveries[j.no] = append(s.deliveries[j.no], d)
		if r := s.refunds[j.no]; d.Last && j.copy == 0 && r != nil && r.pendingNotify > 0 {
			r.pendingNotify--
			if r.pendingNotify == 0 {
				// Saved with the next change or at Close: until then a
				// restart notifies once more, which WeChat Pay may do too.
				s.markLocked()
			}
		}
		s.mu.Unlock()
		s.log.Debug("notification attempt", "channel", j.channel, "out_refund_no", j.no, "copy", j.copy,
			"attempt", attempt, "http_status", d.HTTPStatus, "acked", d.Acked, "err", d.Err)
		if d.Last {
			if !d.Acked {
				s.log.Warn("notification retries exhausted", "channel", j.channel, "out_refund_no", j.no, "url", j.url)
			}
			return
		}
		if !s.wait(s.cfg.scale(schedule[attempt-1])) {
			return
		}
	}
}

// attempt posts the notification once.
func (s *Server) attempt(j notifyJob, attempt int, mode sigMode) Delivery {
	d := Delivery{
		Channel: j.channel, OutRefundNo: j.no, NotificationID: j.id, RefundStatus: j.status, URL: j.url,
		Copy: j.copy, Attempt: attempt, Signature: mode.String(), At: time.Now(),
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, j.url, bytes.NewReader(j.body))
	if err != nil {
		d.Err = err.Error()
		return d
	}
	req.Header.Set("User-Agent", "Mozilla/4.0")
	req.Header.Set("Request-ID", randomHex(16))
	if j.channel == ChannelV3 {
		req.Header.Set("Content-Type", "application/json")
		h, err := s.sign(j.body, mode)
		if err != nil {
			d.Err = "sign: " + err.Error()
			return d
		}
		h.Set(req.Header) // includes Wechatpay-Signature-Type
	} else {
		d.Signature = sigNone.String()
		req.Header.Set("Content-Type", "text/xml")
	}
	resp, err := s.cfg.HTTPClient.Do(req)
	if err != nil {
		d.Err = err.Error()
		return d
	}
	defer resp.Body.Close()
	ack, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	d.HTTPStatus = resp.StatusCode
	if j.channel == ChannelV3 {
		d.Acked = resp.StatusCode >= 200 && resp.StatusCode < 300
	} else {
		d.Acked = resp.StatusCode == http.StatusOK && v2Acked(ack)
	}
	return d
}

// v2Acked reports whether an APIv2 notification answer says SUCCESS.
func v2Acked(body []byte) bool {
	var a struct {
		XMLName    xml.Name `xml:"xml"`
		ReturnCode string   `xml:"return_code"`
	}
	return xml.Unmarshal(body, &a) == nil && a.ReturnCode == "SUCCESS"
}
