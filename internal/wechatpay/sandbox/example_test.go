package sandbox_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// A merchant refunds through the sandbox with nothing but the wechatpay
// primitives: sign the request, verify the signed response.
func Example() {
	keys, err := sandbox.GenerateKeys("1900000109")
	if err != nil {
		panic(err)
	}
	sb, err := sandbox.New(keys.Config()) // ProcessingDelay 0: the outcome is reached at once
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(sb)
	defer srv.Close()
	defer sb.Close()
	if err := sb.CreateOrder("ORDER-1", "", 10000); err != nil {
		panic(err)
	}

	signer := keys.Signer()
	verifier, _ := keys.Verifier()
	call := func(method, target string, body []byte) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+target, bytes.NewReader(body))
		auth, _ := signer.Authorization(method, req.URL.RequestURI(), body, time.Now().Unix(), wechatpay.NewNonce())
		req.Header.Set("Authorization", auth)
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		if err := verifier.Verify(wechatpay.HeadersFrom(resp.Header), raw); err != nil {
			panic(err)
		}
		var out struct {
			Status string `json:"status"`
			Code   string `json:"code"`
		}
		json.Unmarshal(raw, &out)
		return resp.StatusCode, out.Status + out.Code
	}

	body := []byte(`{"out_trade_no":"ORDER-1","out_refund_no":"REFUND-1","amount":{"refund":3000,"total":10000,"currency":"CNY"}}`)
	fmt.Println(call("POST", "/v3/refund/domestic/refunds", body))
	fmt.Println(call("GET", "/v3/refund/domestic/refunds/REFUND-1", nil))
	fmt.Println(call("POST", "/v3/refund/domestic/refunds", bytes.Replace(body, []byte("3000"), []byte("3001"), 1)))
	fmt.Println(sb.Refunded("ORDER-1"))
	// Output:
	// 200 PROCESSING
	// 200 SUCCESS
	// 400 INVALID_REQUEST
	// 3000
}
