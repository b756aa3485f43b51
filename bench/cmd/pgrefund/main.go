// Command pgrefund serves the PostgreSQL baseline (package pgrefund): the
// seeds' design behind refundd's JSON API, for refundbench to compare with.
//
//	go run ./bench/cmd/pgrefund --dsn "$(bench/pg-setup.sh)" --listen 127.0.0.1:8090 --reset
//
// The provider is the same in-process stub refundd uses with --provider
// memory (internal/simprovider): no RSA signing; --provider-delay 0
// answers SUCCESS in the submission itself.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/refundd/refundd/bench/pgrefund"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "pgrefund:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("pgrefund", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:8090", "HTTP listen address")
	dsn := fs.String("dsn", os.Getenv("PGREFUND_DSN"), "PostgreSQL connection string (env PGREFUND_DSN)")
	// 32 per core: commits wait on the WAL flush, not the CPU, so more
	// sessions share each flush; the best of a sweep of 4..32 per core
	// (docs/BENCHMARKS.md).
	pool := fs.Int("pool", 32*runtime.NumCPU(), "connections in the pool")
	reset := fs.Bool("reset", false, "drop and recreate the tables first")
	delay := fs.Duration("provider-delay", 0, "in-memory provider: time from acceptance to success; 0 succeeds in the submission")
	keys := fs.String("sandbox-keys", "", "sandbox key directory; enables the WeChat Pay v3 notification endpoint")
	token := fs.String("token", os.Getenv("PGREFUND_TOKEN"), "bearer token required on the API (env PGREFUND_TOKEN); empty: none")
	prefix := fs.String("refund-prefix", "R", "refund number prefix")
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		return errors.New("--dsn is required (bench/pg-setup.sh prints one)")
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		return fmt.Errorf("--log-level: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	store, err := pgrefund.OpenStore(ctx, *dsn, *pool)
	if err != nil {
		return err
	}
	defer store.Close()
	if err := store.Migrate(ctx, *reset); err != nil {
		return err
	}
	provider := simprovider.New(simprovider.Options{Delay: *delay})
	opts := pgrefund.Options{Store: store, Provider: provider, Encode: provider.RequestBody,
		Token: *token, Prefix: *prefix, Logger: log}
	if *keys != "" {
		k, err := sandbox.LoadKeys(*keys)
		if err != nil {
			return fmt.Errorf("--sandbox-keys: %w", err)
		}
		v, err := k.Verifier()
		if err != nil {
			return err
		}
		opts.Notify = &pgrefund.Notify{MchID: k.MchID, Verifier: v, APIv3Key: k.APIv3Key}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	h := pgrefund.NewServer(opts)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("http server stopped", "err", err)
		}
	}()
	fmt.Printf("pgrefund listening on http://%s (pool %d)\n", ln.Addr(), *pool)
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	h.Wait()
	return err
}
