package contract

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// encodingProvider is a provider with its encoder (actors.Config.Encode).
type encodingProvider interface {
	actors.Provider
	RequestBody(reservation.RefundRequest) ([]byte, error)
}

// target is one provider under test and what it needs to make refunds.
type target struct {
	provider encodingProvider
	// order returns a paid order that may be refunded, or ok=false when the
	// target must not move money (a real account without permission).
	order func(t *testing.T) (outTradeNo string, total int64, ok bool)
	// settle lets a PROCESSING refund finish, where the target can.
	settle time.Duration
	// mayDrain allows refunding a whole order (never on a real account).
	mayDrain bool
	// sibling, when set, is another merchant of the same account (another
	// sub-merchant of the provider): it must not see the target's refunds.
	sibling encodingProvider
	// abnormal, when set, makes the next refund of the order end ABNORMAL
	// at WeChat (the sandbox's outcome fault); a real account cannot.
	abnormal func(t *testing.T, outTradeNo string)
}

// abnormalPayer is a provider that pays ABNORMAL refunds out and encrypts
// the bank fields for its account's WeChat Pay key (*wechatpay.Client,
// *wechatpay.MerchantClient).
type abnormalPayer interface {
	actors.AbnormalProvider
	EncryptSensitive(plain ...string) (serial string, ciphertext []string, err error)
}

func sandboxTarget(t *testing.T) target {
	keys, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		t.Fatal(err)
	}
	cfg := keys.Config()
	cfg.ProcessingDelay = 20 * time.Millisecond
	sb, err := sandbox.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(func() { srv.Close(); sb.Close() })
	verifier, err := keys.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: srv.URL, MchID: keys.MchID, Signer: keys.Signer(),
		Verifier: verifier, NotifyURL: "https://merchant.example/notify"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	return target{provider: client, settle: 2 * time.Second, mayDrain: true, abnormal: abnormalFault(sb), order: func(t *testing.T) (string, int64, bool) {
		n++
		no := fmt.Sprintf("CT%d%d", time.Now().UnixNano(), n)
		if err := sb.CreateOrder(no, "", 10000); err != nil {
			t.Fatal(err)
		}
		return no, 10000, true
	}}
}

// sandboxPartnerTarget is sub-merchant S1 of a service provider in a
// sandbox that also serves its sibling S2 and a direct merchant; one
// partner Client serves both sub-merchants.
func sandboxPartnerTarget(t *testing.T) target {
	const sp, s1, s2 = "1900000300", "1900000301", "1900000302"
	pk, err := sandbox.GenerateKeys(sp)
	if err != nil {
		t.Fatal(err)
	}
	dk, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		t.Fatal(err)
	}
	var cfgs []sandbox.Config
	for _, c := range []struct {
		k   sandbox.Keys
		sub string
	}{{dk, ""}, {pk, s1}, {pk, s2}} {
		cfg := c.k.Config()
		cfg.SubMchID, cfg.ProcessingDelay = c.sub, 20*time.Millisecond
		cfgs = append(cfgs, cfg)
	}
	mu, err := sandbox.NewMulti(cfgs)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(mu)
	t.Cleanup(func() { srv.Close(); mu.Close() })
	verifier, err := pk.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: srv.URL, Partner: true, Signer: pk.Signer(),
		Verifier: verifier, NotifyURL: "https://platform.example/notify"})
	if err != nil {
		t.Fatal(err)
	}
	sub1, err := client.For(wechatpay.Target{SubMchID: s1})
	if err != nil {
		t.Fatal(err)
	}
	sub2, err := client.For(wechatpay.Target{SubMchID: s2, NotifyURL: "https://platform.example/notify/s2"})
	if err != nil {
		t.Fatal(err)
	}
	book := mu.Book(wechatpay.Merchant{MchID: sp, SubMchID: s1})
	n := 0
	return target{provider: sub1, sibling: sub2, settle: 2 * time.Second, mayDrain: true, abnormal: abnormalFault(book), order: func(t *testing.T) (string, int64, bool) {
		n++
		no := fmt.Sprintf("CT%d%d", time.Now().UnixNano(), n)
		if err := book.CreateOrder(no, "", 10000); err != nil {
			t.Fatal(err)
		}
		return no, 10000, true
	}}
}

// abnormalFault makes the next refund of an order of sb end ABNORMAL.
func abnormalFault(sb *sandbox.Server) func(*testing.T, string) {
	return func(t *testing.T, order string) {
		if err := sb.SetFault(sandbox.Fault{Kind: sandbox.FaultOutcome, OutTradeNo: order, Outcome: "ABNORMAL", Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
}

// realTarget is configured by REFUNDD_CONTRACT_BASE_URL, _MCHID, _SERIAL,
// _PRIVATE_KEY (file), _PUBLIC_KEY (file), _PUBLIC_KEY_ID. It only reads
// unless REFUNDD_CONTRACT_ORDER and REFUNDD_CONTRACT_ORDER_TOTAL name a paid
// order that may be refunded 1 fen at a time. With REFUNDD_CONTRACT_SUB_MCHID
// the account is a service provider (MCHID is its sp_mchid) and the target
// is that sub-merchant (the order is its); REFUNDD_CONTRACT_SUB_MCHID2
// optionally names another sub-merchant of the provider, which must not see
// the target's refunds.
func realTarget(t *testing.T) (target, bool) {
	env := func(k string) string { return os.Getenv("REFUNDD_CONTRACT_" + k) }
	if env("BASE_URL") == "" {
		return target{}, false
	}
	read := func(k string) []byte {
		b, err := os.ReadFile(env(k))
		if err != nil {
			t.Fatalf("REFUNDD_CONTRACT_%s: %v", k, err)
		}
		return b
	}
	key, err := wechatpay.ParsePrivateKey(read("PRIVATE_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := wechatpay.ParsePublicKey(read("PUBLIC_KEY"))
	if err != nil {
		t.Fatal(err)
	}
	v := &wechatpay.Verifier{}
	if err := v.AddPublicKey(env("PUBLIC_KEY_ID"), pub); err != nil {
		t.Fatal(err)
	}
	partner := env("SUB_MCHID") != ""
	client, err := wechatpay.NewClient(wechatpay.ClientConfig{BaseURL: env("BASE_URL"), MchID: env("MCHID"), Partner: partner,
		Signer: wechatpay.Signer{MchID: env("MCHID"), SerialNo: env("SERIAL"), Key: key}, Verifier: v})
	if err != nil {
		t.Fatal(err)
	}
	var provider, sibling encodingProvider = client, nil
	if partner {
		if provider, err = client.For(wechatpay.Target{SubMchID: env("SUB_MCHID")}); err != nil {
			t.Fatal(err)
		}
		if s2 := env("SUB_MCHID2"); s2 != "" {
			if sibling, err = client.For(wechatpay.Target{SubMchID: s2}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return target{provider: provider, sibling: sibling, settle: 10 * time.Second, order: func(t *testing.T) (string, int64, bool) {
		total, err := strconv.ParseInt(env("ORDER_TOTAL"), 10, 64)
		return env("ORDER"), total, env("ORDER") != "" && err == nil
	}}, true
}

func TestContract_Sandbox(t *testing.T) { runContract(t, sandboxTarget(t)) }

func TestContract_SandboxPartner(t *testing.T) { runContract(t, sandboxPartnerTarget(t)) }

func TestContract_RealMerchant(t *testing.T) {
	tg, ok := realTarget(t)
	if !ok {
		t.Skip("set REFUNDD_CONTRACT_BASE_URL and the other REFUNDD_CONTRACT_* variables to run against a merchant account")
	}
	runContract(t, tg)
}

func runContract(t *testing.T, tg target) {
	ctx := context.Background()
	p := tg.provider
	t.Run("query of an unknown refund number is NOT_FOUND", func(t *testing.T) {
		o := p.Query(ctx, fmt.Sprintf("CT-none-%d", time.Now().UnixNano()))
		if o.Kind != reservation.OutcomeNotFound {
			t.Fatalf("outcome %+v, want NOT_FOUND", o)
		}
	})
	t.Run("request bytes are deterministic", func(t *testing.T) {
		r := reservation.RefundRequest{RefundNo: "CT-a-1", OutTradeNo: "O1", Amount: 1, Total: 2, Currency: "CNY", Reason: "r"}
		a, err1 := p.RequestBody(r)
		b, err2 := p.RequestBody(r)
		if err1 != nil || err2 != nil || string(a) != string(b) {
			t.Fatalf("RequestBody differs between calls: %q %q %v %v", a, b, err1, err2)
		}
	})
	t.Run("a refund is accepted, idempotent by number, and settles", func(t *testing.T) {
		order, total, ok := tg.order(t)
		if !ok {
			t.Skip("no refundable order configured")
		}
		no := fmt.Sprintf("CT-%d", time.Now().UnixNano())
		body, err := p.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: 1, Total: total, Currency: "CNY"})
		if err != nil {
			t.Fatal(err)
		}
		first := p.Submit(ctx, no, body, 1)
		if first.Kind != reservation.OutcomeProcessing && first.Kind != reservation.OutcomeSucceeded {
			t.Fatalf("submit: %+v", first)
		}
		if first.ProviderID == "" || first.RefundAmount != 1 || first.TotalAmount != total || first.OutTradeNo != order {
			t.Fatalf("submit answer does not describe the refund: %+v", first)
		}
		again := p.Submit(ctx, no, body, 2)
		if again.ProviderID != first.ProviderID {
			t.Fatalf("resubmitting the same bytes made another refund: %+v vs %+v", again, first)
		}
		deadline := time.Now().Add(tg.settle)
		for {
			o := p.Query(ctx, no)
			if o.Kind == reservation.OutcomeSucceeded {
				if o.ProviderID != first.ProviderID {
					t.Fatalf("query names another refund: %+v", o)
				}
				if tg.sibling != nil {
					// The refund is the sub-merchant's: the provider asking for
					// another sub-merchant does not find it.
					if o := tg.sibling.Query(ctx, no); o.Kind != reservation.OutcomeNotFound {
						t.Fatalf("another sub-merchant's query: %+v, want NOT_FOUND", o)
					}
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("refund did not settle: %+v", o)
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	t.Run("more than the order holds is rejected on a first submission", func(t *testing.T) {
		if !tg.mayDrain {
			t.Skip("would refund a whole order")
		}
		order, total, ok := tg.order(t)
		if !ok {
			t.Skip("no refundable order configured")
		}
		no := fmt.Sprintf("CT-%d", time.Now().UnixNano())
		body, err := p.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: total, Total: total, Currency: "CNY"})
		if err != nil {
			t.Fatal(err)
		}
		if o := p.Submit(ctx, no, body, 1); o.Kind != reservation.OutcomeProcessing && o.Kind != reservation.OutcomeSucceeded {
			t.Fatalf("full refund: %+v", o)
		}
		no2 := no + "x"
		body2, _ := p.RequestBody(reservation.RefundRequest{RefundNo: no2, OutTradeNo: order, Amount: 1, Total: total, Currency: "CNY"})
		if o := p.Submit(ctx, no2, body2, 1); o.Kind != reservation.OutcomeRejected {
			t.Fatalf("refund beyond the order: %+v, want REJECTED", o)
		}
		// The same refusal on a resubmission is not trusted as a rejection:
		// an earlier attempt may have been accepted.
		if o := p.Submit(ctx, no2, body2, 2); o.Kind != reservation.OutcomeUnknown {
			t.Fatalf("refused resubmission: %+v, want UNKNOWN", o)
		}
	})
	t.Run("another body under the same number is refused", func(t *testing.T) {
		order, total, ok := tg.order(t)
		if !ok {
			t.Skip("no refundable order configured")
		}
		no := fmt.Sprintf("CT-%d", time.Now().UnixNano())
		body, _ := p.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: 1, Total: total, Currency: "CNY"})
		if o := p.Submit(ctx, no, body, 1); o.Kind != reservation.OutcomeProcessing && o.Kind != reservation.OutcomeSucceeded {
			t.Fatalf("submit: %+v", o)
		}
		other, _ := p.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: 2, Total: total, Currency: "CNY"})
		if o := p.Submit(ctx, no, other, 1); o.Kind != reservation.OutcomeRejected {
			t.Fatalf("different body under %s: %+v, want REJECTED", no, o)
		}
	})
	t.Run("apply-abnormal: only an ABNORMAL refund, only with the platform's key, then paid out", func(t *testing.T) {
		ap, ok := p.(abnormalPayer)
		if !ok {
			t.Skip("the provider has no apply-abnormal-refund")
		}
		order, total, ok := tg.order(t)
		if !ok {
			t.Skip("no refundable order configured")
		}
		serial, enc, err := ap.EncryptSensitive("6222020200112233445", "张三")
		if err != nil || serial == "" || len(enc) != 2 || enc[0] == enc[1] {
			t.Fatalf("EncryptSensitive: %q %v %v", serial, enc, err)
		}
		card := reservation.AbnormalApplication{Type: reservation.AbnormalUserBankCard, BankType: "ICBC_DEBIT",
			EncryptedAccount: enc[0], EncryptedName: enc[1], KeySerial: serial}
		if tg.abnormal != nil {
			tg.abnormal(t, order)
		}
		no := fmt.Sprintf("CT-%d", time.Now().UnixNano())
		body, _ := p.RequestBody(reservation.RefundRequest{RefundNo: no, OutTradeNo: order, Amount: 1, Total: total, Currency: "CNY"})
		first := p.Submit(ctx, no, body, 1)
		if first.ProviderID == "" {
			t.Fatalf("submit: %+v", first)
		}
		card.RefundID = first.ProviderID
		// A key WeChat Pay does not hold is refused, whatever the refund's state.
		bogus := card
		bogus.KeySerial = "PUB_KEY_ID_0000000000000000000000000000"
		if o := ap.ApplyAbnormal(ctx, no, bogus); o.Kind != reservation.OutcomeRejected {
			t.Fatalf("payout encrypted for an unknown key: %+v, want REJECTED", o)
		}
		want := reservation.OutcomeSucceeded
		if tg.abnormal != nil {
			want = reservation.OutcomeAbnormal
		}
		settled := func(kind reservation.OutcomeKind) reservation.Outcome {
			t.Helper()
			deadline := time.Now().Add(tg.settle)
			for {
				o := p.Query(ctx, no)
				if o.Kind == kind {
					return o
				}
				if time.Now().After(deadline) {
					t.Fatalf("refund is %+v, want %s", o, kind)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		settled(want)
		if tg.abnormal == nil {
			// A refund that is not ABNORMAL is refused: no second payout.
			if o := ap.ApplyAbnormal(ctx, no, card); o.Kind != reservation.OutcomeRejected {
				t.Fatalf("payout of a SUCCESS refund: %+v, want REJECTED", o)
			}
			return
		}
		if tg.sibling != nil {
			// Another sub-merchant of the provider cannot pay it out.
			if sp, ok := tg.sibling.(abnormalPayer); ok {
				if o := sp.ApplyAbnormal(ctx, no, card); o.Kind == reservation.OutcomeProcessing || o.Kind == reservation.OutcomeSucceeded {
					t.Fatalf("another sub-merchant paid the refund out: %+v", o)
				}
			}
		}
		o := ap.ApplyAbnormal(ctx, no, card)
		if o.Kind != reservation.OutcomeProcessing || o.ProviderID != first.ProviderID {
			t.Fatalf("payout to the user's card: %+v, want PROCESSING of %s", o, first.ProviderID)
		}
		if o := settled(reservation.OutcomeSucceeded); o.ProviderID != first.ProviderID {
			t.Fatalf("paid out: %+v", o)
		}
		// Paid once: a repeat is refused, the refund is not ABNORMAL any more.
		if o := ap.ApplyAbnormal(ctx, no, card); o.Kind != reservation.OutcomeRejected {
			t.Fatalf("second payout: %+v, want REJECTED", o)
		}
	})
}
