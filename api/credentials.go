package api

import (
	"fmt"
	"net/http"
	"time"
)

// CredentialsView is the body of GET /v1/admin/credentials: per WeChat Pay
// account, which keys refundd holds and where they came from. It never
// carries key material: serials, ids, dates and whether a secret is loaded.
type CredentialsView struct {
	Accounts []AccountCredentials `json:"accounts"`
}

// AccountCredentials describes one account's credentials.
type AccountCredentials struct {
	Account        string `json:"account"`
	MchID          string `json:"mchid"`
	MerchantSerial string `json:"merchant_serial"` // API certificate serial signing requests
	APIv3Key       bool   `json:"apiv3_key"`       // loaded (never shown)
	APIv2Key       bool   `json:"apiv2_key"`
	// Keys are the WeChat Pay keys answers and notifications are verified
	// with.
	Keys []CredentialKey `json:"keys"`
	// Download is the platform certificate download state; absent unless
	// the account downloads its certificates.
	Download *CertificateDownloadView `json:"download,omitempty"`
}

// Kinds and sources of CredentialKey.
const (
	KeyKindPublicKey   = "public_key"
	KeyKindCertificate = "platform_certificate"
	KeySourceFile      = "file"     // a configured file
	KeySourceDownload  = "download" // downloaded from WeChat Pay by this process
	KeySourceStore     = "store"    // downloaded earlier, read from the data directory
	KeySourceSandbox   = "sandbox"  // the built-in sandbox's own key
)

// CredentialKey is one WeChat Pay public key or platform certificate.
type CredentialKey struct {
	Serial    string     `json:"serial"` // certificate serial or PUB_KEY_ID_...
	Kind      string     `json:"kind"`
	Source    string     `json:"source"`
	NotBefore *time.Time `json:"not_before,omitempty"` // certificates only
	NotAfter  *time.Time `json:"not_after,omitempty"`
}

// CertificateDownloadView is an account's certificate download history
// since start.
type CertificateDownloadView struct {
	Refresh             string    `json:"refresh"` // schedule, a Go duration
	LastAttempt         time.Time `json:"last_attempt,omitzero"`
	LastSuccess         time.Time `json:"last_success,omitzero"`
	LastError           string    `json:"last_error,omitempty"`
	Downloads           int64     `json:"downloads"`
	Failures            int64     `json:"failures"`
	ConsecutiveFailures int64     `json:"consecutive_failures"`
	OnDemand            int64     `json:"on_demand"`         // triggered by an unknown serial
	OnDemandDropped     int64     `json:"on_demand_dropped"` // unknown serials within the one-minute limit
}

// credentialsRoutes registers GET /v1/admin/credentials.
func (s *Server) credentialsRoutes() {
	s.router.HandleFunc("/v1/admin/credentials", s.adminCredentials).Methods(http.MethodGet)
	s.router.HandleFunc("/v1/admin/credentials/reload", s.reloadCredentials).Methods(http.MethodPost)
}

// reloadCredentials serves POST /v1/admin/credentials/reload: reread every
// credential file and swap them in only if all are good (as SIGHUP does),
// then answer the credentials held.
func (s *Server) reloadCredentials(w http.ResponseWriter, r *http.Request) {
	if s.opts.ReloadCredentials == nil {
		s.writeError(w, r, fmt.Errorf("%w: this provider reads no credential files", ErrRestartRequired))
		return
	}
	if err := s.opts.ReloadCredentials(r.Context()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.adminCredentials(w, r)
}

// adminCredentials serves GET /v1/admin/credentials (operators only:
// serials and dates are not secret, but they map the attack surface).
func (s *Server) adminCredentials(w http.ResponseWriter, r *http.Request) {
	v := CredentialsView{Accounts: []AccountCredentials{}}
	if s.opts.Credentials != nil {
		v = s.opts.Credentials()
		if v.Accounts == nil {
			v.Accounts = []AccountCredentials{}
		}
	}
	writeJSON(w, http.StatusOK, v)
}
