package wechatpay_test

import (
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
)

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A merchant signs a refund query with its API key (PROTOCOL.md V6).
func ExampleSigner_Authorization() {
	key := must(wechatpay.ParsePrivateKey(must(os.ReadFile("testdata/v6_private_key.pem"))))
	s := wechatpay.Signer{MchID: "1900007291", SerialNo: "408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB", Key: key}
	// In real use: time.Now().Unix() and wechatpay.NewNonce().
	h := must(s.Authorization("GET", "/v3/refund/domestic/refunds/123123123123", nil, 1554208460, "593BEC0C930BF1AFEB40B4A08C8FB242"))
	fmt.Println(h)
	// Output:
	// WECHATPAY2-SHA256-RSA2048 mchid="1900007291",nonce_str="593BEC0C930BF1AFEB40B4A08C8FB242",timestamp="1554208460",serial_no="408B07E79B8269FEC3D5D3E6AB8ED163A6A380DB",signature="Lc9VXxmeonkdV8Xk9tmigQFLhl0vRWTerdmoRu01aAnYwIrD/5nsSwE1WlmZGLRlAFTNQ3QsMa0+VRDlJp1Wp5p0nO8EK68b5sJBbjouxaFciIfq1zfDWWz+jqhcMoKXI1A6dPm1AW7D4d30WsMTNzp6g23OXakIsh9LO3lUmwvTuE0BY8ncf6tNGk4wKmvXwERd/ZpoQY3MAVKz+Nakwc+2XBmzT66KcUehU5kr4IvGa/lEU5RZb/q00zP9VLdBhC/jQSX3X1UcJLCtEc4gTmib4tnmAT+bHF/e17ZAuxDNcx6rqT8gNEXqaJGG+1OflMSTU2tpyG65G4dMKdFcoA=="
}

// A sandbox builds and signs a refund notification; the merchant verifies
// and decrypts it.
func ExampleParseRefundNotification() {
	apiV3Key := must(wechatpay.ParseAPIv3Key([]byte("a7cde1ZJB1kG2e7VfTs3jQzaWizur8Gb\n")))
	platformKey := must(wechatpay.ParsePrivateKey(must(os.ReadFile("testdata/v5_private_key.pem"))))
	cert := must(wechatpay.ParseCertificate(must(os.ReadFile("testdata/v4_cert.pem"))))
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

	// Sandbox side.
	body := must(wechatpay.BuildRefundNotification(apiV3Key, wechatpay.Notification{
		ID: "EV-1", CreateTime: now.Format(time.RFC3339), Resource: wechatpay.EncryptedResource{AssociatedData: "refund"},
	}, wechatpay.RefundResource{
		MchID: "1900000100", OutTradeNo: "ORD-42", OutRefundNo: "R-42", RefundID: "5030", RefundStatus: wechatpay.RefundSuccess,
		Amount: wechatpay.RefundAmount{Total: 999, Refund: 300, PayerTotal: 999, PayerRefund: 300},
	}))
	signed := must(wechatpay.SignHeaders(platformKey, wechatpay.CertificateSerial(cert), now.Unix(), wechatpay.NewNonce(), body))
	header := http.Header{}
	signed.Set(header)

	// Merchant side.
	v := &wechatpay.Verifier{Now: func() time.Time { return now.Add(3 * time.Second) }}
	if err := v.AddCertificate(cert); err != nil {
		panic(err)
	}
	n, r, err := wechatpay.ParseRefundNotification(v, apiV3Key, wechatpay.HeadersFrom(header), body)
	if err != nil {
		panic(err)
	}
	fmt.Println(n.EventType, r.OutRefundNo, r.RefundStatus, r.Amount.Refund)
	// Output:
	// REFUND.SUCCESS R-42 SUCCESS 300
}

func ExampleV2Ack() {
	fmt.Println(string(wechatpay.V2Ack(true, "")))
	// Output:
	// <xml><return_code><![CDATA[SUCCESS]]></return_code><return_msg><![CDATA[OK]]></return_msg></xml>
}
