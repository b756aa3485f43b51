package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/actors/cluster"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/metrics"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal"
)

// ClusterConfig is cluster mode: several refundd nodes on one PostgreSQL
// journal, reservations placed on nodes by protoactor-go's cluster
// (docs/CLUSTER.md). Empty Membership is the default single-node mode
// (bbolt under --data), unchanged.
type ClusterConfig struct {
	Journal       string // --journal: "" (bbolt under --data) or postgres://...
	JournalSchema string // --journal-schema
	Membership    string // --cluster: etcd://... or automanaged://... (cluster.ParseMembership)
	Listen        string // --cluster-listen
	Advertise     string // --cluster-advertise: when Listen is not reachable as such (containers, NAT)
	Name          string // --cluster-name
	NodeID        string // --node-id: names this node in the journal's rows
}

// clusterFlags defines cluster mode's flags.
func clusterFlags(t *flagTable, c *ClusterConfig) {
	t.def(&c.Journal, "journal",
		"journal: empty for the bbolt file under --data, or postgres://... (cluster mode; password in PGPASSWORD or ~/.pgpass)")
	t.def(&c.JournalSchema, "journal-schema", "PostgreSQL schema of the journal's tables; empty: public")
	t.def(&c.Membership, "cluster",
		"cluster membership: etcd://HOST:PORT[,...][/PREFIX][?ttl=5s] or automanaged://HOST:PORT,...?port=THIS_NODES_PORT; empty: single node")
	t.def(&c.Listen, "cluster-listen", "address this node's actors listen on for other nodes (host:port; port 0 picks one)")
	t.def(&c.Advertise, "cluster-advertise", "host:port other nodes dial; empty: the --cluster-listen address")
	t.def(&c.Name, "cluster-name", "cluster name; nodes with the same name and membership form one cluster")
	t.def(&c.NodeID, "node-id", "this node's name in the journal; empty: host name and --listen address")
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
	if _, _, err := cluster.SplitAddress(cc.Listen); err != nil {
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

// openCluster opens cluster mode's PostgreSQL journal; its start runs
// this node's engine inside a cluster node, which routes every call of the
// API, and the scheduler runs the due times this node owns.
func (m *Main) openCluster(ctx context.Context, _ *checked) (*backend, error) {
	c := m.Config
	cc := c.Cluster
	membership, err := cluster.ParseMembership(cc.Membership)
	if err != nil {
		return nil, fmt.Errorf("--cluster: %w", err)
	}
	if err := m.listen(); err != nil { // the node id may name its address
		return nil, err
	}
	nodeID := cc.NodeID
	if nodeID == "" {
		host, _ := os.Hostname()
		nodeID = host + "/" + m.ln.Addr().String()
	}
	pg, err := pgjournal.Open(ctx, cc.Journal, &pgjournal.Options{NodeID: nodeID, Schema: cc.JournalSchema, Logger: m.log,
		OnCommit: func(ci journal.CommitInfo) { m.metrics.ObserveCommit(ci.Batch, ci.Duration, ci.Sync, ci.Err) }})
	if err != nil {
		return nil, fmt.Errorf("--journal: %w", err)
	}
	be := &backend{db: pg, owner: nodeID, prefix: c.RefundNoPrefix, started: "refundd started in cluster mode",
		closeJournal: func(context.Context) error { return pg.Close() }, totals: eventstore.Totals{DB: pg}}
	var node *cluster.Node
	be.start = func(ctx, _ context.Context, w *wiredProvider, policies enginePolicies) error {
		host, port, _ := cluster.SplitAddress(cc.Listen) // validated
		store := eventstore.New(pg)
		var err error
		node, err = cluster.Start(ctx, cluster.Config{
			Engine:     m.engineConfig(store, w, policies),
			Membership: membership, Name: cc.Name, Host: host, Port: port, AdvertisedAddress: cc.Advertise, Logger: m.log,
		})
		if err != nil {
			return err
		}
		be.closeActors = node.Close // it leaves the membership once its calls are done
		// The others' view of a dead node's reservations changes only when
		// the membership drops it; operators (and tests) see when that
		// happened.
		if err := m.metrics.Gauge("cluster_members", "Members of the cluster in this node's view of the membership (0 while it rejoins).",
			func() float64 { return float64(node.Members()) }); err != nil {
			return err
		}
		be.scheduler = node.RunScheduler
		// A tiny durable write proves the journal takes writes; /readyz is
		// open, so requests share one write per interval. Membership is
		// checked on every request: a fenced node answers 503 at once.
		writeProbe := api.ShareProbe(func(ctx context.Context) error {
			return pg.Put(ctx, "health/ready-probe/"+nodeID, []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		}, m.readyEvery)
		be.ready = func(ctx context.Context) error {
			if node.MemberID() == "" {
				return errors.New("not a cluster member (joining, or fenced after losing the membership lease)")
			}
			return writeProbe(ctx)
		}
		// An abandon asks WeChat Pay from this node; the owner journals the
		// answer with the release.
		queried := m.metrics.Provider(w.provider)
		be.engine = nodeEngine{Node: node, query: func(ctx context.Context, no string) reservation.Outcome {
			ctx, cancel := context.WithTimeout(ctx, c.ProviderTimeout) // as the engine's calls, pacing wait included
			defer cancel()
			return queried.Query(ctx, no)
		}}
		be.sources = metrics.Sources{Active: node.Active, Attention: node.Attention, DueBefore: store.DueBefore}
		be.logAttrs = []any{"node", nodeID, "member", node.MemberID(), "cluster_address", node.Address(), "members", node.Members(),
			"membership", membership.String()}
		be.line = fmt.Sprintf(" (cluster node %s at %s)", nodeID, node.Address())
		return nil
	}
	// One node at a time dispatches webhooks: the leader, by an etcd
	// election with etcd membership, a PostgreSQL advisory lock with
	// automanaged membership (docs/CLUSTER.md, "Webhook dispatch").
	be.webhooks = func(eps []webhook.Endpoint, merchants []string) (dispatch, error) {
		log := m.log.With("component", "webhook")
		value := nodeID + " " + m.ln.Addr().String()
		var el webhook.Elector
		switch membership.(type) {
		case cluster.Etcd, *cluster.Etcd:
			el = node.Election("webhooks", value)
		default:
			el = &pgjournal.LockElector{DSN: cc.Journal, Key: pgjournal.AdvisoryKey("webhooks", cc.JournalSchema, cc.Name),
				Name: "webhook leader lock", Value: value, Logger: log}
		}
		w, err := webhook.NewLeader(webhook.Config{Endpoints: eps, Merchants: merchants, Logger: log, Tally: m.tally}, pg, el, webhook.LeaderTiming{})
		if err != nil {
			return dispatch{}, err
		}
		if err := m.metrics.Gauge("webhook_leader", "1 while this node runs webhook dispatch (the cluster's webhook leader), else 0.", func() float64 {
			if w.Leading() {
				return 1
			}
			return 0
		}); err != nil {
			return dispatch{}, err
		}
		log.Info("webhook dispatch: campaigning for leadership", "endpoints", len(eps), "node", value)
		return dispatch{api: w, lag: w.LeaderLag, run: w.Run,
			stopped: "webhook dispatch: leader election stopped; this node will not dispatch"}, nil
	}
	return be, nil
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
