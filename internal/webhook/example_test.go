package webhook_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/webhook"
)

func ExampleVerify() {
	secret := []byte("whsec_0123456789abcdef")
	body := []byte(`{"id":"evt_00000000000000000001","type":"refund.succeeded"}`)
	sent := time.Unix(1767225600, 0)
	sig := webhook.Sign(secret, sent.Unix(), body) // what refundd puts in Refundd-Signature

	fmt.Println(sig)
	fmt.Println(webhook.Verify(secret, "1767225600", body, sig, 5*time.Minute, sent.Add(time.Second)))

	tampered := []byte(`{"id":"evt_00000000000000000001","type":"refund.failed"}`)
	err := webhook.Verify(secret, "1767225600", tampered, sig, 5*time.Minute, sent.Add(time.Second))
	fmt.Println(errors.Is(err, webhook.ErrBadSignature))

	err = webhook.Verify(secret, "1767225600", body, sig, 5*time.Minute, sent.Add(time.Hour))
	fmt.Println(errors.Is(err, webhook.ErrBadTimestamp))
	// Output:
	// v1=3ea0be028c6782da1ab65eec19ddff4e7472b611dad157b1eab41bb334cb2afa
	// <nil>
	// true
	// true
}
