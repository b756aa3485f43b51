package sandbox

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Multi is one WeChat Pay serving several accounts: direct merchants, and
// service providers with their sub-merchants. Each merchant has its own
// books (a Server: orders, refunds, per-order rules, notifications, state
// file); each account its own keys. A request is routed by the mchid of
// its Authorization to its account, and for a provider by the sub_mchid it
// names to that sub-merchant's books, the way WeChat Pay keeps a refund
// with the merchant that owns its order:
//
//   - an unknown mchid, or a request signed with another key than its
//     account's, is 401 SIGN_ERROR;
//   - a direct merchant's refund queried by another merchant is not in the
//     other's books: 404 RESOURCE_NOT_EXISTS, as for a wrong sub_mchid;
//   - a provider's call without sub_mchid is 400 PARAM_ERROR "受理机构必须传入
//     sub_mch_id"; with its own mchid as sub_mchid 400 PARAM_ERROR
//     "子商户mchid不能与自身mchid相同"; with a sub_mchid it is not authorised
//     for 403 NO_AUTH "特约子商户商户号未授权服务商的产品权限" (PARTNER.md
//     §1.8; WeChat Pay's v3 status for this is unconfirmed);
//   - a direct merchant's call with sub_mchid is 400 PARAM_ERROR.
//
// Whether WeChat Pay scopes out_refund_no per sp_mchid or per sub_mchid is
// unconfirmed (PARTNER.md §1.10); here it is per books, so per
// sub-merchant, the laxer rule: a merchant that keeps its numbers unique
// per provider works under both.
//
// Admin routes of one book are under /sandbox/books/{mchid}/ (direct) or
// /sandbox/books/{sp_mchid}-{sub_mchid}/, with the paths of Server's admin
// routes after it (orders, faults, refunds/{no}); GET /sandbox/books lists
// the books. GET /sandbox/refusals counts the API answers that refused a
// request for its merchant (401, 400 and 403: a wrong key, a missing or
// foreign sub_mchid), so a test can prove none was sent with another
// merchant's key or sub_mchid.
type Multi struct {
	accounts map[string]*account // by mchid
	books    map[wechatpay.Merchant]*Server
	order    []wechatpay.Merchant // as configured
	admin    bool

	mu      sync.Mutex
	refused map[int]int // by HTTP status
}

type account struct {
	gate    *Server            // any of its books: they share the account's keys
	direct  *Server            // nil for a provider
	subs    map[string]*Server // by sub_mchid, for a provider
	partner bool
}

// NewMulti returns a Multi serving one book per Config: SubMchID empty for
// a direct merchant, set for a sub-merchant of the provider MchID. Books of
// one MchID must hold the same keys (MerchantSerial, MerchantPublicKey,
// PublicKeyID, PlatformKey, APIv3Key); an MchID is either one direct
// merchant or a provider with sub-merchants. Each Config is validated as
// by New; give each its own StateFile.
//
// Errors wrap ErrInvalidConfig or ErrStateFile. On error nothing is left
// running.
func NewMulti(cfgs []Config) (*Multi, error) {
	m := &Multi{accounts: map[string]*account{}, books: map[wechatpay.Merchant]*Server{}}
	if len(cfgs) == 0 {
		return nil, fmt.Errorf("%w: no books", ErrInvalidConfig)
	}
	fail := func(err error) (*Multi, error) {
		m.Close()
		return nil, err
	}
	for i, cfg := range cfgs {
		key := wechatpay.Merchant{MchID: cfg.MchID, SubMchID: cfg.SubMchID}
		if m.books[key] != nil {
			return fail(fmt.Errorf("%w: books %d: %s listed twice", ErrInvalidConfig, i, key))
		}
		if i == 0 {
			m.admin = !cfg.DisableAdmin
		}
		a := m.accounts[cfg.MchID]
		if a != nil {
			// One account, one set of WeChat Pay keys: a rotation through
			// any of its books applies to all.
			cfg.keyring = a.gate.keys
		}
		s, err := New(cfg)
		if err != nil {
			return fail(fmt.Errorf("books %d (%s): %w", i, key, err))
		}
		m.books[key] = s
		m.order = append(m.order, key)
		if a == nil {
			a = &account{gate: s, subs: map[string]*Server{}, partner: cfg.SubMchID != ""}
			m.accounts[cfg.MchID] = a
		} else if err := sameKeys(&a.gate.cfg, &s.cfg); err != nil {
			return fail(fmt.Errorf("%w: books %d (%s): %s", ErrInvalidConfig, i, key, err))
		}
		switch {
		case a.partner != (cfg.SubMchID != ""), !a.partner && a.direct != nil:
			return fail(fmt.Errorf("%w: mchid %s is configured both as a direct merchant and otherwise", ErrInvalidConfig, cfg.MchID))
		case a.partner:
			a.subs[cfg.SubMchID] = s
		default:
			a.direct = s
		}
	}
	return m, nil
}

// sameKeys says why two books of one account do not hold the same keys.
func sameKeys(a, b *Config) error {
	switch {
	case !strings.EqualFold(a.MerchantSerial, b.MerchantSerial) || !a.MerchantPublicKey.Equal(b.MerchantPublicKey):
		return errors.New("merchant certificate differs from its account's other books")
	case a.PublicKeyID != b.PublicKeyID || !a.PlatformKey.Equal(b.PlatformKey) || a.CertificateMode != b.CertificateMode:
		return errors.New("WeChat Pay key differs from its account's other books")
	case subtle.ConstantTimeCompare(a.APIv3Key, b.APIv3Key) != 1:
		return errors.New("APIv3 key differs from its account's other books")
	}
	return nil
}

// Book returns the books of merchant mc, nil if none.
func (m *Multi) Book(mc wechatpay.Merchant) *Server { return m.books[mc] }

// Books lists the merchants served, in configuration order.
func (m *Multi) Books() []wechatpay.Merchant { return slices.Clone(m.order) }

// Close closes every book.
func (m *Multi) Close() {
	for _, s := range m.books {
		s.Close()
	}
}

// ServeHTTP routes a request to its merchant's books.
func (m *Multi) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	if strings.HasPrefix(p, adminPrefix) {
		if !m.admin {
			m.any().writeError(w, errNotFound(), sigOK)
			return
		}
		m.serveAdmin(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	m.serveAPI(sw, r)
	switch sw.status {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
		m.mu.Lock()
		if m.refused == nil {
			m.refused = map[int]int{}
		}
		m.refused[sw.status]++
		m.mu.Unlock()
	}
}

// Refusals returns how many API requests were answered 400, 401 or 403,
// by status.
func (m *Multi) Refusals() map[int]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[int]int{}
	for k, v := range m.refused {
		out[k] = v
	}
	return out
}

// statusWriter remembers the status of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (m *Multi) serveAPI(w http.ResponseWriter, r *http.Request) {
	auth, err := wechatpay.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		// Let some books answer: they refuse it the same way.
		m.any().ServeHTTP(w, r)
		return
	}
	a := m.accounts[auth.MchID]
	switch {
	case a == nil:
		m.any().writeError(w, signError("mchid is not a merchant of this sandbox"), sigOK)
		return
	case !a.partner:
		a.direct.ServeHTTP(w, r)
		return
	}
	m.servePartner(w, r, a, auth.MchID)
}

// any returns some books, to answer what belongs to none.
func (m *Multi) any() *Server { return m.books[m.order[0]] }

// servePartner authenticates a provider's call, then hands it to the books
// of the sub-merchant it names.
func (m *Multi) servePartner(w http.ResponseWriter, r *http.Request, a *account, spMchID string) {
	gate := a.gate
	body, ok := gate.readBody(w, r)
	if !ok {
		return
	}
	p := r.URL.EscapedPath()
	if p == certificatesPath {
		// Certificates belong to the account, not to a sub-merchant.
		forward(gate, w, r, body)
		return
	}
	if p == billDownloadPath {
		// The download link names no merchant; the books that issued the
		// token serve it.
		if !gate.authenticate(w, r, body, false) {
			return
		}
		token := r.URL.Query().Get("token")
		for _, s := range a.subs {
			if s.hasBill(token) {
				forward(s, w, r, body)
				return
			}
		}
		gate.writeError(w, newError(http.StatusBadRequest, "INVALID_REQUEST", "下载链接无效或已过期"), sigOK)
		return
	}
	// Authenticate before looking at the sub-merchant, so an unsigned call
	// learns nothing about the provider's authorisations.
	if !gate.authenticate(w, r, body, true) {
		return
	}
	sub, where, perr := subMchIDOf(r, body)
	if perr != nil {
		gate.writeError(w, perr, sigOK)
		return
	}
	s := a.subs[sub]
	switch {
	case sub == "":
		gate.writeError(w, checkSubMchID(a.gate.cfg.SubMchID, "", where), sigOK)
	case sub == spMchID:
		e := paramError("sub_mchid", "子商户mchid不能与自身mchid相同")
		e.Detail.Location = where
		gate.writeError(w, e, sigOK)
	case s == nil:
		gate.writeError(w, errNoAuth(), sigOK)
	default:
		forward(s, w, r, body)
	}
}

// subMchIDOf reads the sub_mchid a call names: in the JSON body of a POST,
// in the query of a GET. where is its location.
func subMchIDOf(r *http.Request, body []byte) (sub, where string, perr *apiError) {
	if r.Method != http.MethodPost {
		return r.URL.Query().Get("sub_mchid"), "query", nil
	}
	var b struct {
		SubMchID json.RawMessage `json:"sub_mchid"`
	}
	if err := json.Unmarshal(body, &b); err != nil {
		return "", "body", paramError("", "请求体不是合法的JSON")
	}
	if len(b.SubMchID) == 0 {
		return "", "body", nil
	}
	if err := json.Unmarshal(b.SubMchID, &sub); err != nil {
		return "", "body", paramError("/sub_mchid", "字段类型错误")
	}
	return sub, "body", nil
}

// forward hands a request whose body was read to s.
func forward(s *Server, w http.ResponseWriter, r *http.Request, body []byte) {
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	r2.ContentLength = int64(len(body))
	s.ServeHTTP(w, r2)
}

// hasBill says whether s issued a bill download token.
func (s *Server) hasBill(token string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.bills[token]
	return ok
}

// bookName is the admin path segment of a book.
func bookName(mc wechatpay.Merchant) string {
	if mc.SubMchID == "" {
		return mc.MchID
	}
	return mc.MchID + "-" + mc.SubMchID
}

// serveAdmin serves /sandbox/books and /sandbox/books/{book}/...
func (m *Multi) serveAdmin(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == adminPrefix+"refusals" {
		if r.Method != http.MethodGet {
			adminError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" not allowed here")
			return
		}
		out := map[string]int{}
		for status, n := range m.Refusals() {
			out[strconv.Itoa(status)] = n
		}
		adminJSON(w, http.StatusOK, out)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), adminPrefix+"books")
	if !ok {
		adminError(w, http.StatusNotFound, "NOT_FOUND", "admin routes are per book: /sandbox/books/{mchid}[-{sub_mchid}]/...")
		return
	}
	if rest == "" || rest == "/" {
		if r.Method != http.MethodGet {
			adminError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", r.Method+" not allowed here")
			return
		}
		type book struct {
			Name     string `json:"name"`
			MchID    string `json:"mchid"`
			SubMchID string `json:"sub_mchid,omitempty"`
		}
		out := []book{}
		for _, mc := range m.order {
			out = append(out, book{bookName(mc), mc.MchID, mc.SubMchID})
		}
		adminJSON(w, http.StatusOK, out)
		return
	}
	name, tail, _ := strings.Cut(strings.TrimPrefix(rest, "/"), "/")
	if name, err := url.PathUnescape(name); err == nil {
		for _, mc := range m.order {
			if bookName(mc) == name {
				path, err := url.PathUnescape(adminPrefix + tail)
				if err != nil {
					break
				}
				r2 := r.Clone(r.Context())
				r2.URL.Path, r2.URL.RawPath = path, adminPrefix+tail
				m.books[mc].handleAdmin(w, r2)
				return
			}
		}
	}
	adminError(w, http.StatusNotFound, "NOT_FOUND", "no such book")
}
