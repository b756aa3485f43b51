package wechatpay

import (
	"crypto/rsa"
	"fmt"
	"strconv"
	"strings"
)

// maxAuthorizationLen bounds the header ParseAuthorization accepts; a real
// one is about 500 bytes.
const maxAuthorizationLen = 4096

// Authorization is a parsed WECHATPAY2-SHA256-RSA2048 request credential.
type Authorization struct {
	MchID     string // mchid
	Nonce     string // nonce_str
	Timestamp int64  // timestamp, Unix seconds
	SerialNo  string // serial_no: the merchant API certificate serial
	Signature string // signature, base64
}

// String formats the header value in the field order of WeChat Pay's Go SDK:
// mchid, nonce_str, timestamp, serial_no, signature. WeChat Pay accepts any
// order.
func (a Authorization) String() string {
	return formatAuthorization(Scheme, a.MchID, a.Nonce, a.Timestamp, a.SerialNo, a.Signature)
}

func formatAuthorization(scheme, mchid, nonce string, ts int64, serial, sig string) string {
	return scheme + ` mchid="` + mchid + `",nonce_str="` + nonce + `",timestamp="` +
		strconv.FormatInt(ts, 10) + `",serial_no="` + serial + `",signature="` + sig + `"`
}

// ParseAuthorization parses an Authorization header value as a merchant
// sends it: the scheme WECHATPAY2-SHA256-RSA2048, one space, then the five
// parameters mchid, nonce_str, timestamp, serial_no and signature as
// key="value" pairs separated by commas, in any order. Spaces around pairs
// are tolerated; unknown parameters are ignored for forward compatibility.
//
// On error the zero Authorization is returned. Errors wrap
// ErrBadAuthorization: another scheme, a header over 4096 bytes,
// a missing, duplicated, unquoted or empty parameter, a value containing a
// quote, or a timestamp that is not a canonical positive decimal.
func ParseAuthorization(header string) (Authorization, error) {
	a, err := parseAuthorization(header)
	if err != nil {
		return Authorization{}, err
	}
	return a, nil
}

func parseAuthorization(header string) (Authorization, error) {
	var a Authorization
	if len(header) > maxAuthorizationLen {
		return a, fmt.Errorf("%w: header is %d bytes", ErrBadAuthorization, len(header))
	}
	scheme, params, ok := strings.Cut(header, " ")
	if !ok || scheme != Scheme {
		return a, fmt.Errorf("%w: scheme is not %s", ErrBadAuthorization, Scheme)
	}
	var ts string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(params, ",") {
		key, val, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return a, fmt.Errorf("%w: parameter without '='", ErrBadAuthorization)
		}
		if len(val) < 2 || val[0] != '"' || val[len(val)-1] != '"' {
			return a, fmt.Errorf("%w: parameter %q is not quoted", ErrBadAuthorization, limit(key, 20))
		}
		val = val[1 : len(val)-1]
		if val == "" || strings.ContainsRune(val, '"') {
			return a, fmt.Errorf("%w: parameter %q is empty or has a quote inside", ErrBadAuthorization, limit(key, 20))
		}
		var dst *string
		switch key {
		case "mchid":
			dst = &a.MchID
		case "nonce_str":
			dst = &a.Nonce
		case "timestamp":
			dst = &ts
		case "serial_no":
			dst = &a.SerialNo
		case "signature":
			dst = &a.Signature
		default:
			continue
		}
		if seen[key] {
			return a, fmt.Errorf("%w: duplicate parameter %s", ErrBadAuthorization, key)
		}
		seen[key] = true
		*dst = val
	}
	for _, k := range []string{"mchid", "nonce_str", "timestamp", "serial_no", "signature"} {
		if !seen[k] {
			return a, fmt.Errorf("%w: missing parameter %s", ErrBadAuthorization, k)
		}
	}
	// Canonical only, so that formatting the parsed value reproduces the
	// signed bytes exactly.
	n, err := parseTimestamp(ts)
	if err != nil {
		return a, fmt.Errorf("%w: timestamp is not a canonical positive decimal", ErrBadAuthorization)
	}
	a.Timestamp = n
	return a, nil
}

// VerifyAuthorization checks that auth's signature, made with the key
// matching pub, covers RequestMessage(method, urlPathAndQuery,
// auth.Timestamp, auth.Nonce, body). It does not check freshness (use
// CheckTimestamp) nor that auth.MchID and auth.SerialNo belong to pub: the
// caller chose pub by them.
//
// Errors wrap ErrInvalidKey (nil pub), ErrProbe, or ErrBadSignature.
func VerifyAuthorization(pub *rsa.PublicKey, auth Authorization, method, urlPathAndQuery string, body []byte) error {
	return VerifyMessage(pub, RequestMessage(method, urlPathAndQuery, auth.Timestamp, auth.Nonce, body), auth.Signature)
}

// parseTimestamp parses a canonical positive decimal: digits only, no sign,
// no leading zero, fits in int64.
func parseTimestamp(s string) (int64, error) {
	if s == "" || len(s) > 18 || s[0] == '0' {
		return 0, ErrInvalidArgument
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, ErrInvalidArgument
		}
	}
	return strconv.ParseInt(s, 10, 64)
}
