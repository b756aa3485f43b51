package reservation

import (
	"strings"
	"unicode/utf8"
)

// Limits on outside input. They keep every refund number within WeChat's 64
// characters and every sum far from int64 overflow.
const (
	MaxReservationIDLen = 40
	MaxUserIDLen        = 64
	MaxOutTradeNoLen    = 32
	MaxTransactionIDLen = 32
	MaxIdempotencyKey   = 64
	MaxMerchantLen      = 64 // the merchant registry's names fit (internal/merchant)
	MaxReasonBytes      = 80 // WeChat: reason up to 80 bytes
	// MaxAmount is 10^12 fen (10 billion CNY); 99 refunds of it stay far
	// below int64's limit.
	MaxAmount       int64 = 1_000_000_000_000
	maxRefundNumber       = 99
)

// isToken reports whether s is 1..max characters of [0-9A-Za-z_-].
func isToken(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// ValidReservationID reports whether id is an acceptable reservation id.
func ValidReservationID(id string) bool { return isToken(id, MaxReservationIDLen) }

// ValidMerchant reports whether name is an acceptable merchant name. Its
// characters never include '/', which separates it from the order number
// in the out_trade_no claim (OutTradeNoKey).
func ValidMerchant(name string) bool { return isToken(name, MaxMerchantLen) }

// ValidIdempotencyKey reports whether k is an acceptable idempotency key.
func ValidIdempotencyKey(k string) bool { return isToken(k, MaxIdempotencyKey) }

// validText accepts 1..max bytes of valid UTF-8 without control characters.
func validText(s string, max int) bool {
	if len(s) == 0 || len(s) > max || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// validOutTradeNo follows WeChat: letters, digits and _-|* only.
func validOutTradeNo(s string) bool {
	if len(s) == 0 || len(s) > MaxOutTradeNoLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '-' || c == '|' || c == '*') {
			return false
		}
	}
	return true
}

func validDigits(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func validateRegister(c Register) error {
	switch {
	case !ValidReservationID(c.ReservationID):
		return invalid("id", "must be 1..40 characters of [0-9A-Za-z_-]")
	case c.Merchant != "" && !ValidMerchant(c.Merchant):
		return invalid("merchant", "must be 1..64 characters of [0-9A-Za-z_-]")
	case !validText(c.UserID, MaxUserIDLen):
		return invalid("user_id", "must be 1..64 bytes of printable UTF-8")
	case !validOutTradeNo(c.OutTradeNo):
		return invalid("out_trade_no", "must be 1..32 characters of [0-9A-Za-z_-|*]")
	case c.TransactionID != "" && !validDigits(c.TransactionID, MaxTransactionIDLen):
		return invalid("transaction_id", "must be 1..32 digits")
	case c.Amount <= 0 || c.Amount > MaxAmount:
		return invalid("amount", "must be an integer number of fen between 1 and 10^12")
	case c.Currency != "CNY":
		return invalid("currency", `must be "CNY"`)
	case !c.PaidAt.IsZero() && (c.PaidAt.UTC().Year() < 1 || c.PaidAt.UTC().Year() > 9999):
		// Outside these years the time cannot be journaled (RFC 3339).
		return invalid("paid_at", "must be between years 1 and 9999")
	}
	return nil
}

func validateRequestRefund(c RequestRefund) error {
	switch {
	case !ValidIdempotencyKey(c.IdempotencyKey):
		return invalid("idempotency_key", "must be 1..64 characters of [0-9A-Za-z_-]")
	case !validText(c.UserID, MaxUserIDLen):
		return invalid("user_id", "must be 1..64 bytes of printable UTF-8")
	case c.Amount != nil && (*c.Amount <= 0 || *c.Amount > MaxAmount):
		return invalid("amount", "must be an integer number of fen between 1 and 10^12")
	case c.Reason != "" && !validText(c.Reason, MaxReasonBytes):
		return invalid("reason", "must be at most 80 bytes of printable UTF-8")
	case c.ReasonCode != "" && !ValidReasonCode(c.ReasonCode):
		return invalid("reason_code", "must be one of "+strings.Join(ReasonCodes(), ", "))
	}
	return validateMetadata(c.Metadata)
}
