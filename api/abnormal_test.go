package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
)

const (
	clearCard = "6222020200112233445"
	clearName = "张三丰"
)

// fakeEncrypter stands in for the WeChat Pay key: it records what it was
// asked to encrypt and answers fixed base64 ciphertexts.
type fakeEncrypter struct {
	mu    sync.Mutex
	plain [][]string
	nos   []string
	fail  bool
}

func (f *fakeEncrypter) encrypt(no string, plain ...string) (string, []string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nos, f.plain = append(f.nos, no), append(f.plain, plain)
	if f.fail {
		return "", nil, errors.New("no key")
	}
	return "PUB_KEY_ID_0114", []string{"Q0lQSEVSLUNBUkQ=", "Q0lQSEVSLU5BTUU="}, nil
}

// abnormalEnv is authEnv whose refunds come back ABNORMAL from WeChat
// (with WeChat's refund id, which the payout call names).
func abnormalEnv(t *testing.T, enc func(string, ...string) (string, []string, error)) *testEnv {
	var ts auth.Tokens
	if err := auth.ParseEnv("service:"+tokService+",reader:"+tokReader+",auditor:"+tokAuditor+",operator:"+tokOperator, &ts); err != nil {
		t.Fatal(err)
	}
	abnormal := func(op, no string, _ int) (simprovider.Injected, bool) {
		if op == "submit" && !strings.Contains(no, "fresh") {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal,
				ProviderID: "50300000012026120400000001", Code: "USER_ACCOUNT_ABNORMAL"}}, true
		}
		return simprovider.Injected{}, false
	}
	return newEnv(t, envOptions{fault: abnormal, api: api.Options{Auth: &ts, EncryptSensitive: enc}})
}

func (e *testEnv) abnormalRefund(t *testing.T, id string) string {
	t.Helper()
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody(id, 10000), bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatalf("register: %s", r)
	}
	rf := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/"+id+"/refunds", `{"user_id":"u-`+id+`"}`,
		append(bearer(tokService), "Idempotency-Key", "k1")...), http.StatusAccepted)
	waitFor(t, "ABNORMAL", func() bool { return engineState(t, e, id, rf.RefundNo) == "ABNORMAL" })
	return rf.RefundNo
}

func TestApplyAbnormal_Validation(t *testing.T) {
	enc := &fakeEncrypter{}
	e := abnormalEnv(t, enc.encrypt)
	no := e.abnormalRefund(t, "a1")
	path := "/v1/reservations/a1/refunds/" + no + "/apply-abnormal"
	user := func(bankType, account, name string) string {
		return `{"type":"USER_BANK_CARD","bank_type":"` + bankType + `","bank_account":"` + account + `","real_name":"` + name + `"}`
	}
	for _, c := range []struct{ body, field string }{
		{``, "*"},
		{`{}`, "type"},
		{`{"type":"ORIGINAL"}`, "type"},
		{`{"type":"MERCHANT_BANK_CARD","bank_type":"ICBC_DEBIT"}`, "bank_type"},
		{`{"type":"MERCHANT_BANK_CARD","bank_account":"` + clearCard + `"}`, "bank_account"},
		{`{"type":"MERCHANT_BANK_CARD","real_name":"` + clearName + `"}`, "real_name"},
		{`{"type":"MERCHANT_BANK_CARD","extra":1}`, "extra"},
		{user("", clearCard, clearName), "bank_type"},
		{user("VISA_CREDIT", clearCard, clearName), "bank_type"},
		{user("ICBC_DEBIT", "", clearName), "bank_account"},
		{user("ICBC_DEBIT", "1234567", clearName), "bank_account"},
		{user("ICBC_DEBIT", "6222 0202 0011 2233", clearName), "bank_account"},
		{user("ICBC_DEBIT", strings.Repeat("1", 31), clearName), "bank_account"},
		{user("ICBC_DEBIT", clearCard, ""), "real_name"},
		{user("ICBC_DEBIT", clearCard, `a\tb`), "real_name"},
		{user("ICBC_DEBIT", clearCard, strings.Repeat("名", 72)), "real_name"},
		{`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":6222020200112233445,"real_name":"x"}`, "bank_account"},
	} {
		r := e.do(t, http.MethodPost, path, c.body, bearer(tokOperator)...)
		d := wantError(t, r, http.StatusBadRequest, "invalid_argument", c.field)
		// A refusal never echoes the card or the name.
		if strings.Contains(string(r.body), clearCard) || strings.Contains(d.Message, clearName) {
			t.Errorf("%s: the answer echoes a bank detail: %s", c.body, r.body)
		}
	}
	if len(enc.plain) != 0 {
		t.Fatalf("invalid requests were encrypted: %d calls", len(enc.plain))
	}
	if st := engineState(t, e, "a1", no); st != "ABNORMAL" {
		t.Fatalf("refused requests changed the refund to %s", st)
	}
}

func TestApplyAbnormal_UserBankCard(t *testing.T) {
	enc := &fakeEncrypter{}
	e := abnormalEnv(t, enc.encrypt)
	no := e.abnormalRefund(t, "a1")
	path := "/v1/reservations/a1/refunds/" + no + "/apply-abnormal"
	body := `{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"` + clearCard + `","real_name":"` + clearName + `"}`

	// Operators only: the service, a reader and an auditor are refused
	// before anything is encrypted.
	for _, tok := range []string{tokService, tokReader, tokAuditor} {
		wantError(t, e.do(t, http.MethodPost, path, body, bearer(tok)...), http.StatusForbidden, "forbidden", "")
	}
	// An unknown refund or reservation is not found, and nothing is encrypted for it.
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds/T-a1-9/apply-abnormal", body, bearer(tokOperator)...), http.StatusNotFound, "not_found", "")
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/zz/refunds/"+no+"/apply-abnormal", body, bearer(tokOperator)...), http.StatusNotFound, "not_found", "")
	if len(enc.plain) != 0 {
		t.Fatalf("encrypted for a refused request: %v calls", len(enc.plain))
	}

	r := e.do(t, http.MethodPost, path, body, bearer(tokOperator)...)
	got := decodeRefund(t, r, http.StatusOK)
	if got.State != "PROCESSING" || got.Amount != 10000 || !strings.Contains(string(r.body), `"abnormal_type":"USER_BANK_CARD"`) {
		t.Fatalf("after apply-abnormal: %s", r.body)
	}
	if strings.Contains(string(r.body), clearCard) || strings.Contains(string(r.body), clearName) {
		t.Fatalf("the answer echoes a bank detail: %s", r.body)
	}
	if len(enc.plain) != 1 || enc.nos[0] != no || strings.Join(enc.plain[0], "|") != clearCard+"|"+clearName {
		t.Fatalf("encrypted %v for %v, want the card and the name for %s", enc.plain, enc.nos, no)
	}
	// Held as before: nothing more can be refunded while it is paid out.
	if res := decodeReservation(t, e.do(t, http.MethodGet, "/v1/reservations/a1", "", bearer(tokReader)...), http.StatusOK); res.Refunded != 0 || res.Refundable != 0 {
		t.Fatalf("reservation after apply-abnormal: %+v", res)
	}
	st, err := e.engine.Get(t.Context(), "a1")
	if err != nil {
		t.Fatal(err)
	}
	if rf := st.Refund(no); rf.AbnormalType != reservation.AbnormalUserBankCard {
		t.Fatalf("refund %+v, want abnormal type USER_BANK_CARD", *rf)
	}
	// A repeat answers the current state; nothing is journaled again.
	again := decodeRefund(t, e.do(t, http.MethodPost, path, body, bearer(tokOperator)...), http.StatusOK)
	if again.State != "PROCESSING" {
		t.Fatalf("repeat: %+v", again)
	}
	if st2, _ := e.engine.Get(t.Context(), "a1"); st2.Version != st.Version {
		t.Fatalf("a repeat journaled: version %d -> %d", st.Version, st2.Version)
	}
}

func TestApplyAbnormal_NotAbnormalAndMerchantBankCard(t *testing.T) {
	enc := &fakeEncrypter{fail: true}
	e := abnormalEnv(t, enc.encrypt)
	no := e.abnormalRefund(t, "a1")
	path := "/v1/reservations/a1/refunds/" + no + "/apply-abnormal"
	user := `{"type":"USER_BANK_CARD","bank_type":"CMB_DEBIT","bank_account":"` + clearCard + `","real_name":"` + clearName + `"}`
	// No key to encrypt for: 503, nothing journaled.
	wantError(t, e.do(t, http.MethodPost, path, user, bearer(tokOperator)...), http.StatusServiceUnavailable, "encryption_unavailable", "")
	if st := engineState(t, e, "a1", no); st != "ABNORMAL" {
		t.Fatalf("after the refusal: %s", st)
	}
	// The merchant's account needs no encryption.
	got := decodeRefund(t, e.do(t, http.MethodPost, path, `{"type":"MERCHANT_BANK_CARD"}`, bearer(tokOperator)...), http.StatusOK)
	if got.State != "PROCESSING" {
		t.Fatalf("MERCHANT_BANK_CARD: %+v", got)
	}
	// Only an ABNORMAL refund is paid out: one that succeeded is not.
	if r := e.do(t, http.MethodPost, "/v1/reservations", registerBody("fresh", 100), bearer(tokService)...); r.status != http.StatusCreated {
		t.Fatal(r)
	}
	rf := decodeRefund(t, e.do(t, http.MethodPost, "/v1/reservations/fresh/refunds", `{"user_id":"u-fresh"}`,
		append(bearer(tokService), "Idempotency-Key", "k1")...), http.StatusAccepted)
	waitFor(t, "SUCCEEDED", func() bool { return engineState(t, e, "fresh", rf.RefundNo) == "SUCCEEDED" })
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/fresh/refunds/"+rf.RefundNo+"/apply-abnormal", `{"type":"MERCHANT_BANK_CARD"}`,
		bearer(tokOperator)...), http.StatusConflict, "invalid_state", "")
}

func TestApplyAbnormal_NoEncrypter(t *testing.T) {
	e := abnormalEnv(t, nil)
	no := e.abnormalRefund(t, "a1")
	wantError(t, e.do(t, http.MethodPost, "/v1/reservations/a1/refunds/"+no+"/apply-abnormal",
		`{"type":"USER_BANK_CARD","bank_type":"CMB_DEBIT","bank_account":"`+clearCard+`","real_name":"x"}`, bearer(tokOperator)...),
		http.StatusServiceUnavailable, "encryption_unavailable", "")
}

// engineState is the refund's state as the engine holds it (the routes
// here need a token).
func engineState(t *testing.T, e *testEnv, id, no string) reservation.RefundState {
	t.Helper()
	st, err := e.engine.Get(context.Background(), id)
	if err != nil || st.Refund(no) == nil {
		t.Fatalf("refund %s/%s: %v", id, no, err)
	}
	return st.Refund(no).State
}

// FuzzApplyAbnormalBody sends any body to apply-abnormal on an ABNORMAL
// refund of the real engine. Each answer is a 200 PROCESSING after the
// card and name were handed to the encrypter exactly as sent (and only for
// USER_BANK_CARD), or a client error that names its field, changes
// nothing, encrypts nothing and echoes no bank detail.
func FuzzApplyAbnormalBody(f *testing.F) {
	for _, s := range []string{
		`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"6222020200112233445","real_name":"张三"}`,
		`{"type":"MERCHANT_BANK_CARD"}`,
		`{"type":"MERCHANT_BANK_CARD","real_name":"张三"}`,
		`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"62220202001122334455667788990011","real_name":"x"}`,
		`{"type":"USER_BANK_CARD","bank_type":"icbc_debit","bank_account":"6222020200112233445","real_name":"x"}`,
		`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"6222020200112233445","real_name":"\u0000"}`,
		`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":"6222020200112233445","real_name":"\ud800"}`,
		"{\"type\":\"USER_BANK_CARD\",\"bank_type\":\"ICBC_DEBIT\",\"bank_account\":\"6222020200112233445\",\"real_name\":\"\xff\"}",
		`{"type":"USER_BANK_CARD","bank_type":"ICBC_DEBIT","bank_account":null,"real_name":"x"}`,
		`{"type":"USER_BANK_CARD","type":"MERCHANT_BANK_CARD"}`,
		`{"type":1}`, `[]`, `null`, ``, `{`, `{"type":"MERCHANT_BANK_CARD"} {}`,
	} {
		f.Add([]byte(s))
	}
	enc := &fakeEncrypter{}
	abnormal := func(op, _ string, _ int) (simprovider.Injected, bool) {
		if op == "submit" {
			return simprovider.Injected{Outcome: reservation.Outcome{Kind: reservation.OutcomeAbnormal,
				ProviderID: "50300000012026120400000001", Code: "USER_ACCOUNT_ABNORMAL"}}, true
		}
		return simprovider.Injected{}, false
	}
	e := newEnv(f, envOptions{noSync: true, noHTTP: true, idle: time.Second, fault: abnormal, api: api.Options{EncryptSensitive: enc.encrypt}})
	var seq atomic.Int64
	f.Fuzz(func(t *testing.T, body []byte) {
		id := fmt.Sprintf("f%d", seq.Add(1))
		if _, _, err := e.engine.Execute(context.Background(), id, "test", reservation.Register{
			ReservationID: id, UserID: fuzzUser, OutTradeNo: "O" + id, Amount: 100, Currency: "CNY",
		}); err != nil {
			t.Fatalf("register %s: %v", id, err)
		}
		rf := decodeRefund(t, e.post("/v1/reservations/"+id+"/refunds", "k", []byte(`{"user_id":"`+fuzzUser+`"}`)), http.StatusAccepted)
		waitFor(t, "ABNORMAL", func() bool { return engineState(t, e, id, rf.RefundNo) == reservation.Abnormal })
		enc.mu.Lock()
		before := len(enc.plain)
		enc.mu.Unlock()
		r := e.post("/v1/reservations/"+id+"/refunds/"+rf.RefundNo+"/apply-abnormal", "", body)
		enc.mu.Lock()
		calls := enc.plain[before:]
		enc.mu.Unlock()
		var sent struct{ Type, BankAccount, RealName string }
		_ = json.Unmarshal(body, &struct {
			Type        *string `json:"type"`
			BankAccount *string `json:"bank_account"`
			RealName    *string `json:"real_name"`
		}{&sent.Type, &sent.BankAccount, &sent.RealName})
		if r.status == http.StatusOK {
			v := decodeRefund(t, r, http.StatusOK)
			if v.State != "PROCESSING" || engineState(t, e, id, rf.RefundNo) != reservation.Processing {
				t.Fatalf("200 with %s", r.body)
			}
			switch sent.Type {
			case reservation.AbnormalUserBankCard:
				if len(calls) != 1 || len(calls[0]) != 2 || calls[0][0] != sent.BankAccount || calls[0][1] != sent.RealName {
					t.Fatalf("USER_BANK_CARD taken; encrypter got %q for %q/%q", calls, sent.BankAccount, sent.RealName)
				}
			case reservation.AbnormalMerchantBankCard:
				if len(calls) != 0 {
					t.Fatalf("MERCHANT_BANK_CARD encrypted %q", calls)
				}
			default:
				t.Fatalf("type %q taken: %s", sent.Type, r.body)
			}
			return
		}
		d := checkRefused(t, r)
		if len(calls) != 0 {
			t.Fatalf("refused (%s) after encrypting %q", r.body, calls)
		}
		if st := engineState(t, e, id, rf.RefundNo); st != reservation.Abnormal {
			t.Fatalf("refused (%s) but the refund is %s", r.body, st)
		}
		for _, v := range []string{sent.BankAccount, sent.RealName} {
			if len(v) >= 8 && strings.Contains(d.Message, v) {
				t.Fatalf("the refusal echoes %q: %s", v, r.body)
			}
		}
	})
}
