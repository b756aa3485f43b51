package merchant_test

import (
	"fmt"
	"time"

	"github.com/refundd/refundd/internal/merchant"
	"github.com/refundd/refundd/internal/reservation"
)

const file = `
[[accounts]]
name = "platform"
kind = "service_provider"
mchid = "1900000200"
serial = "7132D72A03E93CDDF8C03BBD1F37EEDF6EBDE3C3"
private_key = "file:/etc/refundd/platform/apiclient_key.pem"
apiv3_key = "env:PLATFORM_APIV3_KEY"
public_key_id = "PUB_KEY_ID_0119000002002025010100000000000002"
public_key_file = "/etc/refundd/platform/pub_key.pem"

[[merchants]]
name = "lakeside-inn"
kind = "sub_merchant"
account = "platform"
sub_mchid = "1900000201"
refund_prefix = "LI"
[merchants.policy]
refund_spacing = "90s"
`

func ExampleParse() {
	r, err := merchant.Parse([]byte(file), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	m, _ := r.ByRefundNo(reservation.RefundNo("LI", "res-7", 1))
	fmt.Println(m.Name, m.Kind, m.Account.Name, m.SubMchID)
	n, _ := r.ByMchID("1900000200", "1900000201") // a partner notification's sp_mchid, sub_mchid
	fmt.Println(n == m)
	p := m.Policy(reservation.Policy{RefundSpacing: time.Minute, MaxAttempts: 5})
	fmt.Println(p.RefundNoPrefix, p.RefundSpacing, p.MaxAttempts)
	// Output:
	// lakeside-inn sub_merchant platform 1900000201
	// true
	// LI 1m30s 5
}

func ExampleParse_errors() {
	_, err := merchant.Parse([]byte(`
[[accounts]]
name = "shop"
kind = "direct"
mchid = "1900000101"
serial = "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
private_key = "file:/etc/refundd/shop.pem"
apiv3_key = "0123456789abcdefghijABCDEFGHIJ01"
public_key_file = "/etc/refundd/pub_key.pem"
public_key_id = "PUB_KEY_ID_01"

[[merchants]]
name = "shop"
kind = "direct"
account = "shop"
refund_prefx = "S"
`), "")
	fmt.Println(err)
	// Output:
	// line 16: merchants[0].refund_prefx: merchant: unknown key: not a setting of the merchants file
	// accounts[0].apiv3_key: merchant: inline secret: secrets are never written in the file; write env:NAME or file:PATH
	// merchants[0].refund_prefix: merchant: missing: required: 1..16 of [0-9A-Za-z], unique across merchants
}
