package reservation

import (
	"regexp"
	"slices"
	"time"
)

// Paying out an ABNORMAL refund (WeChat Pay's 发起异常退款, PARTNER.md §2):
// WeChat could not return the money to the user's original account, and an
// operator tells it where to send it instead, the user's bank card or the
// merchant's bank account. The money is already held by the refund (ABNORMAL
// holds), so applying moves nothing between refunded and in flight: the
// refund goes back to PROCESSING, holding the same amount, and follows
// WeChat's answer, queries and notifications like any other.
//
// The card number and the payee's name arrive here already encrypted
// (RSA-OAEP for WeChat Pay's key, by the protocol adapter); the core
// journals only the ciphertext and the serial of the key it is for.

// Destinations WeChat Pay accepts (ApplyAbnormal.Type).
const (
	AbnormalUserBankCard     = "USER_BANK_CARD"     // 退款到用户银行卡
	AbnormalMerchantBankCard = "MERCHANT_BANK_CARD" // 退款至交易商户银行账户
)

// TypeAbnormalApplied is the event type name, stable forever.
const TypeAbnormalApplied = "refund.abnormal_applied"

// Limits of the apply-abnormal-refund fields (PARTNER.md §2.2).
const (
	maxEncryptedLen = 1024
	maxKeySerialLen = 64
)

// bankTypes are the debit cards WeChat Pay pays an abnormal refund to.
var bankTypes = map[string]bool{
	"CMB_DEBIT": true, "COMM_DEBIT": true, "ABC_DEBIT": true, "CCB_DEBIT": true, "ICBC_DEBIT": true,
	"BOC_DEBIT": true, "PAB_DEBIT": true, "SPDB_DEBIT": true, "CITIC_DEBIT": true, "CEB_DEBIT": true,
	"CMBC_DEBIT": true, "CIB_DEBIT": true, "GDB_DEBIT": true, "PSBC_DEBIT": true, "NBCB_DEBIT": true,
}

// ValidBankType reports whether WeChat Pay pays abnormal refunds to cards
// of bank type t.
func ValidBankType(t string) bool { return bankTypes[t] }

// BankTypes lists the bank types ValidBankType accepts, sorted: the
// console offers them as a choice.
func BankTypes() []string {
	out := make([]string, 0, len(bankTypes))
	for t := range bankTypes {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

var (
	base64RE    = regexp.MustCompile(`^[A-Za-z0-9+/]+={0,2}$`)
	keySerialRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)
)

// ApplyAbnormal asks WeChat Pay to pay an ABNORMAL refund out to another
// account (an operator action). For USER_BANK_CARD, BankType names the bank
// and EncryptedAccount and EncryptedName are the card number and the
// payee's name encrypted for the WeChat Pay key KeySerial names; for
// MERCHANT_BANK_CARD all four are empty.
type ApplyAbnormal struct {
	RefundNo         string
	Type             string
	BankType         string `json:",omitempty"`
	EncryptedAccount string `json:",omitempty"`
	EncryptedName    string `json:",omitempty"`
	KeySerial        string `json:",omitempty"`
}

func (ApplyAbnormal) command() {}

// AbnormalApplied: an operator asked WeChat Pay to pay the ABNORMAL refund
// out to another account; the call follows the append. The refund is
// PROCESSING again (holding the same amount) and DueAt is when to query it
// if no answer comes. The bank fields are ciphertext only.
type AbnormalApplied struct {
	RefundNo         string    `json:"refund_no"`
	Type             string    `json:"type"`
	BankType         string    `json:"bank_type,omitempty"`
	EncryptedAccount string    `json:"encrypted_bank_account,omitempty"`
	EncryptedName    string    `json:"encrypted_real_name,omitempty"`
	KeySerial        string    `json:"key_serial,omitempty"`
	DueAt            time.Time `json:"due_at"`
}

// EventType implements EventData.
func (AbnormalApplied) EventType() string { return TypeAbnormalApplied }

// AbnormalApplication is what the provider call of an AbnormalApplied
// sends: the destination, and WeChat's refund id (the call's path).
type AbnormalApplication struct {
	RefundID         string
	Type             string
	BankType         string
	EncryptedAccount string
	EncryptedName    string
	KeySerial        string
}

// Application is the provider call d justifies on refund r.
func (d AbnormalApplied) Application(providerID string) AbnormalApplication {
	return AbnormalApplication{RefundID: providerID, Type: d.Type, BankType: d.BankType,
		EncryptedAccount: d.EncryptedAccount, EncryptedName: d.EncryptedName, KeySerial: d.KeySerial}
}

func validateApplyAbnormal(c ApplyAbnormal) error {
	cipher := func(s string) bool { return len(s) <= maxEncryptedLen && base64RE.MatchString(s) }
	switch c.Type {
	case AbnormalUserBankCard:
		switch {
		case !ValidBankType(c.BankType):
			return invalid("bank_type", "must be one of the debit cards WeChat Pay pays abnormal refunds to (e.g. ICBC_DEBIT)")
		case !cipher(c.EncryptedAccount):
			return invalid("bank_account", "is required, encrypted")
		case !cipher(c.EncryptedName):
			return invalid("real_name", "is required, encrypted")
		case len(c.KeySerial) > maxKeySerialLen || !keySerialRE.MatchString(c.KeySerial):
			return invalid("key_serial", "must name the WeChat Pay key the fields are encrypted for")
		}
	case AbnormalMerchantBankCard:
		if c.BankType != "" || c.EncryptedAccount != "" || c.EncryptedName != "" || c.KeySerial != "" {
			return invalid("type", "MERCHANT_BANK_CARD takes no bank_type, bank_account or real_name")
		}
	default:
		return invalid("type", "must be USER_BANK_CARD or MERCHANT_BANK_CARD")
	}
	return nil
}

func decideApplyAbnormal(s *State, c ApplyAbnormal, env Env) ([]EventData, error) {
	r, err := refundOf(s, c.RefundNo)
	if err != nil {
		return nil, err
	}
	if err := validateApplyAbnormal(c); err != nil {
		return nil, err
	}
	if r.State != Abnormal {
		if r.AbnormalType != "" {
			return nil, nil // applied already: the current state answers
		}
		return nil, withMessage(ErrInvalidState, "only an ABNORMAL refund can be paid out to another account")
	}
	if r.ProviderID == "" {
		return nil, withMessage(ErrInvalidState, "WeChat Pay's refund id of this refund is not known yet; query it first")
	}
	if env.Unconfigured {
		return nil, ErrMerchantNotConfigured
	}
	return []EventData{AbnormalApplied{RefundNo: r.No, Type: c.Type, BankType: c.BankType,
		EncryptedAccount: c.EncryptedAccount, EncryptedName: c.EncryptedName, KeySerial: c.KeySerial,
		DueAt: env.Now.Add(env.Policy.recheckAfter())}}, nil
}

func applyAbnormalApplied(s *State, e Event, d AbnormalApplied) {
	if r := s.Refund(d.RefundNo); r != nil {
		r.State, r.AbnormalType, r.DueAt, r.Retry, r.UpdatedAt = Processing, d.Type, d.DueAt, false, e.At
		r.Code, r.Message = "", ""
	}
}
