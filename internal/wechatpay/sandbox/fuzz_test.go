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
	f.Add([]byte(`{"sub_mchid":"1900000301","out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":1,"total":2,"currency":"CNY"}}`))
	f.Add([]byte(`{"sub_mchid":"1900000309","out_trade_no":"O1","out_refund_no":"R1","amount":{"refund":1,"total":2,"currency":"CNY"}}`))
	f.Add([]byte(`{"sub_mchid":1900000301}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		// As a direct merchant's books, and as sub-merchant sub's.
		const sub = "1900000301"
		for _, want := range []string{"", sub} {
			req, perr := parseCreate(body, want)
			if perr != nil {
				if !(perr.status == 400 && perr.Code == "PARAM_ERROR" || want != "" && perr.status == 403 && perr.Code == "NO_AUTH") {
					t.Fatalf("parse error %d %s", perr.status, perr.Code)
				}
				continue
			}
			if req.OutTradeNo == "" && req.TransactionID == "" || !outRefundNoRE.MatchString(req.OutRefundNo) ||
				req.Amount == nil || *req.Amount.Refund <= 0 || *req.Amount.Total <= 0 || req.Amount.Currency != "CNY" ||
				req.SubMchID != want {
				t.Fatalf("accepted an invalid request as books %q: %s", want, body)
			}
		}
		// Multi's router reads the sub_mchid before the books do: it must
		// name what the books then see.
		r, _ := http.NewRequest(http.MethodPost, refundsPath, nil)
		got, where, perr := subMchIDOf(r, body)
		if where != "body" || perr != nil && perr.Code != "PARAM_ERROR" || perr != nil && got != "" {
			t.Fatalf("subMchIDOf: %q %q %+v", got, where, perr)
		}
		if perr == nil && got != "" {
			if req, perr := parseCreate(body, got); perr == nil && req.SubMchID != got {
				t.Fatalf("router read sub_mchid %q, books %q", got, req.SubMchID)
			}
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
