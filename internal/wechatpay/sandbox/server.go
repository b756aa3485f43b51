package sandbox

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Routes of the real API.
const (
	refundsPath      = "/v3/refund/domestic/refunds"
	abnormalSuffix   = "/apply-abnormal-refund" // after refundsPath/{refund_id}
	tradeBillPath    = "/v3/bill/tradebill"
	billDownloadPath = "/v3/billdownload/file"
	certificatesPath = wechatpay.CertificatesPath
	adminPrefix      = "/sandbox/"
)

// maxBodySize caps request bodies; a refund request is a few hundred bytes.
const maxBodySize = 64 << 10

// beijing is the +08:00 zone WeChat Pay writes its times in.
var beijing = time.FixedZone("CST", 8*3600)

// Server is a WeChat Pay refund server. It is an http.Handler; methods are
// safe for concurrent use. Close stops its timers and notification
// deliveries and saves the books a last time; afterwards it still answers
// requests, but refunds no longer progress, nothing more is sent, and with
// a StateFile a call that would change the books is answered 500
// SYSTEM_ERROR (it is not saved, so a restarted sandbox does not know it).
type Server struct {
	cfg       Config
	log       *slog.Logger
	keys      *keyring // platform keys and APIv3 key, shared by an account's books
	ownClient bool     // cfg.HTTPClient was made here

	ctx    context.Context // cancelled by Close; bounds waits and notifications
	cancel context.CancelFunc
	wg     sync.WaitGroup // notification goroutines

	// persistMu serialises writes of the state file; taken before mu.
	persistMu sync.Mutex
	saved     uint64 // generation last written
	detached  bool   // Close wrote the last state

	mu          sync.Mutex
	closed      bool
	gen         uint64 // bumped by every change to the books (markLocked)
	seq         uint64
	orders      map[string]*order  // by out_trade_no
	byTxn       map[string]*order  // by transaction_id
	refunds     map[string]*refund // by out_refund_no, accepted refunds only
	byRefundID  map[string]*refund // by refund_id
	submissions map[string]*submission
	faults      []*faultEntry
	deliveries  map[string][]Delivery // by out_refund_no
	timers      map[string]*time.Timer
	bills       map[string]billFile // by download token
	creates     *CreateCounter      // Config.Creates
}

// New returns a Server for cfg; see Config for required fields and
// defaults. With a StateFile it loads the books, then resumes what they
// were doing: refunds still PROCESSING reach their outcome
// ProcessingDelay*TimeFactor after they started processing (at once if
// that has passed), and final refunds whose notification was not yet
// acknowledged are notified again, from the first attempt of the schedule.
//
// Errors wrap ErrInvalidConfig or ErrStateFile.
func New(cfg Config) (*Server, error) {
	ownClient := cfg.HTTPClient == nil
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	keys := cfg.keyring
	if keys == nil {
		var err error
		if keys, err = newKeyring(&cfg); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Server{
		cfg: cfg, log: cfg.Logger.With("component", "wxpay-sandbox"), ownClient: ownClient, keys: keys,
		ctx: ctx, cancel: cancel,
		orders: map[string]*order{}, byTxn: map[string]*order{}, refunds: map[string]*refund{},
		byRefundID: map[string]*refund{}, submissions: map[string]*submission{}, deliveries: map[string][]Delivery{},
		timers: map[string]*time.Timer{}, bills: map[string]billFile{}, creates: cfg.Creates,
	}
	if s.creates == nil {
		s.creates = NewCreateCounter(0)
	}
	if cfg.StateFile != "" {
		if err := s.openState(); err != nil {
			cancel()
			return nil, err
		}
		s.resume()
		s.log.Info("books loaded", "state_file", cfg.StateFile, "orders", len(s.orders), "refunds", len(s.refunds))
	}
	return s, nil
}

// Close stops processing timers and notification retries, cancels
// deliveries in flight and waits for their goroutines. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	for no, t := range s.timers {
		t.Stop()
		delete(s.timers, no)
	}
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	if s.ownClient {
		s.cfg.HTTPClient.CloseIdleConnections()
	}
	if s.cfg.StateFile != "" {
		// Saves what is only marked (delivery progress, submission counts),
		// then stops writing: a new Server may open the file now.
		s.persistMu.Lock()
		if err := s.saveLocked(); err != nil {
			s.log.Error("save state at close", "err", err)
		}
		s.detached = true
		s.persistMu.Unlock()
	}
}

// ServeHTTP routes the refund API, the bill API and the admin routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch {
	case p == refundsPath:
		if r.Method != http.MethodPost {
			s.writeError(w, errMethod(), sigOK)
			return
		}
		s.handleCreate(w, r)
	case strings.HasPrefix(p, refundsPath+"/"):
		seg := strings.TrimPrefix(p, refundsPath+"/")
		if idSeg, ok := strings.CutSuffix(seg, abnormalSuffix); ok && idSeg != "" && !strings.Contains(idSeg, "/") {
			id, err := url.PathUnescape(idSeg)
			if err != nil {
				s.writeError(w, errNotFound(), sigOK)
				return
			}
			if r.Method != http.MethodPost {
				s.writeError(w, errMethod(), sigOK)
				return
			}
			s.handleAbnormal(w, r, id)
			return
		}
		no, err := url.PathUnescape(seg)
		if err != nil || seg == "" || strings.Contains(seg, "/") {
			s.writeError(w, errNotFound(), sigOK)
			return
		}
		if r.Method != http.MethodGet {
			s.writeError(w, errMethod(), sigOK)
			return
		}
		s.handleQuery(w, r, no)
	case p == tradeBillPath:
		if r.Method != http.MethodGet {
			s.writeError(w, errMethod(), sigOK)
			return
		}
		s.handleTradeBill(w, r)
	case p == certificatesPath:
		if r.Method != http.MethodGet {
			s.writeError(w, errMethod(), sigOK)
			return
		}
		s.handleCertificates(w, r)
	case p == billDownloadPath:
		if r.Method != http.MethodGet {
			s.writeError(w, errMethod(), sigOK)
			return
		}
		s.handleBillDownload(w, r)
	case strings.HasPrefix(p, adminPrefix) && !s.cfg.DisableAdmin:
		s.handleAdmin(w, r)
	default:
		s.writeError(w, errNotFound(), sigOK)
	}
}

// apiError is an APIv3 error response: {"code","message","detail"}.
type apiError struct {
	status  int
	Code    string       `json:"code"`
	Message string       `json:"message"`
	Detail  *errorDetail `json:"detail,omitempty"`
}

type errorDetail struct {
	Field    string `json:"field,omitempty"`
	Value    any    `json:"value,omitempty"`
	Issue    string `json:"issue,omitempty"`
	Location string `json:"location,omitempty"`
}

func newError(status int, code, msg string) *apiError {
	return &apiError{status: status, Code: code, Message: msg}
}

func paramError(field, issue string) *apiError {
	e := newError(http.StatusBadRequest, "PARAM_ERROR", "参数错误")
	e.Detail = &errorDetail{Field: field, Issue: issue, Location: "body"}
	return e
}

func signError(issue string) *apiError {
	e := newError(http.StatusUnauthorized, "SIGN_ERROR", "错误的签名，验签失败")
	e.Detail = &errorDetail{Field: "signature", Issue: issue, Location: "authorization"}
	return e
}

func errNotFound() *apiError {
	return newError(http.StatusNotFound, "NOT_FOUND", "请求的资源不存在")
}

func errMethod() *apiError {
	return newError(http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "不支持的请求方法")
}

func errSystem() *apiError {
	return newError(http.StatusInternalServerError, "SYSTEM_ERROR", "系统错误")
}

// sigMode says how a response is signed.
type sigMode int

const (
	sigOK    sigMode = iota // a valid signature
	sigBad                  // valid base64, wrong signature
	sigProbe                // WECHATPAY/SIGNTEST/...
	sigNone                 // no signature headers (bill download)
)

func (m sigMode) String() string {
	switch m {
	case sigBad:
		return "bad"
	case sigProbe:
		return "probe"
	case sigNone:
		return "none"
	}
	return "ok"
}

// readBody reads the request body up to maxBodySize. On failure it answers
// and returns false.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodySize))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			s.writeError(w, paramError("", "请求体过大"), sigOK)
		} else {
			s.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "读取请求体失败"), sigOK)
		}
		return nil, false
	}
	return body, true
}

// authenticate checks the headers WeChat Pay requires and the merchant's
// Authorization over the exact request target and body. On failure it
// answers and returns false. jsonOnly requires Accept to allow JSON (the
// bill download accepts anything).
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request, body []byte, jsonOnly bool) bool {
	accept := r.Header.Get("Accept")
	if accept == "" || r.Header.Get("User-Agent") == "" {
		s.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "Http头缺少Accept或User-Agent"), sigOK)
		return false
	}
	if jsonOnly && !acceptsJSON(accept) {
		s.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "Http头Accept不支持application/json"), sigOK)
		return false
	}
	if r.Method == http.MethodPost {
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		if err != nil || mt != "application/json" {
			s.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "Http头Content-Type须为application/json"), sigOK)
			return false
		}
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		s.writeError(w, signError("Authorization header is missing"), sigOK)
		return false
	}
	auth, err := wechatpay.ParseAuthorization(h)
	if err != nil {
		s.writeError(w, signError("malformed Authorization"), sigOK)
		return false
	}
	if auth.MchID != s.cfg.MchID {
		s.writeError(w, signError("mchid does not match this merchant"), sigOK)
		return false
	}
	merchantKey, ok := s.keys.merchantKey(auth.SerialNo)
	if !ok {
		s.writeError(w, signError("serial_no is not the merchant certificate serial"), sigOK)
		return false
	}
	if err := wechatpay.CheckTimestamp(auth.Timestamp, s.cfg.Now(), s.cfg.MaxSkew); err != nil {
		s.writeError(w, signError("timestamp expired or in the future"), sigOK)
		return false
	}
	if err := wechatpay.VerifyAuthorization(merchantKey, auth, r.Method, requestTarget(r), body); err != nil {
		s.log.Debug("merchant signature rejected", "method", r.Method, "target", requestTarget(r), "err", err)
		s.writeError(w, signError("sign not match"), sigOK)
		return false
	}
	return true
}

// requestTarget is the request target exactly as the client sent it, which
// is what the merchant signed.
func requestTarget(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI() // absolute-form or a request built in memory
}

func acceptsJSON(accept string) bool {
	for part := range strings.SplitSeq(accept, ",") {
		mt, _, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err == nil && (mt == "application/json" || mt == "*/*" || mt == "application/*") {
			return true
		}
	}
	return false
}

// writeError writes an APIv3 error body.
func (s *Server) writeError(w http.ResponseWriter, e *apiError, mode sigMode) {
	s.writeJSON(w, e.status, e, mode)
}

// writeJSON marshals v without HTML escaping (WeChat Pay writes UTF-8 as
// is) and writes it signed according to mode.
func (s *Server) writeJSON(w http.ResponseWriter, status int, v any, mode sigMode) {
	body, err := marshalJSON(v)
	if err != nil {
		s.log.Error("marshal response", "err", err)
		status, body = http.StatusInternalServerError, []byte(`{"code":"SYSTEM_ERROR","message":"系统错误"}`)
	}
	s.writeSigned(w, status, "application/json; charset=utf-8", body, mode)
}

// writeSigned writes body with WeChat Pay's response headers.
func (s *Server) writeSigned(w http.ResponseWriter, status int, contentType string, body []byte, mode sigMode) {
	h := w.Header()
	h.Set("Request-ID", randomHex(16))
	if contentType != "" && len(body) > 0 {
		h.Set("Content-Type", contentType)
	}
	if mode != sigNone {
		sh, err := s.sign(body, mode)
		if err != nil {
			s.log.Error("sign response", "err", err)
		} else {
			sh.SignatureType = "" // responses carry no Wechatpay-Signature-Type
			sh.Set(h)
		}
	}
	w.WriteHeader(status)
	w.Write(body)
}

// sign returns the Wechatpay-* headers for body: a real signature, or the
// broken one a fault asks for.
func (s *Server) sign(body []byte, mode sigMode) (wechatpay.Headers, error) {
	key, serial := s.keys.signer()
	h, err := wechatpay.SignHeaders(key, serial, s.cfg.Now().Unix(), wechatpay.NewNonce(), body)
	if err != nil {
		return h, err
	}
	switch mode {
	case sigBad:
		// A genuine signature, but over other bytes: valid base64 that
		// fails verification.
		wrong, err := wechatpay.SignMessage(key, wechatpay.ResponseMessage(h.Timestamp, h.Nonce, append(bytes.Clone(body), ' ')))
		if err != nil {
			return h, err
		}
		h.Signature = wrong
	case sigProbe:
		h.Signature = probeSignature()
	}
	return h, nil
}

// probeSignature imitates WeChat Pay's probe: the prefix then 344
// characters that look like base64.
func probeSignature() string {
	b := make([]byte, 256)
	rand.Read(b)
	return "WECHATPAY/SIGNTEST/" + base64.StdEncoding.EncodeToString(b)
}

// wait blocks for d or until Close; it reports whether d elapsed.
func (s *Server) wait(d time.Duration) bool {
	if d <= 0 {
		return s.ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.ctx.Done():
		return false
	}
}

func marshalJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomAlnum returns n uniform random characters of [0-9A-Za-z].
func randomAlnum(n int) string { return randomFrom(alnum, n) }

// randomDigits returns n uniform random decimal digits.
func randomDigits(n int) string { return randomFrom(alnum[:10], n) }

func randomFrom(set string, n int) string {
	out := make([]byte, 0, n)
	limit := 256 - 256%len(set) // reject the tail so the choice is uniform
	buf := make([]byte, n+8)
	for len(out) < n {
		rand.Read(buf)
		for _, b := range buf {
			if int(b) < limit && len(out) < n {
				out = append(out, set[int(b)%len(set)])
			}
		}
	}
	return string(out)
}

func randomHex(nBytes int) string {
	b := make([]byte, nBytes)
	rand.Read(b)
	return strings.ToUpper(hex.EncodeToString(b))
}

// newUUID returns a random RFC 4122 version 4 UUID, the form of real
// notification ids.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}
