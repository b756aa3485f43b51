package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// netLab is a small network of Linux network namespaces for the partition
// test. A hub namespace holds a bridge; each node has a namespace of its
// own with a veth to the bridge, and the root namespace (where the test,
// PostgreSQL, etcd and the sandbox run) has a veth to it too:
//
//	root (host addr) --veth-- [hub: br0] --veth-- node i (its addr)
//
// The bridge sits in a fresh namespace so that the root namespace's
// forwarding rules (Docker's FORWARD DROP with br_netfilter, for example)
// never see node-to-node traffic. Names carry the test process's pid, so
// parallel runs do not collide; one lab per process at a time.
type netLab struct {
	t      *testing.T
	ip     string // path of ip(8)
	nft    string // path of nft(8)
	hub    string // the hub namespace
	rootIf string // the root namespace's end of its veth
	host   netip.Addr
	nodes  []labNode
}

// labNode is one node's namespace and address.
type labNode struct {
	ns   string
	addr netip.Addr
}

// partitionTable is the nft table holding a node's drop rules.
const partitionTable = "refundd_partition"

// newNetLab creates the hub and n node namespaces and removes them when
// the test ends. It skips the test only where namespaces cannot be made
// (not root, no ip, ip netns add refused); nft missing skips too, except
// under CI=true, where scripts/install-nftables should have installed it.
func newNetLab(t *testing.T, n int) *netLab {
	t.Helper()
	const how = "partition test needs network namespaces: run it as root on Linux with iproute2 and nftables (scripts/install-nftables)"
	if os.Geteuid() != 0 {
		t.Skipf("skipping: not root; %s", how)
	}
	ip, err := exec.LookPath("ip")
	if err != nil {
		t.Skipf("skipping: no ip command; %s", how)
	}
	tag := fmt.Sprintf("rfd%d", os.Getpid())
	l := &netLab{t: t, ip: ip, hub: tag + "hub", rootIf: tag + "r"}
	t.Cleanup(l.destroy)
	if out, err := l.cmd("netns", "add", l.hub); err != nil {
		t.Skipf("skipping: ip netns add failed (%v: %s); %s", err, out, how)
	}
	if l.nft, err = exec.LookPath("nft"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("nft not found under CI=true: scripts/install-nftables (run by scripts/test) should have installed it")
		}
		t.Skipf("skipping: no nft command; %s", how)
	}
	prefix := l.freePrefix()
	l.host = prefix.Addr().Next()
	bits := fmt.Sprintf("/%d", prefix.Bits())
	steps := [][]string{
		{"-n", l.hub, "link", "set", "lo", "up"},
		{"-n", l.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", l.hub, "link", "set", "br0", "up"},
		{"link", "add", l.rootIf, "type", "veth", "peer", "name", "root", "netns", l.hub},
		{"-n", l.hub, "link", "set", "dev", "root", "master", "br0", "up"},
		{"addr", "add", l.host.String() + bits, "dev", l.rootIf},
		{"link", "set", "dev", l.rootIf, "up"},
	}
	addr := l.host
	for i := range n {
		addr = addr.Next()
		node := labNode{ns: fmt.Sprintf("%sn%d", tag, i), addr: addr}
		l.nodes = append(l.nodes, node)
		port := fmt.Sprintf("n%d", i)
		steps = append(steps,
			[]string{"netns", "add", node.ns},
			[]string{"-n", node.ns, "link", "set", "lo", "up"},
			[]string{"-n", l.hub, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", node.ns},
			[]string{"-n", l.hub, "link", "set", "dev", port, "master", "br0", "up"},
			[]string{"-n", node.ns, "addr", "add", addr.String() + bits, "dev", "eth0"},
			[]string{"-n", node.ns, "link", "set", "dev", "eth0", "up"},
		)
	}
	for _, s := range steps {
		if out, err := l.cmd(s...); err != nil {
			t.Fatalf("netlab: ip %s: %v: %s", strings.Join(s, " "), err, out)
		}
	}
	return l
}

func (l *netLab) cmd(args ...string) ([]byte, error) {
	return exec.Command(l.ip, args...).CombinedOutput()
}

// freePrefix picks a /24 in 10.64.0.0/10 from the pid that overlaps no
// route of the root namespace (another run's lab, or a real network).
func (l *netLab) freePrefix() netip.Prefix {
	out, err := l.cmd("-4", "route", "show", "table", "all")
	if err != nil {
		l.t.Fatalf("netlab: ip route: %v: %s", err, out)
	}
	var used []netip.Prefix
	for line := range strings.Lines(string(out)) {
		for _, f := range strings.Fields(line) {
			if f == "default" {
				break
			}
			if p, err := netip.ParsePrefix(f); err == nil {
				used = append(used, p)
				break
			}
			if a, err := netip.ParseAddr(f); err == nil {
				used = append(used, netip.PrefixFrom(a, 32))
				break
			}
		}
	}
	start := os.Getpid() % (64 * 256)
	for k := range 64 * 256 {
		idx := (start + k) % (64 * 256)
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(64 + idx/256), byte(idx % 256), 0}), 24)
		free := true
		for _, u := range used {
			free = free && !p.Overlaps(u)
		}
		if free {
			return p
		}
	}
	l.t.Fatal("netlab: no free /24 in 10.64.0.0/10")
	return netip.Prefix{}
}

// destroy deletes the namespaces (which destroys the veths and the rules
// in them) and the root's veth, and fails the test if any is left.
func (l *netLab) destroy() {
	for _, n := range l.nodes {
		_, _ = l.cmd("netns", "del", n.ns)
	}
	_, _ = l.cmd("netns", "del", l.hub)
	_, _ = l.cmd("link", "del", l.rootIf) // usually gone with the hub
	out, err := l.cmd("netns", "list")
	tag := strings.TrimSuffix(l.hub, "hub")
	if err == nil && strings.Contains(string(out), tag) {
		l.t.Errorf("netlab: namespaces left behind: %s", out)
	}
	if out, err := l.cmd("-br", "link", "show", l.rootIf); err == nil {
		l.t.Errorf("netlab: veth left behind: %s", out)
	}
}

// exec returns the arguments that run bin inside node i's namespace.
func (l *netLab) execArgs(i int, bin string) []string {
	return []string{"netns", "exec", l.nodes[i].ns, bin}
}

// hostAddr returns a host:port on the root namespace's lab address that
// was free a moment ago.
func (l *netLab) hostAddr() string {
	l.t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(l.host.String(), "0"))
	if err != nil {
		l.t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// isolate cuts node i off from every other node and from the root
// namespace's port blocked (etcd), in both directions, with nft drop rules
// inside its namespace. Everything else of the root namespace (PostgreSQL,
// the sandbox, the test's client) stays reachable.
func (l *netLab) isolate(i int, blocked int) {
	l.t.Helper()
	var peers []string
	for j, n := range l.nodes {
		if j != i {
			peers = append(peers, n.addr.String())
		}
	}
	set := "{ " + strings.Join(peers, ", ") + " }"
	rules := fmt.Sprintf(`table inet %[1]s {
	chain input {
		type filter hook input priority filter; policy accept;
		ip saddr %[2]s drop
		ip saddr %[3]s tcp sport %[4]d drop
	}
	chain output {
		type filter hook output priority filter; policy accept;
		ip daddr %[2]s drop
		ip daddr %[3]s tcp dport %[4]d drop
	}
}
`, partitionTable, set, l.host, blocked)
	c := exec.Command(l.ip, "netns", "exec", l.nodes[i].ns, l.nft, "-f", "-")
	c.Stdin = strings.NewReader(rules)
	if out, err := c.CombinedOutput(); err != nil {
		l.t.Fatalf("netlab: nft in %s: %v: %s\n%s", l.nodes[i].ns, err, out, rules)
	}
}

// heal deletes node i's drop rules.
func (l *netLab) heal(i int) {
	l.t.Helper()
	if out, err := l.cmd("netns", "exec", l.nodes[i].ns, l.nft, "delete", "table", "inet", partitionTable); err != nil {
		l.t.Fatalf("netlab: heal %s: %v: %s", l.nodes[i].ns, err, out)
	}
}

// reaches reports whether a TCP connection from node i's namespace to
// addr succeeds within a second (bash's /dev/tcp: no extra tool needed).
func (l *netLab) reaches(i int, addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		l.t.Fatal(err)
	}
	script := fmt.Sprintf("exec 3<>/dev/tcp/%s/%s", host, port)
	return exec.Command(l.ip, "netns", "exec", l.nodes[i].ns, "timeout", "1", "bash", "-c", script).Run() == nil
}

// forwardTCP accepts on listen and pipes each connection to target until
// the test ends: it makes a loopback-only server (PostgreSQL) reachable
// from the namespaces without changing its configuration. It returns the
// listening address.
func forwardTCP(t *testing.T, listen, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if on && conns == nil {
			return false // closed
		}
		if on {
			conns[c] = true
		} else if conns != nil {
			delete(conns, c)
		}
		return true
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				in.Close()
				continue
			}
			if !track(in, true) || !track(out, true) {
				in.Close()
				out.Close()
				return
			}
			wg.Add(2)
			pipe := func(dst, src net.Conn) {
				defer wg.Done()
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				track(dst, false)
				track(src, false)
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// dsnVia forwards listen to the server of a postgres:// DSN (forwardTCP)
// and returns the DSN rewritten to connect through the forwarder, and the
// forwarder's address.
func dsnVia(t *testing.T, dsn, listen string) (string, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil || u.Host == "" {
		t.Fatalf("partition test needs a postgres://HOST:PORT DSN, got %q (%v)", dsn, err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	u.Host = forwardTCP(t, listen, target)
	return u.String(), u.Host
}

// startSimAt is startSim listening on listen instead of loopback, so that
// the namespaces reach it.
func startSimAt(t *testing.T, bin, dir, listen string, o simOptions) *wxsim {
	t.Helper()
	keys := filepath.Join(dir, "keys")
	args := []string{"--listen", listen, "--keys-dir", keys, "--state-file", filepath.Join(dir, "books.json"),
		"--processing-delay", o.processingDelay, "--time-factor", o.timeFactor, "--log-level", "info"}
	d := startDaemon(t, bin, "wxpaysim: point refundd at it with:", nil, nil, args...)
	raw, err := os.ReadFile(filepath.Join(keys, sandbox.ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	s := &wxsim{d: d, keys: keys, http: &http.Client{Timeout: 10 * time.Second}}
	if err := json.Unmarshal(raw, &s.man); err != nil || s.man.BaseURL == "" {
		t.Fatalf("wxpaysim manifest %s: %v", raw, err)
	}
	s.url = s.man.BaseURL
	return s
}
