package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/refundd/refundd/client"
	"github.com/refundd/refundd/internal/webhook"
)

// Register a payment, refund part of it and wait for the outcome. The
// idempotency key comes from the caller's own order, so asking again after
// a crash answers the same refund.
func ExampleClient_RequestRefund() {
	refundd, stop := exampleRefundd(refunddOptions{}) // a real refundd in this process
	defer stop()
	ctx := context.Background()

	c, err := client.New(refundd.URL, client.Options{Token: serviceToken})
	if err != nil {
		panic(err)
	}
	if _, _, err := c.RegisterReservation(ctx, client.Registration{
		ID: "booking-42", UserID: "user-7", OutTradeNo: "PAY-42", Amount: 12000, Currency: "CNY",
	}); err != nil {
		panic(err)
	}
	amount := int64(4500)
	rf, err := c.RequestRefund(ctx, "booking-42", client.RefundRequest{
		UserID: "user-7", Amount: &amount, Reason: "one night cancelled",
		IdempotencyKey: "order-42-cancel-1", Wait: 5 * time.Second,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(rf.RefundNo, rf.State, rf.Amount)

	// More than is left is refused with a code, not a status to parse.
	_, err = c.RequestRefund(ctx, "booking-42", client.RefundRequest{UserID: "user-7", Amount: &[]int64{9000}[0]})
	fmt.Println(client.ErrorCode(err))
	// Output:
	// T-booking-42-1 SUCCEEDED 4500
	// insufficient_refundable
}

// Follow the event feed from a stored cursor.
func ExampleConsumer() {
	refundd, stop := exampleRefundd(refunddOptions{})
	defer stop()
	c, _ := client.New(refundd.URL, client.Options{Token: serviceToken})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, _ = c.RegisterReservation(ctx, client.Registration{ID: "b1", UserID: "u1", OutTradeNo: "P1", Amount: 500, Currency: "CNY"})
	_, _ = c.RequestRefund(ctx, "b1", client.RefundRequest{UserID: "u1"})

	consumer := &client.Consumer{
		Client: c,
		Cursor: &client.MemoryCursor{}, // client.FileCursor{Path: ...} survives restarts
		Types:  []string{client.EventRefundSucceeded},
		Handle: func(_ context.Context, ev client.Event) error {
			fmt.Println(ev.Type, ev.RefundNo, ev.Amount, ev.Refunded, "of", ev.Paid)
			cancel() // one is enough here; a real consumer runs until shutdown
			return nil
		},
	}
	err := consumer.Run(ctx)
	fmt.Println(errors.Is(err, context.Canceled))
	// Output:
	// refund.succeeded T-b1-1 500 500 of 500
	// true
}

// Check a webhook delivery in an HTTP handler.
func ExampleReadWebhook() {
	secret := []byte("whsec_0123456789abcdef") // the endpoint's secret in --webhooks-file
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev, err := client.ReadWebhook(r, secret, 0)
		if err != nil {
			fmt.Println("refused:", errors.Is(err, client.ErrBadSignature))
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		// Handle ev, de-duplicating on ev.ID, and only then answer 2xx:
		// refundd retries anything else.
		fmt.Println("got", ev.Type, ev.RefundNo, ev.Amount)
	})

	// Two deliveries as refundd sends them: one signed with the secret,
	// one whose body was changed on the way.
	body := `{"id":"evt_00000000000000000007","type":"refund.succeeded","refund_no":"R-b1-1","amount":500}`
	for _, sent := range []string{body, strings.Replace(body, "500", "50000", 1)} {
		now := time.Now().Unix()
		req := httptest.NewRequest(http.MethodPost, "/hooks/refundd", strings.NewReader(sent))
		req.Header.Set(client.HeaderEventID, "evt_00000000000000000007")
		req.Header.Set(client.HeaderTimestamp, strconv.FormatInt(now, 10))
		req.Header.Set(client.HeaderSignature, webhook.Sign(secret, now, []byte(body)))
		handler.ServeHTTP(httptest.NewRecorder(), req)
	}
	// Output:
	// got refund.succeeded R-b1-1 500
	// refused: true
}
