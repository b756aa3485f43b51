package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// ClusterConfig is cluster mode: several refundd nodes on one PostgreSQL
// journal, reservations placed on nodes by protoactor-go's cluster
// (docs/CLUSTER.md). Empty Membership is the default single-node mode
// (bbolt under --data), unchanged.
type ClusterConfig struct {
	// Journal is "" (the bbolt file under --data) or a PostgreSQL URL
	// (postgres://...). Put the password in PGPASSWORD or ~/.pgpass, not in
	// the URL: flags show in ps.
	Journal string
	// JournalSchema is the PostgreSQL schema of the journal's tables;
	// empty means public.
	JournalSchema string
	// Membership is how nodes find each other: etcd://... or
	// automanaged://... (cluster.ParseMembership).
	Membership string
	// Listen is where this node's actors listen for other nodes
	// (host:port; port 0 picks one).
	Listen string
	// Advertise is the host:port other nodes dial, when Listen is not
	// reachable as such (containers, NAT); empty means the bound address.
	Advertise string
	// Name of the cluster; nodes with the same name form one.
	Name string
	// NodeID names this node in the journal's rows; empty means the host
	// name and the HTTP address.
	NodeID string
}

// clusterFlags defines cluster mode's flags.
func clusterFlags(fs *flag.FlagSet, c *ClusterConfig, str func(p *string, name, env, usage string)) {
	str(&c.Journal, "journal", "REFUNDD_JOURNAL",
		"journal: empty for the bbolt file under --data, or postgres://... (cluster mode; password in PGPASSWORD or ~/.pgpass)")
	str(&c.JournalSchema, "journal-schema", "REFUNDD_JOURNAL_SCHEMA", "PostgreSQL schema of the journal's tables; empty: public")
	str(&c.Membership, "cluster", "REFUNDD_CLUSTER",
		"cluster membership: etcd://HOST:PORT[,...][/PREFIX][?ttl=5s] or automanaged://HOST:PORT,...?port=THIS_NODES_PORT; empty: single node")
	str(&c.Listen, "cluster-listen", "REFUNDD_CLUSTER_LISTEN", "address this node's actors listen on for other nodes (host:port; port 0 picks one)")
	str(&c.Advertise, "cluster-advertise", "REFUNDD_CLUSTER_ADVERTISE", "host:port other nodes dial; empty: the --cluster-listen address")
	str(&c.Name, "cluster-name", "REFUNDD_CLUSTER_NAME", "cluster name; nodes with the same name and membership form one cluster")
	str(&c.NodeID, "node-id", "REFUNDD_NODE_ID", "this node's name in the journal; empty: host name and --listen address")
}

// on reports whether cluster mode is configured.
func (c *ClusterConfig) on() bool { return c.Membership != "" }

// validateCluster checks cluster mode's settings against the rest.
func (c *Config) validateCluster() error {
	cc := &c.Cluster
	pg := strings.HasPrefix(cc.Journal, "postgres://") || strings.HasPrefix(cc.Journal, "postgresql://")
	switch {
	case cc.Journal != "" && !pg:
		return errors.New("--journal must be empty (bbolt under --data) or a postgres:// URL")
	case pg && !cc.on():
		return errors.New("--journal postgres://... needs --cluster (a one-node cluster is fine): the PostgreSQL journal is for cluster mode")
	case !cc.on():
		return nil
	case !pg:
		return errors.New("--cluster needs --journal postgres://...: every node must write the same journal")
	}
	if _, err := cluster.ParseMembership(cc.Membership); err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	if _, _, err := splitListen(cc.Listen); err != nil {
		return fmt.Errorf("--cluster-listen: %w", err)
	}
	if c.Provider != providerWechatpay {
		return errors.New("cluster mode needs --provider wechatpay (WeChat Pay, or cmd/wxpaysim to try it): " +
			"the built-in sandbox and the memory provider keep their books inside one process, and every node must talk to the same WeChat Pay")
	}
	if c.CheckpointKeyFile != "" {
		return errors.New("--checkpoint-key is not supported in cluster mode yet (docs/CLUSTER.md)")
	}
	return nil
}

func splitListen(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return host, port, nil
}

// clusterMode is what Run started in cluster mode, for Close.
type clusterMode struct {
	node *cluster.Node
	pg   *pgjournal.DB
}

// runCluster is Run in cluster mode: the PostgreSQL journal, this node's
// engine inside a cluster node, the scheduler of the due times this node
// owns, and the HTTP API routing every call through the cluster.
func (m *Main) runCluster(ctx context.Context) error {
	c := m.Config
	cc := c.Cluster
	membership, err := cluster.ParseMembership(cc.Membership)
	if err != nil {
		return fmt.Errorf("--cluster: %w", err)
	}
	policy, err := c.policy()
	if err != nil {
		return err
	}
	// Listen first: the provider needs our notification URL.
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return fmt.Errorf("listen %s: %w", c.Listen, err)
	}
	m.ln = ln
	nodeID := cc.NodeID
	if nodeID == "" {
		host, _ := os.Hostname()
		nodeID = host + "/" + ln.Addr().String()
	}
	pg, err := pgjournal.Open(ctx, cc.Journal, &pgjournal.Options{NodeID: nodeID, Schema: cc.JournalSchema, Logger: m.log,
		OnCommit: func(ci journal.CommitInfo) { m.metrics.ObserveCommit(ci.Batch, ci.Duration, ci.Sync, ci.Err) }})
	if err != nil {
		m.Close()
		return fmt.Errorf("--journal: %w", err)
	}
	m.cl = &clusterMode{pg: pg}
	wired, err := m.wireProvider("http://" + ln.Addr().String())
	if err != nil {
		m.Close()
		return err
	}
	m.provider = wired
	host, port, _ := splitListen(cc.Listen) // validated
	store := eventstore.New(pg)
	node, err := cluster.Start(ctx, cluster.Config{
		Engine: actors.Config{Store: m.metrics.Store(store), Provider: m.metrics.Provider(wired.provider), Encode: wired.encode, Logger: m.log,
			Policy: policy, IdleTimeout: c.IdleTimeout, Merchant: wired.merchant()},
		Membership: membership, Name: cc.Name, Host: host, Port: port, AdvertisedAddress: cc.Advertise, Logger: m.log,
	})
	if err != nil {
		m.Close()
		return err
	}
	m.cl.node = node
	// The others' view of a dead node's reservations changes only when the
	// membership drops it; operators (and tests) see when that happened.
	if err := m.metrics.Registry().Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "refundd", Name: "cluster_members",
		Help: "Members of the cluster in this node's view of the membership (0 while it rejoins).",
	}, func() float64 { return float64(node.Members()) })); err != nil {
		m.Close()
		return fmt.Errorf("cluster members gauge: %w", err)
	}

	schCtx, stopSch := context.WithCancel(context.Background())
	m.stopSch = stopSch
	m.bg.Add(1)
	go func() { defer m.bg.Done(); node.RunScheduler(schCtx, c.SchedulerInterval) }()

	// A tiny durable write proves the journal takes writes; /readyz is
	// open, so requests share one write per interval. Membership is checked
	// on every request: a fenced node answers 503 at once.
	writeProbe := api.ShareProbe(func(ctx context.Context) error {
		return pg.Put(ctx, "health/ready-probe/"+nodeID, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
	}, m.readyEvery)
	opts := api.Options{Logger: m.log, Ready: func(ctx context.Context) error {
		if node.MemberID() == "" {
			return errors.New("not a cluster member (joining, or fenced after losing the membership lease)")
		}
		return writeProbe(ctx)
	}, Metrics: m.metrics.Handler(), Observer: m.metrics, Timeline: eventstore.Reader{DB: pg}}
	opts.NoAccessLog = !c.AccessLog
	if c.MetricsPublic {
		opts.PublicRoutes = map[string]bool{"GET /metrics": true}
	}
	// An abandon asks WeChat Pay from this node; the owner journals the
	// answer with the release.
	queried := m.metrics.Provider(wired.provider)
	eng := nodeEngine{Node: node, query: func(ctx context.Context, no string) reservation.Outcome {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // the engine's default provider timeout
		defer cancel()
		return queried.Query(ctx, no)
	}}
	tokens, err := m.loadTokens()
	if err != nil {
		m.Close()
		return err
	}
	opts.Auth = tokens
	if wired.notify != nil {
		q, err := quarantine.Open(filepath.Join(c.DataDir, "quarantine"), quarantine.Options{})
		if err != nil {
			m.Close()
			return err
		}
		n := *wired.notify
		n.Quarantine = q
		opts.Notify = &n
	}
	// The event feed reads the shared journal in global order: every node
	// serves the same feed.
	m.feedDone = make(chan struct{})
	opts.Events = &api.EventsConfig{Feed: feed.New(pg), Done: m.feedDone}
	sources := metrics.Sources{Active: node.Active, Attention: node.Attention, DueBefore: store.DueBefore}
	if c.WebhooksFile != "" {
		// One node at a time dispatches: the leader (cluster_webhook.go).
		hooks, err := m.startClusterWebhooks(node, pg, membership, nodeID, ln.Addr().String())
		if err != nil {
			m.Close()
			return err
		}
		opts.Events.Webhooks, sources.Webhooks = hooks, hooks.LeaderLag
	}
	srv := api.New(eng, opts)
	if st := srv.NotifyStats(); st != nil {
		sources.Notifications = st.Snapshot
	}
	if err := m.metrics.Watch(sources); err != nil {
		m.Close()
		return err
	}
	if err := m.serveHTTP(ln, srv); err != nil {
		m.Close()
		return err
	}
	m.log.Info("refundd started in cluster mode", "listen", ln.Addr().String(), "node", nodeID,
		"member", node.MemberID(), "cluster_address", node.Address(), "members", node.Members(),
		"membership", membership.String(), "provider", wired.describe, "refund_prefix", policy.RefundNoPrefix)
	scheme := "http"
	if c.TLSCert != "" {
		scheme = "https"
	}
	fmt.Fprintf(m.Stdout, "refundd listening on %s://%s (cluster node %s at %s)\n", scheme, ln.Addr(), nodeID, node.Address())
	return nil
}

// nodeEngine is the API's engine in cluster mode: the node routes each call
// to the reservation's owner, and an abandon first asks WeChat Pay from
// this node, whose provider the wiring holds.
type nodeEngine struct {
	*cluster.Node
	query actors.QueryFunc
}

// Abandon releases a REJECTED refund's amount only on a fresh "not found"
// from WeChat Pay; see actors.AbandonChecked.
func (e nodeEngine) Abandon(ctx context.Context, id, by string, c reservation.Abandon) (*reservation.State, []reservation.Event, error) {
	return actors.AbandonChecked(ctx, e.Node, e.query, time.Now, id, by, c)
}

var _ api.Engine = nodeEngine{}

// closeNode stops the cluster node: in-flight provider calls finish while
// it still owns its reservations, then it leaves the membership.
func (cm *clusterMode) closeNode(ctx context.Context) error {
	if cm == nil || cm.node == nil {
		return nil
	}
	return cm.node.Close(ctx)
}

func (cm *clusterMode) closeJournal() error {
	if cm == nil || cm.pg == nil {
		return nil
	}
	return cm.pg.Close()
}
