package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
)

// NotifyConfig enables the WeChat Pay notification endpoints.
type NotifyConfig struct {
	MchID    string              // notifications for another merchant are refused
	Verifier *wechatpay.Verifier // required for v3
	APIv3Key []byte              // required for v3
	APIv2Key []byte              // optional: enables the v2 endpoint
	// Quarantine keeps the raw bytes of notifications that were not
	// applied; nil keeps nothing (tests only).
	Quarantine *quarantine.Store
	// Deadline bounds the work for one notification, inside WeChat's 5 s;
	// zero means 4 s.
	Deadline time.Duration
}

// notifyOutcome names what happened to one notification; it is counted
// and logged under that name.
type notifyOutcome string

const (
	nApplied   notifyOutcome = "applied"   // journaled a change (or a conflict for operators)
	nDuplicate notifyOutcome = "duplicate" // nothing new: acknowledged
	nHint      notifyOutcome = "hint"      // journaled a provider query (v2, or an unusable status)
	nProbe     notifyOutcome = "probe"     // WeChat's signature probe: refused, not alerted on
	nRejected  notifyOutcome = "rejected"  // failed verification or decryption, or malformed
	nUnknown   notifyOutcome = "unknown_refund"
	nMismatch  notifyOutcome = "mismatch"
	nError     notifyOutcome = "error" // our side failed (journal); WeChat will retry
)

// NotifyStats counts notifications by outcome.
type NotifyStats struct {
	counts [8]atomic.Int64
}

var notifyOutcomes = [...]notifyOutcome{nApplied, nDuplicate, nHint, nProbe, nRejected, nUnknown, nMismatch, nError}

func (s *NotifyStats) add(o notifyOutcome) {
	for i, n := range notifyOutcomes {
		if n == o {
			s.counts[i].Add(1)
		}
	}
}

// Snapshot returns the counts by outcome name.
func (s *NotifyStats) Snapshot() map[string]int64 {
	m := make(map[string]int64, len(notifyOutcomes))
	for i, n := range notifyOutcomes {
		m[string(n)] = s.counts[i].Load()
	}
	return m
}

type notifier struct {
	cfg     NotifyConfig
	engine  Engine // the server's
	log     *slog.Logger
	limiter *logLimiter
	stats   *NotifyStats
}

// notifyFailure is a notification we do not accept: WeChat must retry.
type notifyFailure struct {
	outcome notifyOutcome
	status  int
	reason  string // short, safe to return to the sender
	err     error  // for the log, never returned
}

func (n *notifier) routes(s *Server) {
	s.router.HandleFunc("/v1/notify/wechatpay/refund", n.serve("v3", n.handleV3, answerV3)).Methods(http.MethodPost)
	if len(n.cfg.APIv2Key) > 0 {
		s.router.HandleFunc("/v1/notify/wechatpay/v2/refund", n.serve("v2", n.handleV2, answerV2)).Methods(http.MethodPost)
	}
	s.router.HandleFunc("/v1/notify/stats", func(w http.ResponseWriter, _ *http.Request) {
		out := map[string]any{"notifications": n.stats.Snapshot()}
		if q := n.cfg.Quarantine; q != nil {
			entries, bytes, dropped := q.Stats()
			out["quarantine"] = map[string]int64{"entries": int64(entries), "bytes": bytes, "dropped": dropped}
		}
		writeJSON(w, http.StatusOK, out)
	}).Methods(http.MethodGet)
	s.router.HandleFunc("/v1/notify/quarantine", func(w http.ResponseWriter, r *http.Request) {
		if n.cfg.Quarantine == nil {
			writeJSON(w, http.StatusOK, map[string]any{"entries": []any{}})
			return
		}
		list, err := n.cfg.Quarantine.List(100)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": list})
	}).Methods(http.MethodGet)
}

func (n *notifier) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *notifyFailure) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wechatpay.MaxNotificationSize))
	if err != nil {
		return body, &notifyFailure{outcome: nRejected, status: http.StatusRequestEntityTooLarge, reason: "body too large or unreadable", err: err}
	}
	return body, nil
}

// serve runs one notification endpoint: read the body, parse and verify
// it and record it in the engine (handle), and only once that is journaled
// acknowledge it (answer with nil); a notification not accepted is kept,
// counted and answered with its failure, so that WeChat retries.
func (n *notifier) serve(endpoint string, handle func(context.Context, *http.Request, []byte) (notifyOutcome, *notifyFailure),
	answer func(http.ResponseWriter, *notifyFailure)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), n.cfg.Deadline)
		defer cancel()
		body, fail := n.readBody(w, r)
		var outcome notifyOutcome
		if fail == nil {
			outcome, fail = handle(ctx, r, body)
		}
		if fail != nil {
			n.reject(endpoint, r, body, fail)
			answer(w, fail)
			return
		}
		n.stats.add(outcome)
		crashpoint.Hit(crashpoint.AfterNotificationJournaled)
		answer(w, nil)
	}
}

// answerV3 is APIv3's answer: 204, or a JSON failure.
func answerV3(w http.ResponseWriter, fail *notifyFailure) {
	if fail != nil {
		writeJSON(w, fail.status, map[string]string{"code": "FAIL", "message": fail.reason})
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// answerV2 is APIv2's XML answer.
func answerV2(w http.ResponseWriter, fail *notifyFailure) {
	w.Header().Set("Content-Type", "text/xml; charset=utf-8")
	if fail != nil {
		w.WriteHeader(fail.status)
		_, _ = w.Write(wechatpay.V2Ack(false, fail.reason))
		return
	}
	_, _ = w.Write(wechatpay.V2Ack(true, "OK"))
}

// handleV3 handles POST /v1/notify/wechatpay/refund: verify the signature,
// decrypt, and record the outcome (or, for a status we cannot read, a hint)
// through the refund's actor.
func (n *notifier) handleV3(ctx context.Context, r *http.Request, body []byte) (notifyOutcome, *notifyFailure) {
	_, res, err := wechatpay.ParseRefundNotification(n.cfg.Verifier, n.cfg.APIv3Key, wechatpay.HeadersFrom(r.Header), body)
	switch {
	case errors.Is(err, wechatpay.ErrProbe):
		return "", &notifyFailure{outcome: nProbe, status: http.StatusUnauthorized, reason: "signature probe", err: err}
	case errors.Is(err, wechatpay.ErrMissingHeader), errors.Is(err, wechatpay.ErrBadSignature),
		errors.Is(err, wechatpay.ErrUnknownSerial), errors.Is(err, wechatpay.ErrStaleTimestamp),
		errors.Is(err, wechatpay.ErrCertificateExpired), errors.Is(err, wechatpay.ErrInvalidHeader),
		errors.Is(err, wechatpay.ErrUnsupportedAlgorithm):
		return "", &notifyFailure{outcome: nRejected, status: http.StatusUnauthorized, reason: "signature verification failed", err: err}
	case errors.Is(err, wechatpay.ErrIncomplete):
		return "", incompleteFailure(err)
	case err != nil:
		return "", &notifyFailure{outcome: nRejected, status: http.StatusBadRequest, reason: "malformed or undecryptable notification", err: err}
	}
	if n.cfg.MchID != "" && res.MchID != n.cfg.MchID {
		return "", &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "mchid does not match",
			err: fmt.Errorf("mchid %q", res.MchID)}
	}
	return n.record(ctx, res.Notification())
}

// handleV2 handles the legacy XML notification. It carries no signature
// and its AES-ECB payload is malleable, so it is only a hint: once it
// matches our records, a provider query is journaled (and then
// acknowledged); the query's answer is what gets applied.
func (n *notifier) handleV2(ctx context.Context, _ *http.Request, body []byte) (notifyOutcome, *notifyFailure) {
	env, info, err := wechatpay.ParseRefundNotificationV2(n.cfg.APIv2Key, body)
	if errors.Is(err, wechatpay.ErrIncomplete) {
		return "", incompleteFailure(err)
	}
	if err != nil {
		return "", &notifyFailure{outcome: nRejected, status: http.StatusBadRequest, reason: "malformed or undecryptable notification", err: err}
	}
	if n.cfg.MchID != "" && env.MchID != n.cfg.MchID {
		return "", &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "mch_id does not match",
			err: fmt.Errorf("mch_id %q", env.MchID)}
	}
	return n.record(ctx, info.Notification())
}

// incompleteFailure refuses a notification that lacks a field WeChat Pay
// always sends. It cannot be matched against our records, so it is a
// mismatch: kept, counted, and retried by WeChat.
func incompleteFailure(err error) *notifyFailure {
	return &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "incomplete refund notification", err: err}
}

// record hands a verified notification to the engine, which journals it in
// its refund's actor (matching it against our records there). A verified
// notification for a number we never journaled is refused so that WeChat
// keeps retrying (for about a day): every number is journaled before it is
// submitted, so this means our journal lacks a refund WeChat has (a
// restored backup, a misrouted notify_url) and operators must see it while
// evidence still arrives.
func (n *notifier) record(ctx context.Context, note reservation.Notification) (notifyOutcome, *notifyFailure) {
	if !reservation.ValidRefundNo(note.RefundNo) {
		return "", &notifyFailure{outcome: nRejected, status: http.StatusBadRequest, reason: "invalid out_refund_no", err: errors.New("invalid out_refund_no")}
	}
	events, err := n.engine.RecordNotification(ctx, "wechatpay:notification", note)
	if err != nil {
		err = fmt.Errorf("refund %s: %w", note.RefundNo, err) // for the log and the quarantine
	}
	switch fail := n.engineFailure(err); {
	case fail != nil:
		return "", fail
	case len(events) == 0:
		return nDuplicate, nil
	case note.Hint:
		return nHint, nil
	}
	return nApplied, nil
}

func (n *notifier) engineFailure(err error) *notifyFailure {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reservation.ErrOutcomeMismatch):
		return &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "does not match our records", err: err}
	case errors.Is(err, reservation.ErrNotFound):
		// The refund number, or its reservation: see record.
		return &notifyFailure{outcome: nUnknown, status: http.StatusNotFound, reason: "unknown out_refund_no", err: err}
	}
	return &notifyFailure{outcome: nError, status: http.StatusInternalServerError, reason: "temporarily unavailable", err: err}
}

// reject counts, keeps and logs (rate-limited) a notification we refused.
// Probes are counted only.
func (n *notifier) reject(endpoint string, r *http.Request, body []byte, f *notifyFailure) {
	n.stats.add(f.outcome)
	if f.outcome == nProbe {
		n.log.DebugContext(r.Context(), "wechatpay signature probe refused", "endpoint", endpoint)
		return
	}
	if q := n.cfg.Quarantine; q != nil && f.outcome != nError {
		headers := map[string]string{}
		for _, k := range []string{wechatpay.HeaderTimestamp, wechatpay.HeaderNonce, wechatpay.HeaderSignature,
			wechatpay.HeaderSerial, wechatpay.HeaderSignatureType, "Content-Type", "User-Agent"} {
			if v := r.Header.Get(k); v != "" {
				headers[k] = v
			}
		}
		if err := q.Keep(quarantine.Entry{At: time.Now().UTC(), Endpoint: endpoint, Reason: string(f.outcome),
			Detail: errString(f.err), Headers: headers, Body: body}); err != nil {
			// A full disk fails every refusal alike, and anyone can post
			// refusals: rate-limited like the refusals themselves.
			if ok, held := n.limiter.allow(endpoint + "/quarantine_failed"); ok {
				n.log.ErrorContext(r.Context(), "could not keep a refused notification", "endpoint", endpoint,
					"err", err, "similar_suppressed", held)
			}
		}
	}
	if ok, held := n.limiter.allow(endpoint + "/" + string(f.outcome)); ok {
		n.log.ErrorContext(r.Context(), "wechatpay notification refused; WeChat will retry", "endpoint", endpoint,
			"outcome", f.outcome, "reason", f.reason, "err", errString(f.err), "similar_suppressed", held)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
