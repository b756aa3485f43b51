package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	pcluster "github.com/asynkron/protoactor-go/cluster"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Etcd keeps the membership in etcd: each node incarnation puts one key
// under a lease and renews it; the nodes watch the keys. A node that cannot
// renew its lease before it may have expired fences itself (stops its
// actors, leaves, rejoins with a new member id), because by then the others
// may have moved its reservations.
//
// protoactor-go ships an etcd provider too; this one exists because that
// one renews in the background without telling anyone (a node cut off from
// etcd keeps its actors for the whole partition) and re-registers under
// the same member id, which the other nodes have blocked.
type Etcd struct {
	// Endpoints are etcd client URLs or host:port; required.
	Endpoints []string
	// Prefix of the keys; empty means "/refundd". Members live under
	// PREFIX/CLUSTER_NAME/members/.
	Prefix string
	// TTL of the membership lease: how long a dead node keeps its
	// reservations, and how long a cut-off node may take to notice. etcd
	// counts whole seconds; zero means 5s, the minimum is 2s.
	TTL time.Duration
	// DialTimeout bounds connecting to etcd; zero means 5s.
	DialTimeout time.Duration
}

func (e Etcd) String() string {
	return "etcd://" + strings.Join(e.Endpoints, ",") + e.Prefix
}

func (e *Etcd) validate() error {
	if len(e.Endpoints) == 0 {
		return fmt.Errorf("%w: etcd needs at least one endpoint", ErrMembership)
	}
	if e.Prefix == "" {
		e.Prefix = "/refundd"
	}
	if !strings.HasPrefix(e.Prefix, "/") {
		return fmt.Errorf("%w: etcd prefix %q must start with /", ErrMembership, e.Prefix)
	}
	if e.TTL == 0 {
		e.TTL = 5 * time.Second
	}
	if e.TTL < 2*time.Second {
		return fmt.Errorf("%w: etcd lease TTL %s is below 2s", ErrMembership, e.TTL)
	}
	if e.DialTimeout <= 0 {
		e.DialTimeout = 5 * time.Second
	}
	return nil
}

func (e Etcd) open(n *Node) (membership, error) {
	if err := e.validate(); err != nil {
		return nil, err
	}
	client, err := clientv3.New(clientv3.Config{
		Endpoints: e.Endpoints, DialTimeout: e.DialTimeout,
		// Fail calls fast while etcd is unreachable instead of queueing
		// them: the lease check needs a prompt answer.
		DialKeepAliveTime: e.TTL / 2, DialKeepAliveTimeout: e.TTL / 2,
		// The client's own retry warnings would repeat what this package
		// logs about the lease and the watch.
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: etcd %s: %w", e, err)
	}
	return &openedEtcd{cfg: e, client: client, key: e.Prefix + "/" + n.cfg.Name + "/members/", log: n.log}, nil
}

type openedEtcd struct {
	cfg    Etcd
	client *clientv3.Client
	key    string
	log    *slog.Logger
}

func (o *openedEtcd) provider(onLost func(string)) pcluster.ClusterProvider {
	ctx, cancel := context.WithCancel(context.Background())
	return &etcdProvider{o: o, onLost: onLost, ctx: ctx, cancel: cancel, members: map[string]*pcluster.Member{}}
}

func (o *openedEtcd) close() error { return o.client.Close() }

// etcdProvider is one node incarnation's membership.
type etcdProvider struct {
	o      *openedEtcd
	onLost func(string)
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	cluster *pcluster.Cluster
	self    *pcluster.Member
	lease   clientv3.LeaseID
	lost    sync.Once

	mu      sync.Mutex
	members map[string]*pcluster.Member
}

// memberRecord is a member's value in etcd.
type memberRecord struct {
	ID    string   `json:"id"`
	Host  string   `json:"host"`
	Port  int32    `json:"port"`
	Kinds []string `json:"kinds"`
}

func (p *etcdProvider) StartMember(c *pcluster.Cluster) error {
	host, port, err := c.ActorSystem.GetHostPort()
	if err != nil {
		return fmt.Errorf("cluster: etcd: own address: %w", err)
	}
	p.cluster = c
	p.self = &pcluster.Member{Id: c.ActorSystem.ID, Host: host, Port: int32(port), Kinds: c.GetClusterKinds()}
	value, err := json.Marshal(memberRecord{ID: p.self.Id, Host: host, Port: int32(port), Kinds: p.self.Kinds})
	if err != nil {
		return err
	}
	ttl := p.o.cfg.TTL
	ctx, cancel := context.WithTimeout(p.ctx, ttl)
	defer cancel()
	sent := time.Now()
	grant, err := p.o.client.Grant(ctx, int64((ttl+time.Second-1)/time.Second))
	if err != nil {
		return fmt.Errorf("cluster: etcd: grant lease: %w", err)
	}
	p.lease = grant.ID
	if err := p.evictPredecessors(ctx, host, int32(port)); err != nil {
		return err
	}
	if _, err := p.o.client.Put(ctx, p.o.key+p.self.Id, string(value), clientv3.WithLease(grant.ID)); err != nil {
		return fmt.Errorf("cluster: etcd: register: %w", err)
	}
	rev, err := p.list(ctx)
	if err != nil {
		return err
	}
	p.wg.Add(2)
	go p.keepAlive(sent.Add(time.Duration(grant.TTL) * time.Second))
	go p.watch(rev)
	return nil
}

// evictPredecessors deletes the records of earlier incarnations at this
// incarnation's address, which only a dead process (SIGKILLed, crashed,
// fenced without reaching etcd) leaves behind: this one holds the port
// now. Left in place, they keep two members at one address until their
// lease expires, and protoactor, which keeps one connection per address,
// then closes this incarnation's connections with the dead one's, dropping
// the calls in flight to it. Deleted first, the others see the old member
// leave before the new one joins.
func (p *etcdProvider) evictPredecessors(ctx context.Context, host string, port int32) error {
	resp, err := p.o.client.Get(ctx, p.o.key, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("cluster: etcd: list members: %w", err)
	}
	for _, kv := range resp.Kvs {
		m := p.decode(kv.Value)
		if m == nil || m.Id == p.self.Id || m.Host != host || m.Port != port {
			continue
		}
		// Only the record as read: one rewritten meanwhile is not ours to judge.
		key := string(kv.Key)
		if _, err := p.o.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
			Then(clientv3.OpDelete(key)).Commit(); err != nil {
			return fmt.Errorf("cluster: etcd: remove the earlier incarnation %s at %s:%d: %w", m.Id, host, port, err)
		}
		p.o.log.Warn("cluster: removed the membership record of an earlier incarnation at this address (it died without leaving)",
			"member", m.Id, "address", fmt.Sprintf("%s:%d", host, port))
	}
	return nil
}

func (p *etcdProvider) StartClient(*pcluster.Cluster) error {
	return errors.New("cluster: etcd: client mode is not supported")
}

// Shutdown stops renewing and revokes the lease, which deletes the member
// key at once (best effort: after a lost lease there is nothing to revoke).
func (p *etcdProvider) Shutdown(bool) error {
	p.cancel()
	p.wg.Wait()
	if p.lease == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, err := p.o.client.Revoke(ctx, p.lease)
	if err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return fmt.Errorf("cluster: etcd: revoke lease: %w", err)
	}
	return nil
}

func (p *etcdProvider) fail(reason string) {
	p.lost.Do(func() { go p.onLost(reason) })
}

// keepAlive renews the membership lease (renewLease); deadline is the
// earliest moment the lease may expire in etcd: the send time of the
// grant plus the TTL it granted (etcd counts from when it received the
// request, which is later). The node gives up TTL/4 before that, so that
// it stops its actors before the others can see it gone.
func (p *etcdProvider) keepAlive(deadline time.Time) {
	defer p.wg.Done()
	if reason := renewLease(p.ctx, p.o, "membership", p.lease, deadline); reason != "" {
		p.fail(reason)
	}
}

// list reads every member and publishes the topology.
func (p *etcdProvider) list(ctx context.Context) (int64, error) {
	resp, err := p.o.client.Get(ctx, p.o.key, clientv3.WithPrefix())
	if err != nil {
		return 0, fmt.Errorf("cluster: etcd: list members: %w", err)
	}
	members := map[string]*pcluster.Member{}
	for _, kv := range resp.Kvs {
		if m := p.decode(kv.Value); m != nil {
			members[m.Id] = m
		}
	}
	p.mu.Lock()
	p.members = members
	p.mu.Unlock()
	p.publish()
	return resp.Header.Revision, nil
}

func (p *etcdProvider) decode(b []byte) *pcluster.Member {
	var r memberRecord
	if err := json.Unmarshal(b, &r); err != nil || r.ID == "" {
		p.o.log.Warn("cluster: etcd: ignoring a malformed member record", "err", err)
		return nil
	}
	return &pcluster.Member{Id: r.ID, Host: r.Host, Port: r.Port, Kinds: r.Kinds}
}

// watch follows member changes from rev on; after a broken watch it lists
// again and resumes.
func (p *etcdProvider) watch(rev int64) {
	defer p.wg.Done()
	backoff := 100 * time.Millisecond
	for p.ctx.Err() == nil {
		wch := p.o.client.Watch(clientv3.WithRequireLeader(p.ctx), p.o.key, clientv3.WithPrefix(), clientv3.WithRev(rev+1))
		for resp := range wch {
			if resp.Err() != nil {
				break
			}
			rev = resp.Header.Revision
			if p.apply(resp.Events) {
				p.fail("membership key deleted")
			}
			p.publish()
			backoff = 100 * time.Millisecond
		}
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
		ctx, cancel := context.WithTimeout(p.ctx, p.o.cfg.TTL)
		r, err := p.list(ctx)
		cancel()
		if err == nil {
			rev = r
		}
	}
}

// apply folds watch events into the member map; it reports whether this
// incarnation's own key was deleted.
func (p *etcdProvider) apply(events []*clientv3.Event) (selfDeleted bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ev := range events {
		id := strings.TrimPrefix(string(ev.Kv.Key), p.o.key)
		switch ev.Type {
		case mvccpb.PUT:
			if m := p.decode(ev.Kv.Value); m != nil {
				p.members[m.Id] = m
			}
		case mvccpb.DELETE:
			delete(p.members, id)
			selfDeleted = selfDeleted || id == p.self.Id
		}
	}
	return selfDeleted
}

func (p *etcdProvider) publish() {
	p.mu.Lock()
	list := make([]*pcluster.Member, 0, len(p.members))
	for _, m := range p.members {
		list = append(list, m)
	}
	p.mu.Unlock()
	if p.ctx.Err() == nil {
		p.cluster.MemberList.UpdateClusterTopology(list)
	}
}
