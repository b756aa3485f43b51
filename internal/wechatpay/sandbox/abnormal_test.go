package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"
)

func abnormalPath(refundID string) string { return refundsPath + "/" + refundID + abnormalSuffix }

func abnormalBody(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// encryptSensitive encrypts a field as a merchant does: RSA-OAEP SHA-1
// with the WeChat Pay public key.
func encryptSensitive(t *testing.T, k Keys, s string) string {
	t.Helper()
	ct, err := rsa.EncryptOAEP(sha1.New(), rand.Reader, &k.PlatformKey.PublicKey, []byte(s), nil)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(ct)
}

// abnormalFixture has refund R1 of 600 on order O1 (1000) in ABNORMAL.
func abnormalFixture(t *testing.T, edit func(*Config)) (*fixture, *receiver, refundResp) {
	t.Helper()
	rc := newReceiver(t, keys(t), nil)
	f := newFixture(t, edit)
	f.order(t, "O1", 1000)
	if err := f.sb.SetFault(Fault{Kind: FaultOutcome, OutRefundNo: "R1", Outcome: "ABNORMAL"}); err != nil {
		t.Fatal(err)
	}
	created := decodeRefund(t, f.m.create("O1", "R1", 600, 1000, rc.url()))
	eventually(t, 5*time.Second, "R1 ABNORMAL and notified", func() bool {
		rec, _ := f.sb.Refund("R1")
		return rec.Status == "ABNORMAL" && rc.count() == 1
	})
	return f, rc, created
}

func TestApplyAbnormal_MerchantBankCard(t *testing.T) {
	f, rc, created := abnormalFixture(t, func(c *Config) { c.ProcessingDelay = 150 * time.Millisecond })
	body := abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "MERCHANT_BANK_CARD", "unknown_field": 1})
	r := f.m.must("POST", abnormalPath(created.RefundID), body)
	got := decodeRefund(t, r)
	if got.Status != "PROCESSING" || got.RefundID != created.RefundID || got.OutRefundNo != "R1" || got.Amount.Refund != 600 {
		t.Fatalf("apply answer %+v", got)
	}
	var raw struct {
		Channel string `json:"channel"`
		Account string `json:"user_received_account"`
	}
	json.Unmarshal(r.body, &raw)
	if raw.Channel != "OTHER_BANKCARD" || raw.Account != "商户结算银行账户" {
		t.Fatalf("channel %q account %q", raw.Channel, raw.Account)
	}
	eventually(t, 5*time.Second, "SUCCESS notified", func() bool { return rc.count() == 2 })
	n := rc.all()[1]
	if n.err != nil || n.res.RefundStatus != "SUCCESS" || n.res.RefundID != created.RefundID || n.res.SuccessTime == "" ||
		n.res.UserReceivedAccount != "商户结算银行账户" {
		t.Fatalf("notification %+v %v", n.res, n.err)
	}
	if q := decodeRefund(t, f.m.query("R1")); q.Status != "SUCCESS" || q.SuccessTime == "" {
		t.Fatalf("query %+v", q)
	}
	rec, _ := f.sb.Refund("R1")
	if rec.AbnormalType != "MERCHANT_BANK_CARD" || f.sb.Refunded("O1") != 600 {
		t.Fatalf("record %+v refunded %d", rec, f.sb.Refunded("O1"))
	}
	// Not ABNORMAL any more: a repeated call is refused and changes nothing.
	if r := f.m.must("POST", abnormalPath(created.RefundID), body); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("second apply: %d %s", r.status, r.body)
	}
	if rec, _ := f.sb.Refund("R1"); rec.Status != "SUCCESS" {
		t.Fatalf("status %s after a refused apply", rec.Status)
	}
}

func TestApplyAbnormal_UserBankCard(t *testing.T) {
	f, _, created := abnormalFixture(t, nil)
	k := f.keys
	path := abnormalPath(created.RefundID)
	fields := func(account, name string) []byte {
		return abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "USER_BANK_CARD", "bank_type": "ICBC_DEBIT",
			"bank_account": account, "real_name": name})
	}
	serial := map[string]string{"Wechatpay-Serial": k.PublicKeyID}
	tests := []struct {
		name   string
		body   []byte
		header map[string]string
		code   string
		field  string
	}{
		{"plaintext card", fields("6222020000001234", encryptSensitive(t, k, "张三")), serial, "PARAM_ERROR", "/bank_account"},
		{"plaintext name", fields(encryptSensitive(t, k, "6222020000001234"), "张三"), serial, "PARAM_ERROR", "/real_name"},
		{"no serial header", fields(encryptSensitive(t, k, "6222020000001234"), encryptSensitive(t, k, "张三")), nil, "PARAM_ERROR", "Wechatpay-Serial"},
		{"no bank type", abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "USER_BANK_CARD"}), serial, "PARAM_ERROR", "/bank_type"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := f.m.send("POST", path, tt.body, reqOpts{header: tt.header})
			if err != nil {
				t.Fatal(err)
			}
			var e apiError
			json.Unmarshal(r.body, &e)
			if r.status != 400 || e.Code != tt.code || e.Detail == nil || e.Detail.Field != tt.field || r.verifyErr != nil {
				t.Fatalf("got %d %s (verify %v), want %s on %s", r.status, r.body, r.verifyErr, tt.code, tt.field)
			}
			if rec, _ := f.sb.Refund("R1"); rec.Status != "ABNORMAL" {
				t.Fatalf("refused call changed the status to %s", rec.Status)
			}
		})
	}
	r, err := f.m.send("POST", path, fields(encryptSensitive(t, k, "6222020000001234"), encryptSensitive(t, k, "张三")), reqOpts{header: serial})
	if err != nil || r.verifyErr != nil {
		t.Fatalf("%v %v", err, r.verifyErr)
	}
	decodeRefund(t, r)
	eventually(t, 5*time.Second, "SUCCESS", func() bool { rec, _ := f.sb.Refund("R1"); return rec.Status == "SUCCESS" })
	var q struct {
		Account string `json:"user_received_account"`
	}
	json.Unmarshal(f.m.query("R1").body, &q)
	if q.Account != "ICBC_DEBIT借记卡1234" {
		t.Fatalf("user_received_account %q", q.Account)
	}
}

func TestApplyAbnormal_Refused(t *testing.T) {
	f, _, created := abnormalFixture(t, nil)
	decodeRefund(t, f.m.create("O1", "R2", 100, 1000, "")) // SUCCESS at once
	r2, _ := f.sb.Refund("R2")
	ok := abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "MERCHANT_BANK_CARD"})
	tests := []struct {
		name   string
		method string
		path   string
		body   []byte
		o      reqOpts
		status int
		code   string
	}{
		{"unknown refund id", "POST", abnormalPath("50300000000000000000000000001"), ok, reqOpts{}, 404, "RESOURCE_NOT_EXISTS"},
		{"refund not abnormal", "POST", abnormalPath(r2.RefundID), abnormalBody(t, map[string]any{"out_refund_no": "R2", "type": "MERCHANT_BANK_CARD"}), reqOpts{}, 400, "INVALID_REQUEST"},
		{"other refund number", "POST", abnormalPath(created.RefundID), abnormalBody(t, map[string]any{"out_refund_no": "R2", "type": "MERCHANT_BANK_CARD"}), reqOpts{}, 400, "INVALID_REQUEST"},
		{"unknown type", "POST", abnormalPath(created.RefundID), abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "MERCHANT_BACK_BALANCE"}), reqOpts{}, 400, "PARAM_ERROR"},
		{"no type", "POST", abnormalPath(created.RefundID), abnormalBody(t, map[string]any{"out_refund_no": "R1"}), reqOpts{}, 400, "PARAM_ERROR"},
		{"null field", "POST", abnormalPath(created.RefundID), []byte(`{"out_refund_no":"R1","type":"MERCHANT_BANK_CARD","bank_type":null}`), reqOpts{}, 400, "PARAM_ERROR"},
		{"not json", "POST", abnormalPath(created.RefundID), []byte(`{`), reqOpts{}, 400, "PARAM_ERROR"},
		{"bad refund id", "POST", abnormalPath("a-b"), ok, reqOpts{}, 400, "PARAM_ERROR"},
		{"unsigned", "POST", abnormalPath(created.RefundID), ok, reqOpts{noAuth: true}, 401, "SIGN_ERROR"},
		{"tampered", "POST", abnormalPath(created.RefundID), ok, reqOpts{signBody: []byte(`{}`)}, 401, "SIGN_ERROR"},
		{"get", "GET", abnormalPath(created.RefundID), nil, reqOpts{}, 405, "METHOD_NOT_ALLOWED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := f.m.send(tt.method, tt.path, tt.body, tt.o)
			if err != nil {
				t.Fatal(err)
			}
			if r.status != tt.status || r.code() != tt.code || r.verifyErr != nil {
				t.Fatalf("got %d %s (verify %v), want %d %s", r.status, r.body, r.verifyErr, tt.status, tt.code)
			}
		})
	}
	if rec, _ := f.sb.Refund("R1"); rec.Status != "ABNORMAL" || rec.AbnormalType != "" {
		t.Fatalf("a refused call changed R1: %+v", rec)
	}
	// A refund number that merely looks like the route is still queried.
	if r := f.m.query("apply-abnormal-refund"); r.status != 404 || r.code() != "RESOURCE_NOT_EXISTS" {
		t.Fatalf("query of a number ending like the route: %d %s", r.status, r.body)
	}
}

// TestApplyAbnormal_ResponseLost: the call is applied but its answer is
// lost; the merchant's retry is refused and a query tells the truth.
func TestApplyAbnormal_ResponseLost(t *testing.T) {
	f, _, created := abnormalFixture(t, nil)
	if err := f.sb.SetFault(Fault{Kind: FaultResponseLost, OutRefundNo: "R1", Op: OpAbnormalRefund, Count: 1}); err != nil {
		t.Fatal(err)
	}
	body := abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "MERCHANT_BANK_CARD"})
	if r := f.m.must("POST", abnormalPath(created.RefundID), body); r.status != 500 || r.code() != "SYSTEM_ERROR" {
		t.Fatalf("lost response: %d %s", r.status, r.body)
	}
	if r := f.m.must("POST", abnormalPath(created.RefundID), body); r.status != 400 || r.code() != "INVALID_REQUEST" {
		t.Fatalf("retry: %d %s", r.status, r.body)
	}
	if q := decodeRefund(t, f.m.query("R1")); q.Status != "SUCCESS" {
		t.Fatalf("query %+v", q)
	}
}

// TestApplyAbnormal_SurvivesReload: an accepted application is saved
// before it is answered and its processing resumes after a restart.
func TestApplyAbnormal_SurvivesReload(t *testing.T) {
	state := filepath.Join(t.TempDir(), "books.json")
	base := func(c *Config) { c.StateFile = state }
	f, rc, created := abnormalFixture(t, func(c *Config) { base(c); c.ProcessingDelay = 50 * time.Millisecond })
	// A long delay now, so the refund is still PROCESSING when "killed".
	g := reopen(t, f, false, base, func(c *Config) { c.ProcessingDelay = time.Hour })
	body := abnormalBody(t, map[string]any{"out_refund_no": "R1", "type": "MERCHANT_BANK_CARD"})
	decodeRefund(t, g.m.must("POST", abnormalPath(created.RefundID), body))
	h := reopen(t, g, true, base, nil) // ProcessingDelay 0: finishes at once
	eventually(t, 5*time.Second, "SUCCESS after reload", func() bool { rec, _ := h.sb.Refund("R1"); return rec.Status == "SUCCESS" })
	eventually(t, 5*time.Second, "SUCCESS notified", func() bool {
		for _, n := range rc.all() {
			if n.err == nil && n.res.RefundStatus == "SUCCESS" {
				return true
			}
		}
		return false
	})
	if rec, _ := h.sb.Refund("R1"); rec.AbnormalType != "MERCHANT_BANK_CARD" || h.sb.Refunded("O1") != 600 {
		t.Fatalf("record %+v refunded %d", rec, h.sb.Refunded("O1"))
	}
}
