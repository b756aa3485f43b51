package wechatpay

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// sentinels lists every exported sentinel; fuzz targets check that each
// error wraps one of them, as errors.go promises.
var sentinels = []error{
	ErrInvalidKey, ErrInvalidArgument, ErrInvalidNonce, ErrDecrypt, ErrBadPadding,
	ErrMissingHeader, ErrInvalidHeader, ErrUnknownSerial, ErrCertificateExpired,
	ErrBadSignature, ErrProbe, ErrStaleTimestamp, ErrUnsupportedAlgorithm,
	ErrBadAuthorization, ErrMalformed, ErrIncomplete, ErrMerchantMismatch, ErrTooLarge, ErrUnexpectedEvent, ErrReturnFail,
	ErrDownload, ErrNoCertificates,
}

func checkSentinel(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return
		}
	}
	t.Fatalf("error wraps no sentinel: %v", err)
}

func FuzzParseRefundNotification(f *testing.F) {
	vec := loadVectors(f)
	v4Body := readTestdata(f, "v4_body.json")
	f.Add(vec.V4.Timestamp, vec.V4.Nonce, vec.V4.Signature, vec.V4.Serial, v4Body)
	f.Add(vec.V12.Timestamp, vec.V4.Nonce, vec.V12.Signature, vec.V12.Serial, v4Body)
	built, err := BuildRefundNotification([]byte(apiV3Key32), Notification{ID: "EV-1", CreateTime: "2018-06-08T10:34:56+08:00",
		Resource: EncryptedResource{Nonce: "eObYf1re2IZ0", AssociatedData: "refund"}}, sampleRefund())
	if err != nil {
		f.Fatal(err)
	}
	h := signedV4(f, built)
	f.Add(h.Timestamp, h.Nonce, h.Signature, h.Serial, built)
	partner, err := BuildRefundNotification([]byte(apiV3Key32), Notification{ID: "EV-2", CreateTime: "2018-06-08T10:34:56+08:00",
		Resource: EncryptedResource{Nonce: "eObYf1re2IZ1", AssociatedData: "refund"}}, samplePartnerRefund())
	if err != nil {
		f.Fatal(err)
	}
	h = signedV4(f, partner)
	f.Add(h.Timestamp, h.Nonce, h.Signature, h.Serial, partner)
	f.Add("", "", "", "", []byte("{}"))
	// Decrypted partner resources, for the resource parser below.
	f.Add("", "", "", "", []byte(partnerResource))
	f.Add("", "", "", "", []byte(strings.Replace(partnerResource, `"sub_mchid":"1900000109",`, "", 1)))
	f.Add("", "", "", "", []byte(strings.Replace(partnerResource, `"sp_mchid"`, `"mchid"`, 1)))

	verifier := newV4Verifier(f)
	key := []byte(apiV3Key32)
	f.Fuzz(func(t *testing.T, ts, nonce, sig, serial string, body []byte) {
		h := Headers{Timestamp: ts, Nonce: nonce, Signature: sig, Serial: serial}
		_, r, err := ParseRefundNotification(verifier, key, h, body)
		checkSentinel(t, err)
		if err == nil && r.OutRefundNo == "" {
			t.Fatal("accepted a notification without out_refund_no")
		}
		// Mutated bodies almost never carry a valid signature, so also drive
		// the post-verification path and the resource parser directly.
		_, r, err = decodeRefundNotification(key, body)
		checkSentinel(t, err)
		if err == nil && r.OutRefundNo == "" {
			t.Fatal("decoded a resource without out_refund_no")
		}
		r, err = parseRefundResource(body)
		checkSentinel(t, err)
		if err == nil && (r.OutRefundNo == "" || r.OutTradeNo == "" || r.RefundID == "" || r.RefundStatus == "" ||
			r.Merchant().MchID == "" || r.SpMchID != "" && r.SubMchID == "" ||
			r.MchID != "" && r.SpMchID != "" && r.MchID != r.SpMchID || r.Amount.Refund < 1 || r.Amount.Total < 1 || r.Amount.PayerTotal < 0 || r.Amount.PayerRefund < 0) {
			t.Fatalf("accepted resource %+v", r)
		}
	})
}

func FuzzParseRefundNotificationV2(f *testing.F) {
	vec := loadVectors(f)
	key := []byte(vec.V9.APIv2Key)
	reqInfo := readTestdataString(f, "v9_req_info.txt")
	f.Add(v9Envelope(reqInfo))
	f.Add([]byte(`<xml><return_code>FAIL</return_code><return_msg>x</return_msg></xml>`))
	f.Add([]byte(`<xml><return_code>SUCCESS</return_code></xml>`))
	f.Add(readTestdata(f, "v9_plaintext.xml"))
	built, err := BuildRefundNotificationV2(key, V2Envelope{MchID: "1"}, V2RefundInfo{OutRefundNo: "R", RefundFee: 1, RefundStatus: V2RefundSuccess})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(built)
	partner, err := BuildRefundNotificationV2(key, V2Envelope{AppID: "wx1", MchID: "1900000100", SubAppID: "wx2", SubMchID: "1900000109"},
		V2RefundInfo{OutRefundNo: "R", OutTradeNo: "O", RefundID: "5", TotalFee: 2, RefundFee: 1, RefundStatus: V2RefundSuccess})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(partner)
	f.Fuzz(func(t *testing.T, body []byte) {
		env, info, err := ParseRefundNotificationV2(key, body)
		checkSentinel(t, err)
		if err == nil {
			if info.OutRefundNo == "" || info.OutTradeNo == "" || info.RefundID == "" || info.RefundStatus == "" ||
				env.MchID == "" || info.RefundFee < 1 || info.TotalFee < 1 || info.SettlementRefundFee < 0 {
				t.Fatalf("accepted %+v", info)
			}
			// What was accepted must survive the sandbox's builder.
			if n := NotificationV2(env, info); n.Outcome.MchID != env.MchID || n.Outcome.SubMchID != env.SubMchID {
				t.Fatalf("NotificationV2 lost the merchant: %+v vs %+v", n.Outcome, env)
			}
			again, err := BuildRefundNotificationV2(key, V2Envelope{MchID: env.MchID}, info)
			if err != nil {
				t.Fatal(err)
			}
			if _, info2, err := ParseRefundNotificationV2(key, again); err != nil || info2 != info {
				t.Fatalf("round trip: %+v vs %+v, %v", info2, info, err)
			}
		}
		// ECB has no integrity, so mutated ciphertext reaches the unpadder
		// and the XML parser; drive them directly too.
		_, err = DecryptReqInfo(key, string(body))
		checkSentinel(t, err)
		if out, err := pkcs7Unpad(body, 16); err == nil && (len(body)-len(out) < 1 || len(body)-len(out) > 16) {
			t.Fatalf("unpad removed %d bytes", len(body)-len(out))
		}
	})
}

func FuzzParseAuthorization(f *testing.F) {
	vec := loadVectors(f)
	sig := readTestdataString(f, "v6_signature.txt")
	f.Add(Authorization{MchID: vec.V6.MchID, Nonce: vec.V6.Nonce, Timestamp: vec.V6.Timestamp, SerialNo: vec.V6.SerialNo, Signature: sig}.String())
	f.Add(vec.V7.GetHeader)
	f.Add(`WECHATPAY2-SHA256-RSA2048 mchid="1", nonce_str="n", timestamp="1", serial_no="S", signature="x", extra="y"`)
	f.Add(`WECHATPAY2-SHA256-RSA2048 mchid="1",mchid="1"`)
	f.Fuzz(func(t *testing.T, header string) {
		a, err := ParseAuthorization(header)
		checkSentinel(t, err)
		if err != nil {
			if a != (Authorization{}) || !errors.Is(err, ErrBadAuthorization) {
				t.Fatalf("got %+v with %v", a, err)
			}
			return
		}
		if a.MchID == "" || a.Nonce == "" || a.SerialNo == "" || a.Signature == "" || a.Timestamp <= 0 {
			t.Fatalf("accepted incomplete %+v", a)
		}
		b, err := ParseAuthorization(a.String())
		if err != nil || b != a {
			t.Fatalf("round trip: %+v vs %+v, %v", b, a, err)
		}
	})
}

func FuzzDecryptAEAD(f *testing.F) {
	v := loadVectors(f).V2
	f.Add([]byte(v.Key), v.Nonce, v.AssociatedData, v.Ciphertext)
	f.Add([]byte(v.Key), "short", "", "")
	f.Add([]byte("short"), v.Nonce, "", v.Ciphertext)
	f.Fuzz(func(t *testing.T, key []byte, nonce, ad, ct string) {
		pt, err := DecryptAEAD(key, nonce, ad, ct)
		checkSentinel(t, err)
		if err == nil && (len(key) != 32 || len(nonce) != 12) {
			t.Fatalf("decrypted %q with %d-byte key, %d-byte nonce", pt, len(key), len(nonce))
		}
	})
}

// FuzzDecryptCertificates: a certificate download body never panics, every
// error wraps a sentinel, and what decrypts carries the serial it names.
func FuzzDecryptCertificates(f *testing.F) {
	cert := v4Cert(f)
	d, err := EncryptCertificate([]byte(apiV3Key32), cert)
	if err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(CertificatesResponse{Data: []DownloadedCertificate{d}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"data":[]}`))
	f.Add([]byte(`{"data":[{"serial_no":"1","encrypt_certificate":{"algorithm":"AEAD_AES_256_GCM","nonce":"short","ciphertext":"AAAA"}}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		certs, err := DecryptCertificates([]byte(apiV3Key32), body)
		checkSentinel(t, err)
		for _, c := range certs {
			if CertificateSerial(c) == "" {
				t.Fatal("certificate without serial")
			}
		}
	})
}
