package sandbox

import (
	"net/http"
	"testing"
)

// FuzzParseCreate feeds arbitrary bodies to the create parser: it must
// never panic, and whatever it accepts must satisfy the rules the rest of
// the server relies on.
func FuzzParseCreate(f *testing.F) {
	f.Add([]byte(`{"out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":1,"total":2,"currency":"CNY"}}`))
	f.Add([]byte(`{"transaction_id":"42","out_refund_no":"R|*@","notify_url":"https://a.b/c","amount":{"refund":5,"total":5,"currency":"CNY","from":[{"account":"AVAILABLE","amount":5}]}}`))
	f.Add([]byte(`{"out_trade_no":null}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"amount":{"refund":1e3}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, perr := parseCreate(body, "")
		if perr != nil {
			if perr.status != 400 || perr.Code != "PARAM_ERROR" {
				t.Fatalf("parse error %d %s", perr.status, perr.Code)
			}
			return
		}
		if req.OutTradeNo == "" && req.TransactionID == "" || !outRefundNoRE.MatchString(req.OutRefundNo) ||
			req.Amount == nil || *req.Amount.Refund <= 0 || *req.Amount.Total <= 0 || req.Amount.Currency != "CNY" {
			t.Fatalf("accepted an invalid request: %s", body)
		}
	})
}

// FuzzParseAbnormal feeds arbitrary apply-abnormal-refund bodies to the
// parser: it must never panic, refuse only with PARAM_ERROR, and accept
// only a known type with a valid refund number (and, for USER_BANK_CARD,
// fields that decrypted).
func FuzzParseAbnormal(f *testing.F) {
	k := keys(f)
	cfg := k.Config()
	sb, err := New(cfg)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(sb.Close)
	h := http.Header{"Wechatpay-Serial": {k.PublicKeyID}}
	f.Add([]byte(`{"out_refund_no":"R1","type":"MERCHANT_BANK_CARD"}`))
	f.Add([]byte(`{"out_refund_no":"R1","type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"AAAA","real_name":"AAAA"}`))
	f.Add([]byte(`{"out_refund_no":"R1","type":"MERCHANT_BANK_CARD","extra":{"x":[1,2]}}`))
	f.Add([]byte(`{"type":null}`))
	f.Add([]byte(`"x"`))
	f.Fuzz(func(t *testing.T, body []byte) {
		req, card, perr := sb.parseAbnormal(h, body)
		if perr != nil {
			if perr.status != 400 || perr.Code != "PARAM_ERROR" {
				t.Fatalf("parse error %d %s", perr.status, perr.Code)
			}
			return
		}
		if !outRefundNoRE.MatchString(req.OutRefundNo) ||
			req.Type != abnormalMerchantBank && (req.Type != abnormalUserBankCard || card == "" || req.BankType == "") {
			t.Fatalf("accepted an invalid request: %s", body)
		}
	})
}
