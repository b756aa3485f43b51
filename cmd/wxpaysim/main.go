// Command wxpaysim runs the WeChat Pay refund sandbox standalone: a server
// speaking the real APIv3 refund protocol with its own generated keys,
// which it writes to --keys-dir so refundd (or any merchant client) can be
// pointed at it.
//
//	go run ./cmd/wxpaysim --keys-dir ./wxpaysim-keys
//
// Keys found in --keys-dir are reused, so a restarted sandbox keeps
// working with an already configured merchant; with --state-file it also
// keeps its orders and accepted refunds, and finishes and notifies the
// refunds that were still in progress. --min-refund-spacing=1m enforces
// WeChat Pay's one-minute rule between refunds of one order.
//
// With --direct-merchants, --service-provider and --sub-merchants it serves
// several merchants behind one address, each account with its keys in
// --keys-dir/{mchid}/ and each merchant with its own books (--state-dir),
// and writes and prints --keys-dir/merchants.toml, a refundd
// --merchants-file pointing at it:
//
//	go run ./cmd/wxpaysim --direct-merchants=1900000101,1900000102 \
//	    --service-provider=1900000200 --sub-merchants=1900000201,1900000202
//
// Its /sandbox/ admin routes
// (orders, faults) are unauthenticated: for tests and development only,
// keep it on loopback.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/refundd/refundd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.Get().String("wxpaysim"))
		return
	}
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:]); err != nil {
		if errors.Is(err, errHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "wxpaysim:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "wxpaysim:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	stop()
	m.log.Info("shutting down")
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "wxpaysim: shutdown:", err)
		os.Exit(1)
	}
	m.log.Info("stopped cleanly")
}
