package sandbox

import (
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Credential admin routes (see handleAdmin), so tests can drive every
// switchover of PARTNER.md §3 against a running sandbox:
//
//	GET    /sandbox/credentials                        -> CredentialsInfo
//	POST   /sandbox/credentials/certificates           {"valid_for":"24h","sign":false}
//	                                                   -> 201 {"serial","not_after","certificate":PEM}
//	DELETE /sandbox/credentials/certificates/{serial}  -> 204 (retired: no longer served or used)
//	POST   /sandbox/credentials/public-keys            {"sign":true} -> 201 {"id","public_key":PEM}
//	POST   /sandbox/credentials/merchant-keys        {"serial","public_key":PEM} -> 204 (a merchant API certificate accepted)
//	DELETE /sandbox/credentials/merchant-keys/{serial} -> 204 (revoked: requests signed with it are refused)
//	POST   /sandbox/credentials/signing                {"id":"serial or PUB_KEY_ID_..."} -> 204
//	POST   /sandbox/credentials/apiv3-key              {"key":"32 characters","at":"RFC 3339, optional"} -> 204
func (s *Server) adminCredentials(w http.ResponseWriter, r *http.Request, rest string) {
	sub := strings.TrimPrefix(strings.TrimPrefix(rest, "credentials"), "/")
	switch {
	case r.Method == http.MethodGet && sub == "":
		adminJSON(w, http.StatusOK, s.Credentials())
	case r.Method == http.MethodPost && sub == "certificates":
		var in struct {
			ValidFor string `json:"valid_for"`
			Sign     bool   `json:"sign"`
		}
		if !decodeAdmin(w, r, &in) {
			return
		}
		var d time.Duration
		if in.ValidFor != "" {
			var err error
			if d, err = time.ParseDuration(in.ValidFor); err != nil || d <= 0 {
				adminError(w, http.StatusBadRequest, "PARAM_ERROR", "valid_for is not a positive Go duration such as 24h")
				return
			}
		}
		cert, err := s.RotateCertificate(d, in.Sign)
		if err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		adminJSON(w, http.StatusCreated, struct {
			Serial      string    `json:"serial"`
			NotAfter    time.Time `json:"not_after"`
			Certificate string    `json:"certificate"`
		}{wechatpay.CertificateSerial(cert), cert.NotAfter, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw}))})
	case r.Method == http.MethodDelete && strings.HasPrefix(sub, "certificates/"):
		serial, err := url.PathUnescape(strings.TrimPrefix(sub, "certificates/"))
		if err != nil {
			adminError(w, http.StatusNotFound, "NOT_FOUND", "bad serial")
			return
		}
		if err := s.RetireCertificate(serial); err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && sub == "public-keys":
		var in struct {
			Sign bool `json:"sign"`
		}
		if !decodeAdmin(w, r, &in) {
			return
		}
		id, pub, err := s.AddPublicKey(in.Sign)
		if err != nil {
			adminError(w, http.StatusInternalServerError, "SYSTEM_ERROR", err.Error())
			return
		}
		der, err := x509.MarshalPKIXPublicKey(pub)
		if err != nil {
			adminError(w, http.StatusInternalServerError, "SYSTEM_ERROR", err.Error())
			return
		}
		adminJSON(w, http.StatusCreated, struct {
			ID        string `json:"id"`
			PublicKey string `json:"public_key"`
		}{id, string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))})
	case r.Method == http.MethodPost && sub == "merchant-keys":
		var in struct {
			Serial    string `json:"serial"`
			PublicKey string `json:"public_key"` // PEM
		}
		if !decodeAdmin(w, r, &in) {
			return
		}
		pub, err := wechatpay.ParsePublicKey([]byte(in.PublicKey))
		if err == nil {
			err = s.AddMerchantKey(in.Serial, pub)
		}
		if err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodDelete && strings.HasPrefix(sub, "merchant-keys/"):
		serial, err := url.PathUnescape(strings.TrimPrefix(sub, "merchant-keys/"))
		if err == nil {
			err = s.RevokeMerchantKey(serial)
		}
		if err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && sub == "signing":
		var in struct {
			ID string `json:"id"`
		}
		if !decodeAdmin(w, r, &in) {
			return
		}
		if err := s.SignWith(in.ID); err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && sub == "apiv3-key":
		var in struct {
			Key string `json:"key"`
			At  string `json:"at"`
		}
		if !decodeAdmin(w, r, &in) {
			return
		}
		var at time.Time
		if in.At != "" {
			var err error
			if at, err = time.Parse(time.RFC3339, in.At); err != nil {
				adminError(w, http.StatusBadRequest, "PARAM_ERROR", "at is not an RFC 3339 time")
				return
			}
		}
		if err := s.ChangeAPIv3Key([]byte(in.Key), at); err != nil {
			adminError(w, http.StatusBadRequest, "PARAM_ERROR", err.Error())
			return
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		adminError(w, http.StatusNotFound, "NOT_FOUND", "no such credentials route")
	}
}
