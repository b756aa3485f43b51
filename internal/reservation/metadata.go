package reservation

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/refundd/refundd/internal/jsontext"
)

// Reason codes say why a refund was made, for the merchant's own reports.
// The set is closed so that reports can group on it; the free-text Reason
// (which goes to WeChat Pay) says the rest. A refund requested without one
// has none (requests from before reason codes existed, too).
const (
	ReasonRequestedByCustomer = "requested_by_customer"
	ReasonDuplicate           = "duplicate"
	ReasonFraudulent          = "fraudulent"
	ReasonCanceledByMerchant  = "canceled_by_merchant"
	ReasonServiceNotProvided  = "service_not_provided"
	ReasonOther               = "other"
)

// ReasonCodes returns every reason code, in a fixed order.
func ReasonCodes() []string {
	return []string{ReasonRequestedByCustomer, ReasonDuplicate, ReasonFraudulent,
		ReasonCanceledByMerchant, ReasonServiceNotProvided, ReasonOther}
}

// ValidReasonCode reports whether code is one of ReasonCodes().
func ValidReasonCode(code string) bool { return slices.Contains(ReasonCodes(), code) }

// Limits on a refund's metadata, after Stripe's: enough for a merchant's
// own references, small enough that a refund's event stays small (at most
// 20*(40+500) bytes of text).
const (
	MaxMetadataKeys     = 20
	MaxMetadataKeyLen   = 40  // bytes
	MaxMetadataValueLen = 500 // bytes
)

// MetadataField names the member key of the metadata in errors, as a client
// would write it: metadata["key"].
func MetadataField(key string) string { return "metadata[" + strconv.Quote(key) + "]" }

// validateMetadata checks the limits: at most MaxMetadataKeys keys of 1..40
// bytes and values of 1..500 bytes, all printable UTF-8 (no control
// characters, so exports and logs stay one line per refund). Keys are
// checked in sorted order, so the error named is the same on every run.
func validateMetadata(md map[string]string) error {
	if len(md) > MaxMetadataKeys {
		return invalid("metadata", "at most "+strconv.Itoa(MaxMetadataKeys)+" keys")
	}
	for _, k := range sortedKeys(md) {
		switch {
		case !validText(k, MaxMetadataKeyLen):
			return invalid(MetadataField(k), "key must be 1..40 bytes of printable UTF-8")
		case !validText(md[k], MaxMetadataValueLen):
			return invalid(MetadataField(k), "must be a string of 1..500 bytes of printable UTF-8")
		}
	}
	return nil
}

func sortedKeys(md map[string]string) []string {
	keys := make([]string, 0, len(md))
	for k := range md {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fingerprint is Fingerprint's hash. A request without a reason code and
// metadata hashes exactly as before they existed, so a retry of a request
// journaled by an older refundd is still a replay. Otherwise both follow,
// each string length-prefixed, so no two requests hash the same text.
func fingerprint(c RequestRefund, amount string) string {
	var b strings.Builder
	b.WriteString(c.UserID + "\x00" + amount + "\x00" + c.Reason)
	if c.ReasonCode != "" || len(c.Metadata) > 0 {
		b.WriteString("\x00v2")
		writeLenPrefixed(&b, c.ReasonCode)
		b.WriteString(strconv.Itoa(len(c.Metadata)))
		for _, k := range sortedKeys(c.Metadata) {
			writeLenPrefixed(&b, k)
			writeLenPrefixed(&b, c.Metadata[k])
		}
	}
	h := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(h[:])
}

func writeLenPrefixed(b *strings.Builder, s string) {
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(len(s)))
	b.WriteByte(':')
	b.WriteString(s)
}

// Metadata is a refund's metadata: string keys and values, held as the
// JSON object encoding/json writes for a map[string]string (keys sorted).
// A string rather than a map keeps events and states comparable with ==,
// which the engine and its tests rely on, and never shared and changed.
// The zero Metadata has no keys and is omitted from events.
type Metadata struct{ obj string }

// NewMetadata returns the metadata holding md's keys and values.
func NewMetadata(md map[string]string) Metadata {
	if len(md) == 0 {
		return Metadata{}
	}
	b := []byte{'{'}
	for i, k := range sortedKeys(md) {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsontext.AppendString(b, k)
		b = append(b, ':')
		b = jsontext.AppendString(b, md[k])
	}
	return Metadata{obj: string(append(b, '}'))}
}

// IsZero reports whether m has no keys.
func (m Metadata) IsZero() bool { return m.obj == "" }

// Map returns m's keys and values (nil when it has none), a copy the
// caller may change.
func (m Metadata) Map() map[string]string {
	if m.obj == "" {
		return nil
	}
	var md map[string]string
	if err := json.Unmarshal([]byte(m.obj), &md); err != nil {
		panic("reservation: metadata is not its own JSON: " + err.Error()) // built only by NewMetadata
	}
	return md
}

// AppendJSON appends m as a JSON object ({} when it has no keys).
func (m Metadata) AppendJSON(b []byte) []byte {
	if m.obj == "" {
		return append(b, "{}"...)
	}
	return append(b, m.obj...)
}

// MarshalJSON writes m as the JSON object of its keys and values.
func (m Metadata) MarshalJSON() ([]byte, error) { return m.AppendJSON(nil), nil }

// UnmarshalJSON reads a JSON object of strings (or null, for none).
func (m *Metadata) UnmarshalJSON(b []byte) error {
	var md map[string]string
	if err := json.Unmarshal(b, &md); err != nil {
		return err
	}
	*m = NewMetadata(md)
	return nil
}
