// Command refundd runs the refund engine: the HTTP API in front of one actor
// per reservation, journaled in a bbolt file.
//
//	go run ./cmd/refundd
//
// starts it on 127.0.0.1:8080 with its journal under ./data and the
// in-process provider sandbox. Every flag has a REFUNDD_* environment
// variable; see --help.
//
//	refundd check-config [flags]
//
// checks the configuration and credentials as a start does, prints the
// effective configuration with secrets masked, and exits: 0 when refundd
// would start, 1 when a file or credential is wrong, 2 for a bad flag.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/refundd/refundd/internal/runtimetune"
	"github.com/refundd/refundd/internal/version"
)

func main() {
	if version.Requested(os.Args[1:]) {
		fmt.Println(version.Get().String("refundd"))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "check-config" {
		os.Exit(checkConfig(os.Args[2:], os.Getenv, os.Stdout, os.Stderr))
	}
	m := NewMain()
	if err := m.ParseFlags(os.Args[1:], os.Getenv); err != nil {
		if errors.Is(err, errHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(2)
	}
	note, err := runtimetune.Apply(m.Config.Runtime, os.Getenv)
	if err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(2)
	}
	m.runtimeNote = note
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// SIGHUP reloads the credentials; caught from before the start, so
	// one sent as soon as refundd says it listens is not fatal.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	if err := m.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "refundd:", err)
		os.Exit(1)
	}
	go func() {
		for range hup {
			_ = m.ReloadCredentials(ctx, "SIGHUP") // logged and counted
		}
	}()
	<-ctx.Done()
	stop()
	signal.Stop(hup)
	m.log.Info("shutting down: draining requests and provider calls")
	if err := m.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "refundd: shutdown:", err)
		os.Exit(1)
	}
	m.log.Info("stopped cleanly")
}

// checkConfig is refundd check-config; it returns the exit code.
func checkConfig(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	m := NewMain()
	m.Stdout, m.Stderr = stdout, stderr
	if err := m.ParseFlags(args, getenv); err != nil {
		if errors.Is(err, errHelp) {
			return 0
		}
		fmt.Fprintln(stderr, "refundd check-config:", err)
		return 2
	}
	if err := m.CheckConfig(); err != nil {
		fmt.Fprintln(stderr, "refundd check-config:", err)
		return 1
	}
	return 0
}
