package wechatpay

import (
	"testing"
)

// BenchmarkNotifyVerifyDecrypt is what a refund notification costs the
// merchant before any business check: the RSA signature over the body, the
// envelope JSON, AES-256-GCM and the resource JSON (ParseRefundNotification),
// then each part alone. Run:
//
//	go test -run='^$' -bench=NotifyVerifyDecrypt -benchmem ./internal/wechatpay/
func BenchmarkNotifyVerifyDecrypt(b *testing.B) {
	body, err := BuildRefundNotification([]byte(apiV3Key32), Notification{
		ID: "EV-2018022511223320873", CreateTime: "2018-06-08T10:34:56+08:00",
		Resource: EncryptedResource{AssociatedData: "refund"},
	}, sampleRefund())
	if err != nil {
		b.Fatal(err)
	}
	v := newV4Verifier(b)
	h := signedV4(b, body)
	key := []byte(apiV3Key32)
	b.Run("parse", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, r, err := ParseRefundNotification(v, key, h, body); err != nil || r.OutRefundNo == "" {
				b.Fatal(err)
			}
		}
	})
	b.Run("verify", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := v.Verify(h, body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decrypt", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := decodeRefundNotification(key, body); err != nil {
				b.Fatal(err)
			}
		}
	})
}
