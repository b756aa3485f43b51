package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// Log lines of actors/cluster that show a node fenced itself and came back.
const (
	logSelfFencing = "cluster: self-fencing: stopping every reservation actor"
	logRejoined    = "cluster: rejoined"
)

// partitionSettings reads the long form's knobs: PARTITION_DURATION (how
// long a node stays cut off, default 5s, at least 3s: longer than the 2s
// lease TTL) and PARTITION_ROUNDS (how many partitions, each of another
// node, default 1).
func partitionSettings(t *testing.T, ttl time.Duration) (hold time.Duration, rounds int) {
	t.Helper()
	hold, rounds = 5*time.Second, 1
	if s := os.Getenv("PARTITION_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil || d < ttl+time.Second {
			t.Fatalf("PARTITION_DURATION=%q: want a duration of at least %s (longer than the lease TTL %s)", s, ttl+time.Second, ttl)
		}
		hold = d
	}
	if s := os.Getenv("PARTITION_ROUNDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("PARTITION_ROUNDS=%q: want a positive integer", s)
		}
		rounds = n
	}
	return hold, rounds
}

// partitionRound is one partition: which node, when it was cut off, when
// the test saw it fence itself, and when it was healed.
type partitionRound struct {
	node        int
	cut, healed time.Time
	fenced      time.Time // the node's own log time of its fence
}

// partitionTry is one HTTP call of the load.
type partitionTry struct {
	node       int
	start, end time.Time
	code       int // 0: no answer
}

// summarize counts the answers of the tries that pred selects, by status,
// with the longest wait.
func summarize(tries []partitionTry, pred func(partitionTry) bool) string {
	counts := map[int]int{}
	var longest time.Duration
	for _, tr := range tries {
		if pred(tr) {
			counts[tr.code]++
			longest = max(longest, tr.end.Sub(tr.start))
		}
	}
	codes := slices.Sorted(maps.Keys(counts))
	var b strings.Builder
	for _, c := range codes {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "no answer"
		}
		fmt.Fprintf(&b, "%s x%d, ", name, counts[c])
	}
	fmt.Fprintf(&b, "longest %s", longest.Round(time.Millisecond))
	return b.String()
}

// TestCluster_PartitionedNode runs three refundd nodes, each in its own
// network namespace, on one PostgreSQL journal with an embedded etcd for
// membership and wxpaysim as WeChat Pay. Under concurrent refunds
// (duplicates and over-refund attempts included) one node is cut off from
// the other nodes and from etcd by nft drop rules inside its namespace,
// for longer than the membership lease. It keeps PostgreSQL, WeChat Pay
// and its clients: the harder case, where nothing but self-fencing and the
// journal's epoch keeps its stale actors from writing. Clients keep
// sending through every node, the isolated one included. Then the rules
// are deleted and the node rejoins.
//
// The isolated node must fence itself (log line, /readyz 503), accept
// nothing once fenced and activate no stream while cut off; the others
// must take over its reservations. At the end the SIGKILL test's
// invariants hold: every order's refunded total at WeChat equals
// refundd's SUCCEEDED total and is at most what was paid, WeChat has no
// refund refundd does not know, no refund number was sent with two bodies,
// and the journal verifies (contiguous streams, every event written under
// the epoch current then).
func TestCluster_PartitionedNode(t *testing.T) {
	const n, ttl = 3, 2 * time.Second
	lab := newNetLab(t, n) // skips where namespaces cannot be made
	store := pgtest.New(t) // skips without REFUNDD_TEST_POSTGRES (fails under CI=true)
	hold, rounds := partitionSettings(t, ttl)
	bin, wxBin, etcdBin := buildClusterBinaries(t)
	dir := t.TempDir()

	dsn, pgAddr := dsnVia(t, store.DSN, net.JoinHostPort(lab.host.String(), "0"))
	sim := startSimAt(t, wxBin, dir, net.JoinHostPort(lab.host.String(), "0"), simOptions{processingDelay: "50s", timeFactor: "0.01"})
	etcdAddr := lab.hostAddr()
	startDaemon(t, etcdBin, "devetcd listening on ", nil, nil, "--dir", filepath.Join(dir, "etcd"), "--no-fsync", "--listen", etcdAddr)
	_, etcdPortS, _ := net.SplitHostPort(etcdAddr)
	etcdPort, _ := strconv.Atoi(etcdPortS)

	procs := make([]*refunddProc, n)
	daemons := make([]*daemon, n)
	addr := func(i int) string { return net.JoinHostPort(lab.nodes[i].addr.String(), "8080") }
	base := func(i int) string { return "http://" + addr(i) }
	for i := range procs {
		p := newRefundd(bin, filepath.Join(dir, fmt.Sprintf("node%d", i)), addr(i), sim, false,
			"--journal", dsn, "--journal-schema", store.Schema, "--cluster", "etcd://"+etcdAddr+"?ttl="+ttl.String(),
			"--cluster-listen", net.JoinHostPort(lab.nodes[i].addr.String(), "7000"), "--node-id", fmt.Sprintf("node%d", i),
			"--idle-timeout", "5s")
		// ip netns exec execs the binary: the daemon's pid is refundd's.
		p.flags = append(lab.execArgs(i, p.bin), p.flags...)
		p.bin = lab.ip
		procs[i] = p
	}
	var wg sync.WaitGroup
	for i := range procs {
		wg.Add(1)
		go func() { defer wg.Done(); daemons[i] = procs[i].start(t) }()
	}
	wg.Wait()
	defer func() {
		if t.Failed() {
			for i := range procs {
				t.Logf("node%d logs:\n%s\nfencing:\n%s", i, tail(procs[i].logs.String(), 40), grepLines(procs[i].logs.String(), "fenc", 20))
			}
		}
	}()

	// Reservations come in waves: one before the first partition, one per
	// partition and one per heal, so fresh refunds start in every phase.
	const paid, wave = 10000, 12
	var res []string
	for i := range wave * (1 + 2*rounds) {
		id := fmt.Sprintf("p%02d", i)
		res = append(res, id)
		sim.createOrder(t, "ORD-"+id, paid)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		code, body, err := apiCall(ctx, base(i%n), "POST", "/v1/reservations", "",
			map[string]any{"id": id, "user_id": "u-" + id, "amount": paid, "out_trade_no": "ORD-" + id, "currency": "CNY"})
		cancel()
		if err != nil || code != http.StatusCreated {
			t.Fatalf("register %s: %d %v %v", id, code, body, err)
		}
	}

	// Load: six keys of 2,000 or 3,000 fen per reservation (15,000 asked
	// of 10,000 paid), each sent many times. Clients are behind a load
	// balancer without health checks: a job's first try goes to a random
	// node, and each retry (on a 5xx or no answer) to the next node.
	var phase atomic.Int32 // 2r+1 while round r's node is cut off, 2r+2 after
	var sent, accepted, refused, failed atomic.Int64
	var triesMu sync.Mutex
	var tries []partitionTry
	work := make(chan int)
	var load sync.WaitGroup
	for range 16 {
		load.Add(1)
		go func() {
			defer load.Done()
			for j := range work {
				rng := rand.New(rand.NewPCG(uint64(j), 13))
				pool := res[:wave*(1+int(phase.Load()))]
				id := pool[rng.IntN(len(pool))]
				if rng.IntN(2) == 0 { // favour the newest wave
					id = pool[len(pool)-wave+rng.IntN(wave)]
				}
				k := rng.IntN(6)
				body := map[string]any{"user_id": "u-" + id, "amount": 2000 + 1000*(k%2)}
				first := rng.IntN(n)
				var code int
				var err error
				var last string
				for attempt := range 8 {
					if attempt > 0 {
						time.Sleep(200 * time.Millisecond) // a load balancer's retry pause
					}
					node := (first + attempt) % n
					// A load balancer gives up on an upstream after a few
					// seconds and retries elsewhere (the outcome unknown).
					ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
					start := time.Now()
					var out map[string]any
					code, out, err = apiCall(ctx, base(node), "POST", "/v1/reservations/"+id+"/refunds", fmt.Sprintf("k%d", k), body)
					end := time.Now()
					cancel()
					triesMu.Lock()
					tries = append(tries, partitionTry{node: node, start: start, end: end, code: code})
					triesMu.Unlock()
					last = fmt.Sprintf("node%d %s %v", node, end.Format("15:04:05.000"), out)
					if err == nil && code < 500 {
						break
					}
				}
				sent.Add(1)
				switch {
				case err == nil && code/100 == 2:
					accepted.Add(1)
				case err == nil && code == http.StatusConflict:
					refused.Add(1)
				default:
					failed.Add(1)
					t.Logf("%s key k%d: failed after 8 tries: last %d %s %v", id, k, code, last, err)
				}
			}
		}()
	}
	stop := make(chan struct{})
	go func() {
		defer close(work)
		for j := 0; ; j++ {
			select {
			case work <- j:
			case <-stop:
				return
			}
		}
	}()
	stopped := false
	stopLoad := func() {
		if !stopped {
			stopped = true
			close(stop)
			load.Wait()
		}
	}
	defer stopLoad()
	// waitDone waits until d has passed since from and at least more jobs
	// have completed since now: load runs in every phase.
	waitDone := func(from time.Time, d time.Duration, more int64, what string) {
		t.Helper()
		target := sent.Load() + more
		<-time.After(time.Until(from.Add(d)))
		waitFor(t, 60*time.Second, what, func() (bool, string) {
			return sent.Load() >= target, fmt.Sprintf("%d of %d jobs done", sent.Load(), target)
		})
	}
	ready := func(i int) int {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		code, _, err := apiCall(ctx, base(i), "GET", "/readyz", "", nil)
		if err != nil {
			return 0
		}
		return code
	}

	waitDone(time.Now(), 2*time.Second, 40, "load before the partition")
	var done []partitionRound
	for r := range rounds {
		iso := (n - 1 + r) % n
		other := (iso + 1) % n
		if !lab.reaches(iso, addr(other)) || !lab.reaches(iso, etcdAddr) {
			t.Fatalf("round %d: node%d cannot reach node%d or etcd before the partition", r, iso, other)
		}
		fencesBefore := strings.Count(procs[iso].logs.String(), logSelfFencing)
		rejoinsBefore := strings.Count(procs[iso].logs.String(), logRejoined)
		pr := partitionRound{node: iso, cut: time.Now()}
		lab.isolate(iso, etcdPort)
		inPlace := time.Since(pr.cut)
		phase.Store(int32(2*r + 1))
		if lab.reaches(iso, addr(other)) || lab.reaches(iso, etcdAddr) {
			t.Fatalf("round %d: node%d still reaches node%d or etcd after the nft rules", r, iso, other)
		}
		if !lab.reaches(iso, strings.TrimPrefix(sim.url, "http://")) || !lab.reaches(iso, pgAddr) {
			t.Fatalf("round %d: node%d lost WeChat Pay or PostgreSQL: only the nodes and etcd should be cut off", r, iso)
		}
		waitFor(t, 3*ttl, fmt.Sprintf("node%d to fence itself (log %q)", iso, logSelfFencing), func() (bool, string) {
			s := procs[iso].logs.String()
			return strings.Count(s, logSelfFencing) > fencesBefore, tail(s, 5)
		})
		pr.fenced = logTime(t, procs[iso].logs.String(), logSelfFencing)
		t.Logf("round %d: node%d cut off (rules in place after %s); it fenced itself %s after the cut:\n%s", r, iso,
			inPlace.Round(time.Millisecond), pr.fenced.Sub(pr.cut).Round(time.Millisecond),
			grepLines(procs[iso].logs.String(), "membership lease", 3))
		if code := ready(iso); code != http.StatusServiceUnavailable {
			t.Errorf("round %d: fenced node%d answers /readyz %d, want 503", r, iso, code)
		}
		<-time.After(time.Until(pr.cut.Add(hold)))
		if strings.Count(procs[iso].logs.String(), logRejoined) != rejoinsBefore {
			t.Errorf("round %d: node%d rejoined while it could not reach etcd", r, iso)
		}
		lab.heal(iso)
		pr.healed = time.Now()
		phase.Store(int32(2*r + 2))
		waitFor(t, 30*time.Second, fmt.Sprintf("node%d to rejoin and be ready", iso), func() (bool, string) {
			return strings.Count(procs[iso].logs.String(), logRejoined) > rejoinsBefore && ready(iso) == http.StatusOK,
				tail(procs[iso].logs.String(), 5)
		})
		t.Logf("round %d: healed after %s; node%d rejoined %s later", r, pr.healed.Sub(pr.cut).Round(time.Millisecond), iso,
			time.Since(pr.healed).Round(time.Millisecond))
		done = append(done, pr)
		waitDone(pr.healed, 3*time.Second, 40, "load after the heal")
	}
	stopLoad()
	for r, pr := range done {
		during := func(tr partitionTry) bool { return !tr.start.Before(pr.cut) && tr.start.Before(pr.healed) }
		t.Logf("round %d: calls started while node%d was cut off: through it: %s; through the others: %s", r, pr.node,
			summarize(tries, func(tr partitionTry) bool { return during(tr) && tr.node == pr.node }),
			summarize(tries, func(tr partitionTry) bool { return during(tr) && tr.node != pr.node }))
		served := 0
		var wrong []string
		for _, tr := range tries {
			// The fence clears the node's view right after its log line.
			fenced := tr.start.After(pr.fenced.Add(200*time.Millisecond)) && tr.end.Before(pr.healed)
			answered := tr.code != 0 && tr.code < 500
			switch {
			case fenced && answered && tr.node == pr.node:
				wrong = append(wrong, fmt.Sprintf("%d at %s", tr.code, tr.start.Format("15:04:05.000")))
			case fenced && answered:
				served++
			}
		}
		if len(wrong) > 0 {
			t.Errorf("round %d: fenced node%d answered %d calls: %s", r, pr.node, len(wrong), strings.Join(wrong[:min(len(wrong), 5)], ", "))
		}
		if served == 0 {
			t.Errorf("round %d: the other nodes answered no call while node%d was fenced", r, pr.node)
		}
	}
	t.Logf("%d refund requests: %d accepted, %d refused by the rules, %d failed after 8 tries", sent.Load(), accepted.Load(), refused.Load(), failed.Load())
	if failed.Load() > 0 {
		t.Errorf("%d requests failed after 8 tries through every node", failed.Load())
	}

	// Settle: nothing in flight, then compare with WeChat's books.
	if checkClusterBooks(t, sim, base, n, 0, res, paid) == 0 {
		t.Error("no refund succeeded: the load did nothing")
	}
	for i := range procs {
		daemons[i].stop(t)
	}

	// The journal: no activation by a fenced node while it was cut off,
	// its reservations taken over by the others, and Verify.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, store.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	activations := pgx.Identifier{store.Schema, "activations"}.Sanitize()
	for r, pr := range done {
		node := fmt.Sprintf("node%d", pr.node)
		var stale, takeovers, early int
		var first *time.Time
		// activated_at is the activating transaction's start: one that began
		// half a second after the fence's log line began after the fence.
		if err := conn.QueryRow(ctx, "SELECT count(*) FROM "+activations+
			" WHERE node = $1 AND activated_at > $2 AND activated_at < $3",
			node, pr.fenced.Add(500*time.Millisecond), pr.healed).Scan(&stale); err != nil {
			t.Fatal(err)
		}
		// Takeovers: another node activates a stream this one held last.
		// Those before the fence are ordinary moves (a previous round's
		// rejoin still moving reservations), not this partition's.
		if err := conn.QueryRow(ctx, "SELECT count(*) FILTER (WHERE a.activated_at > $3), count(*) FILTER (WHERE a.activated_at <= $3), "+
			"min(a.activated_at) FILTER (WHERE a.activated_at > $3) FROM "+activations+" a JOIN "+activations+
			" p ON p.stream = a.stream AND p.epoch = a.epoch - 1 WHERE p.node = $1 AND a.node <> $1 AND a.activated_at > $2 AND a.activated_at < $4",
			node, pr.cut, pr.fenced, pr.healed).Scan(&takeovers, &early, &first); err != nil {
			t.Fatal(err)
		}
		if first != nil {
			t.Logf("round %d: %d of %s's reservations taken over after it fenced itself (the first %s after; %d moved between the cut and the fence)",
				r, takeovers, node, first.Sub(pr.fenced).Round(time.Millisecond), early)
		}
		if stale > 0 {
			t.Errorf("round %d: %s activated %d streams after it fenced itself, while cut off", r, node, stale)
		}
		if takeovers == 0 {
			t.Errorf("round %d: no reservation of %s was taken over by another node after it fenced itself", r, node)
		}
	}
	if err := store.Open(t, nil).Verify(ctx); err != nil {
		t.Fatal(err)
	}
}

// logTime returns the time of the last JSON log line containing msg.
func logTime(t *testing.T, logs, msg string) time.Time {
	t.Helper()
	var at time.Time
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, msg) {
			continue
		}
		var rec struct {
			Time time.Time `json:"time"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		at = rec.Time
	}
	return at
}
