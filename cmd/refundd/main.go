// Command refundd runs the refund engine: the HTTP API in front of one actor
// per reservation, journaled in a bbolt file.
//
//	go run ./cmd/refundd
//
// starts it on 127.0.0.1:8080 with its journal under ./data and the
// in-process provider sandbox. Every flag has a REFUNDD_* environment
// variable; see --help.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/refundd/refundd/internal/gctune"
	"github.com/refundd/refundd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.Get().String("refundd"))
		return
	}
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, errHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(2)
	}
	gc, err := gctune.Apply(m.Config.GC, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(2)
	}
	m.runtimeNote = gc
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(1)
	}
	<-ctx.Done()
	stop()
	m.log.Info("shutting down: draining requests and provider calls")
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "refundd: shutdown:", err)
		os.Exit(1)
	}
	m.log.Info("stopped cleanly")
}
