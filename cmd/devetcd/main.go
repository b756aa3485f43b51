// Command devetcd runs a single-member etcd on loopback for trying
// refundd's cluster mode (scripts/cluster-demo) and for its multi-process
// tests: the nodes keep their membership in it.
//
//	go run ./cmd/devetcd --dir /tmp/etcd --listen 127.0.0.1:2379
//
// It prints "devetcd listening on HOST:PORT" once it serves clients and
// stops on SIGINT or SIGTERM. It is not a production etcd: one member, no
// TLS, no authentication.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/refundd/refundd/internal/devetcd"
	"github.com/refundd/refundd/internal/version"
)

func main() {
	fs := flag.NewFlagSet("devetcd", flag.ContinueOnError)
	dir := fs.String("dir", "devetcd-data", "directory of etcd's data")
	listen := fs.String("listen", "127.0.0.1:2379", "client address (host:port); port 0 picks a free one")
	peer := fs.String("peer", "", "peer address (host:port); empty picks a free loopback port")
	noFsync := fs.Bool("no-fsync", false, "do not fsync etcd's log (tests: a throwaway etcd on a busy disk)")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0) // asked for: the usage is printed, nothing went wrong
		}
		os.Exit(2)
	}
	if *showVersion {
		fmt.Println(version.Get().String("devetcd"))
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	addr := *listen
	if host, port, err := net.SplitHostPort(addr); err == nil && port == "0" {
		if host != "127.0.0.1" {
			fmt.Fprintln(os.Stderr, "devetcd: port 0 is only supported on 127.0.0.1")
			os.Exit(2)
		}
		addr = "" // devetcd picks a free loopback port
	}
	s, err := devetcd.Start(devetcd.Options{Dir: *dir, ClientAddr: addr, PeerAddr: *peer, NoFsync: *noFsync})
	if err != nil {
		fmt.Fprintln(os.Stderr, "devetcd:", err)
		os.Exit(1)
	}
	fmt.Printf("devetcd listening on %s\n", s.Endpoint())
	<-ctx.Done()
	s.Close()
}
