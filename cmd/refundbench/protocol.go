package main

import (
	"fmt"
	"io"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// protocolCost measures, on one goroutine (one core), what the WeChat Pay
// protocol costs a merchant per refund, apart from any HTTP: signing a
// refund request (RSA-2048), verifying a signed response, and verifying and
// decrypting a v3 notification. keysDir empty generates fresh keys.
func protocolCost(w io.Writer, keysDir string, d time.Duration) error {
	var keys sandbox.Keys
	var err error
	if keysDir != "" {
		keys, err = sandbox.LoadKeys(keysDir)
	} else {
		keys, err = sandbox.GenerateKeys("1900000001")
	}
	if err != nil {
		return fmt.Errorf("protocol: keys: %w", err)
	}
	verifier, err := keys.Verifier()
	if err != nil {
		return err
	}
	body := []byte(`{"out_trade_no":"OT-bench-000001","out_refund_no":"R-bench-000001-1","reason":"bench",` +
		`"notify_url":"https://merchant.example/v1/notify/wechatpay/refund","amount":{"refund":700,"total":10000,"currency":"CNY"}}`)
	signer := keys.Signer()
	now := time.Now()
	rate := func(name string, f func() error) error {
		n := 0
		start := time.Now()
		for time.Since(start) < d {
			if err := f(); err != nil {
				return fmt.Errorf("protocol: %s: %w", name, err)
			}
			n++
		}
		fmt.Fprintf(w, "| %s | %.0f | %.1f |\n", name, float64(n)/time.Since(start).Seconds(),
			float64(time.Since(start).Microseconds())/float64(n))
		return nil
	}
	fmt.Fprintf(w, "| one core, %s each | per second | µs each |\n| --- | ---: | ---: |\n", d)
	if err := rate("sign a refund request (merchant, RSA-2048)", func() error {
		_, err := signer.Authorization("POST", "/v3/refund/domestic/refunds", body, now.Unix(), wechatpay.NewNonce())
		return err
	}); err != nil {
		return err
	}
	resp := []byte(`{"refund_id":"50300000000000000000000000000","out_refund_no":"R-bench-000001-1","status":"PROCESSING"}`)
	h, err := wechatpay.SignHeaders(keys.PlatformKey, keys.PublicKeyID, now.Unix(), wechatpay.NewNonce(), resp)
	if err != nil {
		return err
	}
	if err := rate("verify a signed response (merchant)", func() error { return verifier.Verify(h, resp) }); err != nil {
		return err
	}
	nt, err := buildNotification(keys, "OT-bench-000001",
		refundView{RefundNo: "R-bench-000001-1", Amount: 700, ProviderRefundID: "50300000000000000000000000000"}, 10000, now)
	if err != nil {
		return err
	}
	nh := wechatpay.HeadersFrom(nt.header)
	if err := rate("verify and decrypt a v3 notification (merchant)", func() error {
		_, _, err := wechatpay.ParseRefundNotification(verifier, keys.APIv3Key, nh, nt.body)
		return err
	}); err != nil {
		return err
	}
	return rate("sign a v3 notification (WeChat side, for scale)", func() error {
		_, err := wechatpay.SignHeaders(keys.PlatformKey, keys.PublicKeyID, now.Unix(), wechatpay.NewNonce(), nt.body)
		return err
	})
}
