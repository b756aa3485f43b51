package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// operations maps each operationId of the OpenAPI document to the method
// of Client that calls it; TestOperationsCovered checks both directions.
var operations = map[string]string{
	"healthz":             "Healthz",
	"readyz":              "Ready",
	"metrics":             "Metrics",
	"openapi":             "OpenAPI",
	"summary":             "Summary",
	"totals":              "Totals",
	"whoami":              "Whoami",
	"registerReservation": "RegisterReservation",
	"getReservation":      "GetReservation",
	"getTimeline":         "Timeline",
	"requestRefund":       "RequestRefund",
	"getRefund":           "GetRefund",
	"resubmitRefund":      "ResubmitRefund",
	"abandonRefund":       "AbandonRefund",
	"reconcileRefund":     "ReconcileRefund",
	"resolveRefund":       "ResolveRefund",
	"applyAbnormalRefund": "ApplyAbnormalRefund",
	"approveRefund":       "ApproveRefund",
	"rejectRefund":        "RejectRefund",
	"listRefunds":         "ListRefunds",
	"listReservations":    "ListReservations",
	"search":              "Search",
	"getEvents":           "Events",
	"getWebhooks":         "Webhooks",
	"getParked":           "ParkedEvents",
	"replayAllParked":     "ReplayAllParked",
	"replayParked":        "ReplayParked",
	"notifyStats":         "NotifyStats",
	"notifyQuarantine":    "NotifyQuarantine",
	"auditHead":           "AuditHead",
	"adminBackup":         "Backup",
	"adminArchiveFile":    "ArchiveFile",
	"adminCredentials":    "Credentials",
	"reloadCredentials":   "ReloadCredentials",
}

// notForClients are operations of the document a client never calls, and
// why.
var notForClients = map[string]string{
	"wechatpayRefundNotification":          "WeChat Pay's own callback, signed with WeChat Pay's key",
	"wechatpayRefundNotificationV2":        "WeChat Pay's own callback (API v2), signed with the merchant's v2 key",
	"wechatpayAccountRefundNotification":   "WeChat Pay's own callback for one account, signed with WeChat Pay's key",
	"wechatpayAccountRefundNotificationV2": "WeChat Pay's own callback (API v2) for one account, signed with the account's v2 key",
}

// Healthz checks that the process answers (GET /healthz). It is not
// retried: a probe wants the answer of now.
func (c *Client) Healthz(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/healthz", retry: retryNever, ok: []int{http.StatusOK}})
	return err
}

// Ready checks that the service takes work (GET /readyz): nil, or an
// *Error with CodeUnavailable and the server's reason. It is not retried.
func (c *Client) Ready(ctx context.Context) error {
	var out struct {
		Status string `json:"status"`
		Reason string `json:"reason"`
	}
	status, err := c.do(ctx, call{method: http.MethodGet, path: "/readyz", retry: retryNever,
		ok: []int{http.StatusOK, http.StatusServiceUnavailable}, out: &out})
	if err != nil {
		return err
	}
	if status != http.StatusOK {
		return &Error{Status: status, Code: CodeUnavailable, Message: out.Reason}
	}
	return nil
}

// Metrics returns the Prometheus exposition of GET /metrics.
func (c *Client) Metrics(ctx context.Context) ([]byte, error) {
	return c.bytes(ctx, "/metrics")
}

// OpenAPI returns the server's OpenAPI document (GET /v1/openapi.json).
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	return c.bytes(ctx, "/v1/openapi.json")
}

func (c *Client) bytes(ctx context.Context, path string) ([]byte, error) {
	var b []byte
	_, err := c.do(ctx, call{method: http.MethodGet, path: path, retry: retrySafe, ok: []int{http.StatusOK},
		raw: func(resp *http.Response) error {
			defer resp.Body.Close()
			var err error
			if b, err = io.ReadAll(resp.Body); err != nil {
				return &netError{err: err}
			}
			return nil
		}})
	return b, err
}

// Summary returns the operator's overview (GET /v1/summary).
func (c *Client) Summary(ctx context.Context) (*Summary, error) {
	var out Summary
	if err := c.get(ctx, "/v1/summary", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Totals returns money in flight, refunded and released by merchant and
// state for the refunds requested in [from, to) (GET /v1/totals). A zero
// bound leaves that side open; bounds fall on whole hours (UTC, or an
// offset of whole hours such as Beijing time's). merchant, if not empty,
// narrows it to one merchant the token sees.
func (c *Client) Totals(ctx context.Context, from, to time.Time, merchant string) (*Totals, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.Format(time.RFC3339))
	}
	if merchant != "" {
		q.Set("merchant", merchant)
	}
	var out Totals
	if err := c.get(ctx, "/v1/totals", q, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Whoami says who the client's token is and what its role may do
// (GET /v1/whoami).
func (c *Client) Whoami(ctx context.Context) (*Identity, error) {
	var out Identity
	if err := c.get(ctx, "/v1/whoami", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RegisterReservation registers a payment (POST /v1/reservations).
// created is false when the same registration was already there: a
// replay, or an earlier attempt of this call whose answer was lost. It is
// retried: the reservation id makes a repeat the same registration.
func (c *Client) RegisterReservation(ctx context.Context, r Registration) (res *Reservation, created bool, err error) {
	var out Reservation
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reservations", body: r, retry: retrySafe,
		ok: []int{http.StatusCreated, http.StatusOK}, out: &out})
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// GetReservation returns a reservation and its refunds.
func (c *Client) GetReservation(ctx context.Context, id string) (*Reservation, error) {
	var out Reservation
	if err := c.get(ctx, "/v1/reservations/"+seg(id), nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Timeline returns a reservation's journaled events
// (GET /v1/reservations/{id}/events).
func (c *Client) Timeline(ctx context.Context, id string) (*Timeline, error) {
	var out Timeline
	if err := c.get(ctx, "/v1/reservations/"+seg(id)+"/events", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RequestRefund asks for a refund (POST /v1/reservations/{id}/refunds).
// Every attempt of this call carries one idempotency key (r's, or one made
// here), so a retry after a lost answer answers the same refund rather than
// making a second one. With r.Wait the answer may already be final.
func (c *Client) RequestRefund(ctx context.Context, reservationID string, r RefundRequest) (*Refund, error) {
	key := r.IdempotencyKey
	if key == "" {
		key = NewIdempotencyKey()
	}
	var out Refund
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reservations/" + seg(reservationID) + "/refunds",
		query: waitQuery(nil, r.Wait), wait: r.Wait, body: r, header: http.Header{"Idempotency-Key": {key}},
		retry: retrySafe, ok: []int{http.StatusAccepted, http.StatusOK}, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// GetRefund returns one refund; with wait > 0 the server holds the answer
// up to that long for the refund to become terminal.
func (c *Client) GetRefund(ctx context.Context, reservationID, refundNo string, wait time.Duration) (*Refund, error) {
	var out Refund
	if err := c.get(ctx, "/v1/reservations/"+seg(reservationID)+"/refunds/"+seg(refundNo), waitQuery(nil, wait), wait, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ResubmitRefund sends a REJECTED refund to WeChat Pay again under its
// refund number. Operator actions are not retried: on a network error, read
// the refund (GetRefund) to learn whether it was taken.
func (c *Client) ResubmitRefund(ctx context.Context, reservationID, refundNo, reason string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "resubmit", reason)
}

// AbandonRefund releases a REJECTED refund's amount, only after a fresh
// "not found" from WeChat Pay. Not retried.
func (c *Client) AbandonRefund(ctx context.Context, reservationID, refundNo, reason string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "abandon", reason)
}

// ReconcileRefund asks WeChat Pay about a refund now. Not retried.
func (c *Client) ReconcileRefund(ctx context.Context, reservationID, refundNo string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "reconcile", "")
}

// ResolveRefund settles an ABNORMAL refund resolved outside refundd. Not
// retried.
func (c *Client) ResolveRefund(ctx context.Context, reservationID, refundNo, reason string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "resolve", reason)
}

// ApplyAbnormalRefund asks WeChat Pay to pay an ABNORMAL refund out to
// the user's bank card or the merchant's bank account (WeChat's
// apply-abnormal-refund); the refund is PROCESSING again and follows
// WeChat's answer. The server encrypts the card and the name for WeChat
// Pay before journaling them (an *Error with CodeEncryptionUnavailable when
// it holds no key for that). Applying again answers the current state. Not
// retried: on a network error, read the refund to learn whether it was
// taken.
func (c *Client) ApplyAbnormalRefund(ctx context.Context, reservationID, refundNo string, to AbnormalPayout) (*Refund, error) {
	var out Refund
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reservations/" + seg(reservationID) + "/refunds/" + seg(refundNo) + "/apply-abnormal",
		body: to, retry: retryNever, ok: []int{http.StatusOK}, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ApproveRefund approves a refund held for four-eyes approval
// (PENDING_APPROVAL); its submission to WeChat Pay follows. The token needs
// the approve permission and must not be the requester's (an *Error with
// CodeSelfApproval). Approving again answers the current state. Not
// retried: on a network error, read the refund to learn whether it was
// taken.
func (c *Client) ApproveRefund(ctx context.Context, reservationID, refundNo string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "approve", "")
}

// RejectRefund refuses a refund held for approval: FAILED, its amount
// released. A reason is required. Not retried.
func (c *Client) RejectRefund(ctx context.Context, reservationID, refundNo, reason string) (*Refund, error) {
	return c.operate(ctx, reservationID, refundNo, "reject", reason)
}

func (c *Client) operate(ctx context.Context, id, no, action, reason string) (*Refund, error) {
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
	var out Refund
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reservations/" + seg(id) + "/refunds/" + seg(no) + "/" + action,
		body: body, retry: retryNever, ok: []int{http.StatusOK}, out: &out})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAttention lists refunds needing an operator (GET
// /v1/refunds?attention=KIND).
func (c *Client) ListAttention(ctx context.Context, q AttentionQuery) (*AttentionPage, error) {
	v := url.Values{"attention": {q.State}}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Merchant != "" {
		v.Set("merchant", q.Merchant)
	}
	var out AttentionPage
	if err := c.get(ctx, "/v1/refunds", v, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListRefunds reads one page of refunds, filtered (GET /v1/refunds):
// pass the page's NextCursor as the next query's Cursor, with the same
// filters, until it is empty. A page may be short, even empty, with a
// NextCursor: the server bounds the index rows one page reads.
func (c *Client) ListRefunds(ctx context.Context, q ListQuery) (*RefundPage, error) {
	var out RefundPage
	if err := c.get(ctx, "/v1/refunds", q.values(true), 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListReservations reads one page of reservations, filtered (GET
// /v1/reservations), paged as ListRefunds.
func (c *Client) ListReservations(ctx context.Context, q ListQuery) (*ReservationPage, error) {
	var out ReservationPage
	if err := c.get(ctx, "/v1/reservations", q.values(false), 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// values are q's query parameters; refunds says which list.
func (q ListQuery) values(refunds bool) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	setTime := func(k string, t time.Time) {
		if !t.IsZero() {
			v.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	set("out_trade_no", q.OutTradeNo)
	set("transaction_id", q.TransactionID)
	set("user_id", q.UserID)
	set("merchant", strings.Join(q.Merchants, ","))
	at := "registered"
	if refunds {
		at = "requested"
		set("refund_no", q.RefundNo)
		set("refund_id", q.ProviderRefundID)
		set("state", strings.Join(q.States, ","))
		set("reason_code", q.ReasonCode)
		if v.Get("state") != "" {
			// A lone state of an attention kind would be the attention list.
			v.Set("order", "desc")
		}
	} else {
		set("status", strings.Join(q.States, ","))
		set("refund_state", strings.Join(q.RefundStates, ","))
	}
	setTime(at+"_from", q.From)
	setTime(at+"_to", q.To)
	setTime("updated_from", q.UpdatedFrom)
	setTime("updated_to", q.UpdatedTo)
	if q.AmountMin > 0 {
		v.Set("amount_min", strconv.FormatInt(q.AmountMin, 10))
	}
	if q.AmountMax > 0 {
		v.Set("amount_max", strconv.FormatInt(q.AmountMax, 10))
	}
	if q.Oldest {
		v.Set("order", "asc")
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	set("cursor", q.Cursor)
	return v
}

// Search finds the reservations and refunds an id names: a refund number,
// out_trade_no, user id, transaction_id or WeChat Pay refund_id
// (GET /v1/search). limit is 1..100; zero means the server's 20.
func (c *Client) Search(ctx context.Context, id string, limit int) (*SearchResult, error) {
	v := url.Values{"q": {id}}
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	var out SearchResult
	if err := c.get(ctx, "/v1/search", v, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Events reads one page of the event feed (GET /v1/events); Consumer
// follows it.
func (c *Client) Events(ctx context.Context, q EventsQuery) (*EventsPage, error) {
	v := url.Values{}
	if q.After != "" {
		v.Set("after", q.After)
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if len(q.Types) > 0 {
		v.Set("types", strings.Join(q.Types, ","))
	}
	var out EventsPage
	if err := c.get(ctx, "/v1/events", waitQuery(v, q.Wait), q.Wait, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Webhooks returns every webhook endpoint's delivery state.
func (c *Client) Webhooks(ctx context.Context) ([]WebhookEndpoint, error) {
	var out struct {
		Endpoints []WebhookEndpoint `json:"endpoints"`
	}
	err := c.get(ctx, "/v1/webhooks", nil, 0, &out)
	return out.Endpoints, err
}

// ParkedEvents lists the events parked at one endpoint.
func (c *Client) ParkedEvents(ctx context.Context, endpoint string) ([]ParkedEvent, error) {
	var out struct {
		Parked []ParkedEvent `json:"parked"`
	}
	err := c.get(ctx, "/v1/webhooks/"+seg(endpoint)+"/parked", nil, 0, &out)
	return out.Parked, err
}

// ReplayParked re-queues one parked event (and its reservation's others).
// Not retried: a replay after one that landed re-sends the events.
func (c *Client) ReplayParked(ctx context.Context, endpoint, eventID string) error {
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/webhooks/" + seg(endpoint) + "/parked/" + seg(eventID) + "/replay",
		retry: retryNever, ok: []int{http.StatusAccepted}})
	return err
}

// ReplayAllParked re-queues every event parked at the endpoint and returns
// how many. Not retried.
func (c *Client) ReplayAllParked(ctx context.Context, endpoint string) (int, error) {
	var out struct {
		Replaying int `json:"replaying"`
	}
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/webhooks/" + seg(endpoint) + "/parked/replay",
		retry: retryNever, ok: []int{http.StatusAccepted}, out: &out})
	return out.Replaying, err
}

// NotifyStats returns WeChat Pay notification counts by outcome.
func (c *Client) NotifyStats(ctx context.Context) (*NotifyStats, error) {
	var out NotifyStats
	if err := c.get(ctx, "/v1/notify/stats", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// NotifyQuarantine lists the newest refused notifications kept for
// operators.
func (c *Client) NotifyQuarantine(ctx context.Context) ([]QuarantineEntry, error) {
	var out struct {
		Entries []QuarantineEntry `json:"entries"`
	}
	err := c.get(ctx, "/v1/notify/quarantine", nil, 0, &out)
	return out.Entries, err
}

// AuditHead returns the journal's chain head and last checkpoint.
func (c *Client) AuditHead(ctx context.Context) (*AuditHead, error) {
	var out AuditHead
	if err := c.get(ctx, "/v1/audit/head", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Credentials lists the WeChat Pay keys and certificates refundd holds per
// account, and the certificate download history (GET
// /v1/admin/credentials; operators only).
func (c *Client) Credentials(ctx context.Context) (*Credentials, error) {
	var out Credentials
	if err := c.get(ctx, "/v1/admin/credentials", nil, 0, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ReloadCredentials rereads every WeChat Pay credential file and swaps
// them in if all are good (POST /v1/admin/credentials/reload; operators
// only), answering the credentials then held. A bad file is
// CodeCredentialsInvalid, a change needing a restart CodeRestartRequired;
// either way the running credentials stay. Not retried.
func (c *Client) ReloadCredentials(ctx context.Context) (*Credentials, error) {
	var out Credentials
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/admin/credentials/reload", retry: retryNever,
		ok: []int{http.StatusOK}, out: &out}); err != nil {
		return nil, err
	}
	return &out, nil
}

// Backup streams a consistent copy of the journal (GET /v1/admin/backup);
// the caller reads and closes it. Retries stop once the body has started:
// a backup cut short is an error of the read, not retried.
func (c *Client) Backup(ctx context.Context) (io.ReadCloser, error) {
	var body io.ReadCloser
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/admin/backup", retry: retrySafe, ok: []int{http.StatusOK},
		raw: func(resp *http.Response) error { body = resp.Body; return nil }})
	return body, err
}

// ArchiveFile streams one segment or manifest of the journal's archive (GET
// /v1/admin/archive/{file}), by the name the journal records for it
// (journal.AppliedSegment); an operator token is needed. The caller closes
// the body.
func (c *Client) ArchiveFile(ctx context.Context, name string) (io.ReadCloser, error) {
	var body io.ReadCloser
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/admin/archive/" + url.PathEscape(name), retry: retrySafe, ok: []int{http.StatusOK},
		raw: func(resp *http.Response) error { body = resp.Body; return nil }})
	return body, err
}

// get is a retried GET decoding a JSON answer of 200.
func (c *Client) get(ctx context.Context, path string, q url.Values, wait time.Duration, out any) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: path, query: q, wait: wait, retry: retrySafe,
		ok: []int{http.StatusOK}, out: out})
	return err
}

func waitQuery(v url.Values, wait time.Duration) url.Values {
	if wait <= 0 {
		return v
	}
	if v == nil {
		v = url.Values{}
	}
	v.Set("wait", wait.String())
	return v
}
