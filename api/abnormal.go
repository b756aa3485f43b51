package api

import (
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/refundd/refundd/internal/reservation"
)

// applyAbnormalRequest is the body of POST .../apply-abnormal. The bank
// account and the name are encrypted here, before the command exists: the
// clear values are never journaled, logged or echoed.
type applyAbnormalRequest struct {
	Type        string `json:"type"`
	BankType    string `json:"bank_type"`
	BankAccount string `json:"bank_account"`
	RealName    string `json:"real_name"`
}

// Limits of the clear values: a card number of 8..30 digits; a name fits
// one RSA-OAEP block (214 bytes, PARTNER.md §2.3).
const (
	minCardDigits = 8
	maxCardDigits = 30
	maxRealName   = 214
)

func (q applyAbnormalRequest) validate() error {
	switch q.Type {
	case reservation.AbnormalMerchantBankCard:
		for _, f := range []struct{ name, v string }{{"bank_type", q.BankType}, {"bank_account", q.BankAccount}, {"real_name", q.RealName}} {
			if f.v != "" {
				return badRequest(f.name, "is not taken with MERCHANT_BANK_CARD")
			}
		}
		return nil
	case reservation.AbnormalUserBankCard:
	case "":
		return badRequest("type", "is required: USER_BANK_CARD or MERCHANT_BANK_CARD")
	default:
		return badRequest("type", "must be USER_BANK_CARD or MERCHANT_BANK_CARD")
	}
	switch {
	case !reservation.ValidBankType(q.BankType):
		return badRequest("bank_type", "must be one of the debit cards WeChat Pay pays to (CMB_DEBIT, ICBC_DEBIT, ... NBCB_DEBIT)")
	case !digits(q.BankAccount, minCardDigits, maxCardDigits):
		return badRequest("bank_account", "must be the card number: 8..30 digits")
	case !validName(q.RealName):
		return badRequest("real_name", "must be 1..214 bytes of printable UTF-8")
	}
	return nil
}

func digits(s string, lo, hi int) bool {
	if len(s) < lo || len(s) > hi {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func validName(s string) bool {
	if s == "" || len(s) > maxRealName || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

// applyAbnormal asks WeChat Pay to pay an ABNORMAL refund out to the
// user's bank card or the merchant's bank account (发起异常退款). The
// refund must be visible to the caller and ABNORMAL; it becomes PROCESSING
// and follows WeChat's answer like any other. A repeat answers the
// current state.
func (s *Server) applyAbnormal(w http.ResponseWriter, r *http.Request) {
	vars := pathVars(r)
	var q applyAbnormalRequest
	if err := s.decodeStrict(w, r, &q); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := q.validate(); err != nil {
		s.writeError(w, r, err)
		return
	}
	ctx, cancel := s.ctx(r)
	defer cancel()
	engine := s.engineFor(r)
	// Nothing is encrypted for a refund the caller cannot see: another
	// merchant's is answered as an unknown one.
	st, err := engine.Get(ctx, vars["id"])
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if st.Refund(vars["refund_no"]) == nil {
		s.writeError(w, r, &reservation.Error{Code: reservation.CodeNotFound, Message: "refund not found"})
		return
	}
	cmd := reservation.ApplyAbnormal{RefundNo: vars["refund_no"], Type: q.Type}
	if q.Type == reservation.AbnormalUserBankCard {
		if s.opts.EncryptSensitive == nil {
			s.writeError(w, r, &apiError{code: codeNoEncryption, msg: "this provider cannot encrypt bank details for WeChat Pay"})
			return
		}
		serial, enc, err := s.opts.EncryptSensitive(cmd.RefundNo, q.BankAccount, q.RealName)
		if err != nil || len(enc) != 2 {
			// The error names no value (wechatpay.EncryptSensitive).
			s.log.WarnContext(ctx, "cannot encrypt an abnormal refund's bank details", "refund_no", cmd.RefundNo, "err", err)
			s.writeError(w, r, &apiError{code: codeNoEncryption, msg: "no WeChat Pay key to encrypt the bank details for"})
			return
		}
		cmd.BankType, cmd.EncryptedAccount, cmd.EncryptedName, cmd.KeySerial = q.BankType, enc[0], enc[1], serial
	}
	st, _, err = engine.Execute(ctx, vars["id"], s.principal(r), cmd)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.writeRefund(w, http.StatusOK, st, st.Refund(cmd.RefundNo))
}
