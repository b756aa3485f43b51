package sandbox

import (
	"crypto/rsa"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

// Config configures a Server. The keys are the sandbox's own; Keys.Config
// fills them from GenerateKeys.
type Config struct {
	// MchID is the merchant id served; requests signed for another one are
	// refused with SIGN_ERROR. With SubMchID it is the service provider's
	// sp_mchid, and the keys below are the provider's. Required.
	MchID string
	// SubMchID makes the Server the books of one sub-merchant (特约商户) of
	// the service provider MchID: every refund call must name it
	// (sub_mchid in the body, ?sub_mchid= on queries and bills), and
	// notifications carry sp_mchid and sub_mchid. Empty means a direct
	// merchant, which must not send sub_mchid. Multi serves several such
	// books behind one address.
	SubMchID string
	// MerchantSerial is the merchant API certificate serial that the
	// Authorization serial_no must name. Required.
	MerchantSerial string
	// MerchantPublicKey verifies the merchant's request signatures. Required.
	MerchantPublicKey *rsa.PublicKey

	// PlatformKey signs responses and notifications. Required.
	PlatformKey *rsa.PrivateKey
	// PublicKeyID is sent in Wechatpay-Serial, like a WeChat Pay public key
	// id "PUB_KEY_ID_...". Required.
	PublicKeyID string
	// CertificateMode makes the account one on platform certificates: a
	// certificate over PlatformKey (StablePlatformCertificate) is served by
	// GET /v3/certificates, encrypted with the APIv3 key, and its serial
	// signs responses and notifications instead of PublicKeyID (which
	// SignWith can switch to). Without it /v3/certificates answers 404
	// RESOURCE_NOT_EXISTS, as for a merchant on public keys only, until
	// RotateCertificate issues one.
	CertificateMode bool
	// keyring, when set, is shared with the other books of the account
	// (Multi); nil means New builds one.
	keyring *keyring

	// APIv3Key encrypts v3 notifications; exactly 32 bytes. Required.
	APIv3Key []byte
	// APIv2Key encrypts the req_info of v2 notifications. Empty means no v2
	// notifications are sent.
	APIv2Key []byte
	// NotifyURLV2 receives v2 XML notifications for every refund reaching a
	// final state. Empty means none; setting it requires APIv2Key.
	NotifyURLV2 string
	// NotifyURL receives v3 notifications of refunds created without
	// notify_url, like the callback configured in the merchant platform.
	// Empty means such refunds are not notified.
	NotifyURL string
	// AppID is written in v2 notifications and bills. Empty means a fixed
	// fake appid derived from MchID.
	AppID string
	// BaseURL ("http://host:port") prefixes bill download URLs. Empty means
	// the scheme and Host of the bill request.
	BaseURL string

	// TimeFactor scales the notification retry schedule and ProcessingDelay
	// (tests use e.g. 0.001). Zero means 1.
	TimeFactor float64
	// ProcessingDelay is the time from acceptance to the refund's outcome,
	// before scaling. Zero means the outcome is reached during the create
	// call (its response still says PROCESSING).
	ProcessingDelay time.Duration
	// MaxSkew is the allowed difference between a request's Authorization
	// timestamp and Now. Zero means wechatpay.DefaultMaxSkew.
	MaxSkew time.Duration

	// Now is the clock for timestamps, signatures and bill dates. Nil means
	// time.Now. Delays and retries always run on real timers.
	Now func() time.Time
	// Logger receives debug and warning logs. Nil means discard.
	Logger *slog.Logger
	// HTTPClient sends notifications. Nil means a client with WeChat Pay's
	// 5-second answer limit as its timeout.
	HTTPClient *http.Client

	// DisableAdmin turns off the unauthenticated /sandbox/ routes. Zero
	// means they are served.
	DisableAdmin bool

	// StateFile keeps the books (orders, accepted refunds, submitted body
	// hashes, the id sequence) in this file, so a restarted sandbox still
	// knows every refund it accepted. New loads it (a missing file means
	// empty books) and every change that matters for money is written to
	// it, atomically, before the call that caused it is answered. Its
	// directory must exist. One Server at a time per file. Empty means the
	// books live in memory only.
	StateFile string
	// MinRefundSpacing refuses a new refund (a new out_refund_no) on an
	// order whose previous refund was accepted less than this long ago,
	// with 429 FREQUENCY_LIMITED, as WeChat Pay requires one minute between
	// refunds of one order. It is measured on Now and not scaled by
	// TimeFactor. Zero means the rule is not enforced.
	MinRefundSpacing time.Duration
	// Creates counts create requests per second and refuses those beyond
	// its limit with 429 FREQUENCY_LIMITED, as WeChat Pay limits refund
	// creates per merchant id (PARTNER.md §4: 150/s). Every authenticated
	// create counts, refused or not, as WeChat counts requests. The Servers
	// of one account (a service provider's sub-merchants) share one. Nil
	// means a counter of this Server's own without a limit; CreateRate
	// reports what was seen either way.
	Creates *CreateCounter
}

// notifyTimeout is how long WeChat Pay waits for a notification answer.
const notifyTimeout = 5 * time.Second

func (c *Config) validate() error {
	var bad []string
	if !headerSafe(c.MchID) {
		bad = append(bad, "MchID is empty or not header-safe")
	}
	if c.SubMchID != "" && (!headerSafe(c.SubMchID) || len(c.SubMchID) > 32 || c.SubMchID == c.MchID) {
		bad = append(bad, "SubMchID is not 1..32 header-safe bytes or is MchID")
	}
	if !headerSafe(c.MerchantSerial) {
		bad = append(bad, "MerchantSerial is empty or not header-safe")
	}
	if c.MerchantPublicKey == nil {
		bad = append(bad, "MerchantPublicKey is nil")
	}
	if c.PlatformKey == nil {
		bad = append(bad, "PlatformKey is nil")
	}
	if !headerSafe(c.PublicKeyID) {
		bad = append(bad, "PublicKeyID is empty or not header-safe")
	}
	if len(c.APIv3Key) != wechatpay.APIv3KeySize {
		bad = append(bad, fmt.Sprintf("APIv3Key is %d bytes, want %d", len(c.APIv3Key), wechatpay.APIv3KeySize))
	}
	if c.NotifyURLV2 != "" && len(c.APIv2Key) == 0 {
		bad = append(bad, "NotifyURLV2 is set without APIv2Key")
	}
	for _, u := range [...]struct{ name, v string }{{"NotifyURL", c.NotifyURL}, {"NotifyURLV2", c.NotifyURLV2}, {"BaseURL", c.BaseURL}} {
		if u.v != "" && !httpURL(u.v) {
			bad = append(bad, u.name+" is not an absolute http(s) URL")
		}
	}
	if c.TimeFactor < 0 || math.IsNaN(c.TimeFactor) || math.IsInf(c.TimeFactor, 0) {
		bad = append(bad, "TimeFactor must be a finite number >= 0")
	}
	if c.ProcessingDelay < 0 {
		bad = append(bad, "ProcessingDelay is negative")
	}
	if c.MaxSkew < 0 {
		bad = append(bad, "MaxSkew is negative")
	}
	if c.MinRefundSpacing < 0 {
		bad = append(bad, "MinRefundSpacing is negative")
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(bad, "; "))
	}
	if c.TimeFactor == 0 {
		c.TimeFactor = 1
	}
	if c.MaxSkew == 0 {
		c.MaxSkew = wechatpay.DefaultMaxSkew
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.HTTPClient == nil {
		// Its own transport, so Close can drop its idle connections without
		// touching http.DefaultTransport.
		c.HTTPClient = &http.Client{Timeout: notifyTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.AppID == "" {
		sum := sha256.Sum256([]byte(c.MchID))
		c.AppID = "wx" + hex.EncodeToString(sum[:8])
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	return nil
}

// scale multiplies d by the time factor.
func (c *Config) scale(d time.Duration) time.Duration {
	return time.Duration(float64(d) * c.TimeFactor)
}

// httpURL reports whether s is an absolute http or https URL with a host.
func httpURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// headerSafe mirrors what wechatpay accepts inside a signed header value.
func headerSafe(v string) bool {
	if v == "" || len(v) > 256 {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == ',' || c == '\\' {
			return false
		}
	}
	return true
}
