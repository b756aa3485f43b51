package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/tally"
	"github.com/refundd/refundd/internal/wechatpay"
)

// NotifyAccount is one WeChat Pay account's notification keys.
// Notifications to its routes are verified with its keys only, and change
// only the refunds of its own merchants.
type NotifyAccount struct {
	// Name is the account's name (merchants file); its routes are
	// /v1/notify/wechatpay/accounts/{name}/refund and .../v2/refund.
	Name string
	// MchID is the mchid of a direct account, the sp_mchid of a service
	// provider: a notification naming another is refused.
	MchID    string
	Verifier *wechatpay.Verifier // required for v3
	// Keys are the account's APIv3 and APIv2 keys, swappable while
	// notifications arrive (a reload). Nil: fixed keys APIv3Key and
	// APIv2Key (tests, the sandbox).
	Keys     *NotifyKeys
	APIv3Key []byte // required for v3 without Keys
	APIv2Key []byte // nil: no v2 route for the account (without Keys)
	// Merchant names the merchant (a reservation's merchant name) that a
	// verified notification naming mchid (and sub_mchid) is for; false:
	// not a merchant of this account. Nil: the account's own mchid with no
	// sub_mchid is reservation.DefaultMerchant, and nothing else is.
	Merchant func(mchID, subMchID string) (string, bool)
}

// NotifyConfig enables the WeChat Pay notification endpoints.
type NotifyConfig struct {
	// Accounts are the WeChat Pay accounts whose notifications are taken,
	// each on its own routes; the first also answers the legacy routes
	// /v1/notify/wechatpay/refund and /v1/notify/wechatpay/v2/refund.
	Accounts []NotifyAccount
	// Quarantine keeps the raw bytes of notifications that were not
	// applied; nil keeps nothing (tests only).
	Quarantine *quarantine.Store
	// Deadline bounds the work for one notification, inside WeChat's 5 s;
	// zero means 4 s.
	Deadline time.Duration
}

// merchant is the merchant a notification verified with a's keys and
// naming m is for, or false when a has no such merchant. Only a's own
// mchid is a's: a notification naming another account is never
// attributed, whatever a.Merchant says.
func (a *NotifyAccount) merchant(m wechatpay.Merchant) (string, bool) {
	if m.MchID == "" || m.MchID != a.MchID {
		return "", false
	}
	if a.Merchant == nil {
		return reservation.DefaultMerchant, m.SubMchID == ""
	}
	return a.Merchant(m.MchID, m.SubMchID)
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

// Unattributed is the by-merchant bucket of notifications that name no
// configured merchant: unverified ones, ones naming a merchant their
// account does not have, ones for an unknown account. It is not a valid
// merchant name, so it never stands for one.
const Unattributed = "(unattributed)"

// NotifyStats counts notifications by outcome, in total and by merchant.
// The merchants are a bounded set (the configured ones, and
// Unattributed), so nothing a sender writes adds a counter; a merchant
// added by a reload is added by the server (addMerchants). With a durable
// store (Options.Tally) the counts are the store's, kept in the journal's
// key-value area and written before the notification is answered, so they
// survive a restart; without one they are this process's.
type NotifyStats struct {
	counts     [8]atomic.Int64
	mu         sync.Mutex                                  // serializes addMerchants
	byMerchant atomic.Pointer[map[string]*[8]atomic.Int64] // copied on write
	durable    *tally.Store                                // nil: the atomics above
}

var notifyOutcomes = [...]notifyOutcome{nApplied, nDuplicate, nHint, nProbe, nRejected, nUnknown, nMismatch, nError}

func newNotifyStats(merchants []string, durable *tally.Store) *NotifyStats {
	s := &NotifyStats{durable: durable}
	by := make(map[string]*[8]atomic.Int64, len(merchants)+1)
	for _, m := range merchants {
		by[m] = new([8]atomic.Int64)
	}
	by[Unattributed] = new([8]atomic.Int64)
	s.byMerchant.Store(&by)
	return s
}

// addMerchants counts the notifications of merchants added by a reload
// under their names from now on.
func (s *NotifyStats) addMerchants(merchants ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	by := maps.Clone(*s.byMerchant.Load())
	for _, m := range merchants {
		if by[m] == nil {
			by[m] = new([8]atomic.Int64)
		}
	}
	s.byMerchant.Store(&by)
}

// bucket is merchant's name in the counts: itself when configured,
// Unattributed otherwise ("" included).
func (s *NotifyStats) bucket(merchant string) string {
	if _, ok := (*s.byMerchant.Load())[merchant]; ok {
		return merchant
	}
	return Unattributed
}

// add counts outcome o of a notification for merchant ("" or one not
// configured: Unattributed), and one kept in the quarantine when
// quarantined. With a durable store it returns once the count is fsynced,
// or the write's error: the caller answers only after it (persist, then
// act), and a notification whose count failed is answered as a failure.
func (s *NotifyStats) add(ctx context.Context, merchant string, o notifyOutcome, quarantined bool) error {
	m := s.bucket(merchant)
	if s.durable != nil {
		changes := map[string]int64{tally.KeyNotify + string(o): 1, tally.KeyNotifyMerchant + m + "/" + string(o): 1}
		if quarantined {
			changes[tally.KeyQuarantined] = 1
		}
		return s.durable.Add(ctx, changes)
	}
	bucket := (*s.byMerchant.Load())[m]
	for i, n := range notifyOutcomes {
		if n == o {
			s.counts[i].Add(1)
			bucket[i].Add(1)
		}
	}
	return nil
}

// Snapshot returns the counts by outcome name.
func (s *NotifyStats) Snapshot() map[string]int64 {
	if s.durable != nil {
		v := s.durable.Own()
		out := make(map[string]int64, len(notifyOutcomes))
		for _, n := range notifyOutcomes {
			out[string(n)] = v[tally.KeyNotify+string(n)]
		}
		return out
	}
	return snapshotCounts(&s.counts)
}

// ByMerchant returns the counts by merchant (configured merchants and
// Unattributed), then by outcome name.
func (s *NotifyStats) ByMerchant() map[string]map[string]int64 {
	by := *s.byMerchant.Load()
	out := make(map[string]map[string]int64, len(by))
	var v map[string]int64
	if s.durable != nil {
		v = s.durable.Own()
	}
	for m, c := range by {
		if s.durable == nil {
			out[m] = snapshotCounts(c)
			continue
		}
		counts := make(map[string]int64, len(notifyOutcomes))
		for _, n := range notifyOutcomes {
			counts[string(n)] = v[tally.KeyNotifyMerchant+m+"/"+string(n)]
		}
		out[m] = counts
	}
	return out
}

// Quarantined is how many refused notifications were kept in the
// quarantine, as counted durably; false without a durable store.
func (s *NotifyStats) Quarantined() (int64, bool) {
	if s.durable == nil {
		return 0, false
	}
	return s.durable.Own()[tally.KeyQuarantined], true
}

func snapshotCounts(c *[8]atomic.Int64) map[string]int64 {
	m := make(map[string]int64, len(notifyOutcomes))
	for i, n := range notifyOutcomes {
		m[string(n)] = c[i].Load()
	}
	return m
}

type notifier struct {
	cfg NotifyConfig
	// accounts are the accounts by name: those of cfg, then those a
	// reload added (Server.AddNotifyAccounts). Copied on write under mu.
	accounts atomic.Pointer[map[string]*NotifyAccount]
	mu       sync.Mutex
	engine   Engine // the server's
	log      *slog.Logger
	limiter  *logLimiter
	stats    *NotifyStats
	// merchants are the configured ones (the server's): an account
	// naming any other is refused.
	merchants *merchantSet
}

func newNotifier(cfg NotifyConfig, s *Server) *notifier {
	if cfg.Deadline <= 0 {
		cfg.Deadline = 4 * time.Second
	}
	n := &notifier{cfg: cfg, engine: s.engine, log: s.log,
		limiter: newLogLimiter(10 * time.Second), stats: newNotifyStats(s.merchants.sorted(), s.opts.Tally), merchants: s.merchants}
	accounts := make(map[string]*NotifyAccount, len(cfg.Accounts))
	for i := range n.cfg.Accounts {
		a := &n.cfg.Accounts[i]
		if a.Keys == nil {
			a.Keys = NewNotifyKeys(a.APIv3Key, a.APIv2Key)
		}
		if _, dup := accounts[a.Name]; !dup {
			accounts[a.Name] = a
		}
	}
	n.accounts.Store(&accounts)
	return n
}

// addAccounts serves the routes of accounts added by a reload from now
// on; a name already served keeps its account.
func (n *notifier) addAccounts(accounts ...NotifyAccount) {
	n.mu.Lock()
	defer n.mu.Unlock()
	next := maps.Clone(*n.accounts.Load())
	for _, a := range accounts {
		if _, dup := next[a.Name]; dup {
			continue
		}
		if a.Keys == nil {
			a.Keys = NewNotifyKeys(a.APIv3Key, a.APIv2Key)
		}
		next[a.Name] = &a
	}
	n.accounts.Store(&next)
}

// notifyFailure is a notification we do not accept: WeChat must retry.
type notifyFailure struct {
	outcome notifyOutcome
	status  int
	reason  string // short, safe to return to the sender
	err     error  // for the log, never returned
}

// notifyHandled is what became of a notification: its outcome and the
// merchant it was for ("" until its account attributes it).
type notifyHandled struct {
	merchant string
	outcome  notifyOutcome
	fail     *notifyFailure
}

// notifyHandler verifies and records one notification with account a's
// keys.
type notifyHandler func(ctx context.Context, a *NotifyAccount, r *http.Request, body []byte) notifyHandled

// Where an account's notifications arrive; {account} is its name.
const (
	accountNotifyV3 = "/v1/notify/wechatpay/accounts/{account}/refund"
	accountNotifyV2 = "/v1/notify/wechatpay/accounts/{account}/v2/refund"
)

func (n *notifier) routes(s *Server) {
	if len(n.cfg.Accounts) > 0 {
		// The legacy routes are the first account's, as they were the
		// one account's before there were several.
		first := &n.cfg.Accounts[0]
		fixed := func(*http.Request) (*NotifyAccount, string) { return first, "" }
		s.router.HandleFunc("/v1/notify/wechatpay/refund", n.serve("v3", fixed, n.handleV3, answerV3)).Methods(http.MethodPost)
		if len(first.Keys.APIv2Key()) > 0 {
			s.router.HandleFunc("/v1/notify/wechatpay/v2/refund", n.serve("v2", fixed, n.handleV2, answerV2)).Methods(http.MethodPost)
		}
		// The account v2 route is served even when no account has an
		// APIv2 key yet: an account a reload adds may have one. An account
		// without one is answered as no account.
		s.router.HandleFunc(accountNotifyV3, n.serve("v3", n.accountOf(false), n.handleV3, answerV3)).Methods(http.MethodPost)
		s.router.HandleFunc(accountNotifyV2, n.serve("v2", n.accountOf(true), n.handleV2, answerV2)).Methods(http.MethodPost)
	}
	s.router.HandleFunc("/v1/notify/stats", func(w http.ResponseWriter, _ *http.Request) {
		out := map[string]any{"notifications": n.stats.Snapshot(), "by_merchant": n.stats.ByMerchant()}
		if q := n.cfg.Quarantine; q != nil {
			entries, bytes, dropped := q.Stats()
			out["quarantine"] = map[string]int64{"entries": int64(entries), "bytes": bytes, "dropped": dropped}
		}
		if kept, ok := n.stats.Quarantined(); ok {
			// Survives restarts (and the quarantine's own limits):
			// refusals ever kept, where entries are the ones still held.
			out["quarantined_total"] = kept
		}
		out["durable"] = n.stats.durable != nil
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
		if list == nil {
			list = []quarantine.Meta{} // an empty list is [], not null
		}
		writeJSON(w, http.StatusOK, map[string]any{"entries": list})
	}).Methods(http.MethodGet)
}

// accountOf finds the account an account route names, with its label for
// logs and the quarantine; nil for a name that is no account's (or, for
// v2, an account without an APIv2 key). The label of such a name is
// fixed: the name is the sender's, and labels key the log limiter.
func (n *notifier) accountOf(v2 bool) func(*http.Request) (*NotifyAccount, string) {
	return func(r *http.Request) (*NotifyAccount, string) {
		a, ok := (*n.accounts.Load())[pathVars(r)["account"]]
		if !ok || v2 && len(a.Keys.APIv2Key()) == 0 {
			return nil, "account ?"
		}
		return a, "account " + a.Name
	}
}

func (n *notifier) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *notifyFailure) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, wechatpay.MaxNotificationSize))
	if err != nil {
		return body, &notifyFailure{outcome: nRejected, status: http.StatusRequestEntityTooLarge, reason: "body too large or unreadable", err: err}
	}
	return body, nil
}

// serve runs one notification endpoint: find the account whose keys it
// takes (account), read the body, parse and verify it and record it in the
// engine (handle), and only once that is journaled acknowledge it (answer
// with nil); a notification not accepted is kept, counted and answered
// with its failure, so that WeChat retries.
func (n *notifier) serve(endpoint string, account func(*http.Request) (*NotifyAccount, string), handle notifyHandler,
	answer func(http.ResponseWriter, *notifyFailure)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), n.cfg.Deadline)
		defer cancel()
		a, label := account(r)
		endpoint := endpoint
		if label != "" {
			endpoint = label + " " + endpoint
		}
		body, fail := n.readBody(w, r)
		var h notifyHandled
		switch {
		case fail != nil:
			h.fail = fail
		case a == nil:
			h.fail = &notifyFailure{outcome: nRejected, status: http.StatusNotFound, reason: "no such account",
				err: fmt.Errorf("account %q", pathVars(r)["account"])}
		default:
			h = handle(ctx, a, r, body)
		}
		if h.fail != nil {
			n.reject(endpoint, h.merchant, r, body, h.fail)
			answer(w, h.fail)
			return
		}
		if err := n.stats.add(ctx, h.merchant, h.outcome, false); err != nil {
			// Not acknowledged before its count is durable: WeChat sends
			// it again, and it is counted then (as a duplicate, when it
			// was journaled).
			h.fail = &notifyFailure{outcome: nError, status: http.StatusInternalServerError, reason: "temporarily unavailable", err: err}
			n.reject(endpoint, h.merchant, r, body, h.fail)
			answer(w, h.fail)
			return
		}
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

// handleV3 handles a v3 notification to account a: verify the signature
// with a's keys, decrypt, find the merchant it is for among a's, and
// record the outcome (or, for a status we cannot read, a hint) through the
// refund's actor.
func (n *notifier) handleV3(ctx context.Context, a *NotifyAccount, r *http.Request, body []byte) notifyHandled {
	res, err := openV3(a, wechatpay.HeadersFrom(r.Header), body)
	switch {
	case errors.Is(err, wechatpay.ErrProbe):
		return failed(&notifyFailure{outcome: nProbe, status: http.StatusUnauthorized, reason: "signature probe", err: err})
	case errors.Is(err, wechatpay.ErrMissingHeader), errors.Is(err, wechatpay.ErrBadSignature),
		errors.Is(err, wechatpay.ErrUnknownSerial), errors.Is(err, wechatpay.ErrStaleTimestamp),
		errors.Is(err, wechatpay.ErrCertificateExpired), errors.Is(err, wechatpay.ErrInvalidHeader),
		errors.Is(err, wechatpay.ErrUnsupportedAlgorithm):
		return failed(&notifyFailure{outcome: nRejected, status: http.StatusUnauthorized, reason: "signature verification failed", err: err})
	case errors.Is(err, wechatpay.ErrIncomplete):
		return failed(incompleteFailure(err))
	case err != nil:
		return failed(&notifyFailure{outcome: nRejected, status: http.StatusBadRequest, reason: "malformed or undecryptable notification", err: err})
	}
	return n.record(ctx, a, res.Merchant(), res.Notification())
}

// openV3 verifies and decrypts a v3 notification with a's keys: the
// current APIv3 key, then, while its grace lasts, the previous one. Only a
// notification that verified but did not decrypt is tried again. When
// neither key opens it the error is the current key's, answered non-2xx
// so WeChat Pay retries.
func openV3(a *NotifyAccount, h wechatpay.Headers, body []byte) (wechatpay.RefundResource, error) {
	var first error
	for _, key := range a.Keys.APIv3Keys() {
		_, res, err := wechatpay.ParseRefundNotification(a.Verifier, key, h, body)
		if err == nil {
			return res, nil
		}
		if first == nil {
			first = err
		}
		if !errors.Is(err, wechatpay.ErrDecrypt) {
			break
		}
	}
	return wechatpay.RefundResource{}, first
}

// handleV2 handles the legacy XML notification to account a. It carries
// no signature and its AES-ECB payload is malleable, so it is only a hint:
// once it matches our records, a provider query is journaled (and then
// acknowledged); the query's answer is what gets applied.
func (n *notifier) handleV2(ctx context.Context, a *NotifyAccount, _ *http.Request, body []byte) notifyHandled {
	env, info, err := wechatpay.ParseRefundNotificationV2(a.Keys.APIv2Key(), body)
	if errors.Is(err, wechatpay.ErrIncomplete) {
		return failed(incompleteFailure(err))
	}
	if err != nil {
		return failed(&notifyFailure{outcome: nRejected, status: http.StatusBadRequest, reason: "malformed or undecryptable notification", err: err})
	}
	return n.record(ctx, a, env.Merchant(), wechatpay.NotificationV2(env, info))
}

func failed(f *notifyFailure) notifyHandled { return notifyHandled{fail: f} }

// incompleteFailure refuses a notification that lacks a field WeChat Pay
// always sends. It cannot be matched against our records, so it is a
// mismatch: kept, counted, and retried by WeChat.
func incompleteFailure(err error) *notifyFailure {
	return &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "incomplete refund notification", err: err}
}

// record hands a notification verified with account a's keys and naming
// merchant m to the engine, which journals it in its refund's actor
// (matching it against our records there, the reservation's merchant
// included). A notification naming a merchant a does not have is refused
// before any journal work. A verified notification for a number we never
// journaled is refused so that WeChat keeps retrying (for about a day):
// every number is journaled before it is submitted, so this means our
// journal lacks a refund WeChat has (a restored backup, a misrouted
// notify_url) and operators must see it while evidence still arrives.
func (n *notifier) record(ctx context.Context, a *NotifyAccount, m wechatpay.Merchant, note reservation.Notification) notifyHandled {
	merchant, ok := a.merchant(m)
	if !ok || !n.merchants.has(merchant) {
		return failed(&notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "merchant does not match",
			err: fmt.Errorf("%s is no merchant of account %q", m, a.Name)})
	}
	note.Merchant = merchant
	if !reservation.ValidRefundNo(note.RefundNo) {
		return notifyHandled{merchant: merchant, fail: &notifyFailure{outcome: nRejected, status: http.StatusBadRequest,
			reason: "invalid out_refund_no", err: errors.New("invalid out_refund_no")}}
	}
	events, err := n.engine.RecordNotification(ctx, "wechatpay:notification", note)
	if err != nil {
		err = fmt.Errorf("refund %s for merchant %s: %w", note.RefundNo, merchant, err) // for the log and the quarantine
	}
	switch fail := n.engineFailure(err); {
	case fail != nil:
		return notifyHandled{merchant: merchant, fail: fail}
	case len(events) == 0:
		return notifyHandled{merchant: merchant, outcome: nDuplicate}
	case note.Hint:
		return notifyHandled{merchant: merchant, outcome: nHint}
	}
	return notifyHandled{merchant: merchant, outcome: nApplied}
}

func (n *notifier) engineFailure(err error) *notifyFailure {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reservation.ErrOutcomeMismatch):
		return &notifyFailure{outcome: nMismatch, status: http.StatusBadRequest, reason: "does not match our records", err: err}
	case errors.Is(err, reservation.ErrArchived):
		// It would change a reservation whose events are sealed in the
		// archive (a conflict, or a move WeChat reports): an operator's
		// case, kept and retried like a mismatch. A notification that
		// matches an archived refund is acknowledged (no events).
		return &notifyFailure{outcome: nMismatch, status: http.StatusConflict, reason: "would change an archived reservation", err: err}
	case errors.Is(err, reservation.ErrNotFound):
		// The refund number, or its reservation: see record.
		return &notifyFailure{outcome: nUnknown, status: http.StatusNotFound, reason: "unknown out_refund_no", err: err}
	}
	return &notifyFailure{outcome: nError, status: http.StatusInternalServerError, reason: "temporarily unavailable", err: err}
}

// reject counts, keeps and logs (rate-limited) a notification we refused.
// Probes are counted only.
func (n *notifier) reject(endpoint, merchant string, r *http.Request, body []byte, f *notifyFailure) {
	kept := false
	defer func() {
		// Counted whatever its count's write does: the answer is a
		// failure either way, and WeChat sends it again.
		if err := n.stats.add(r.Context(), merchant, f.outcome, kept); err != nil {
			if ok, held := n.limiter.allow(endpoint + "/count_failed"); ok {
				n.log.ErrorContext(r.Context(), "could not count a refused notification", "endpoint", endpoint,
					"err", err, "similar_suppressed", held)
			}
		}
	}()
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
		} else {
			kept = true
		}
	}
	if ok, held := n.limiter.allow(endpoint + "/" + string(f.outcome)); ok {
		n.log.ErrorContext(r.Context(), "wechatpay notification refused; WeChat will retry", "endpoint", endpoint,
			"outcome", f.outcome, "merchant", merchant, "reason", f.reason, "err", errString(f.err), "similar_suppressed", held)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
