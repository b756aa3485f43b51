package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// Leader election for work that must run on one node of the cluster at a
// time but belongs to no reservation (webhook dispatch): an etcd election
// (concurrency.Election) on a lease of its own, renewed like the
// membership lease. The leader gives the work up TTL/4 before its lease
// may expire in etcd, so that, barring a frozen process, its term ends
// before another node's can begin.

// These sentinels live here rather than in errors.go only because this
// file was added on its own; they follow the same rules.
var (
	// ErrNoElection is returned by Lead and Leader when the membership
	// cannot elect a leader (Automanaged has no lease to hold leadership
	// by).
	ErrNoElection = errors.New("cluster: this membership cannot elect leaders (etcd only)")
	// ErrNoLeader is returned by Leader when no node leads right now.
	ErrNoLeader = errors.New("cluster: no leader elected")
	// ErrLeadershipLost is the cause (context.Cause) of a term's context
	// when leadership was lost rather than given up: the lease was not
	// renewed in time, it expired, or the leader key went away.
	ErrLeadershipLost = errors.New("cluster: leadership lost")
)

// Lead campaigns, until ctx ends, for the leadership called name (1..64
// of [0-9A-Za-z_-]) among the nodes of this cluster, announcing value
// (what Leader reports while this node leads; say who and where). It
// returns nil once ctx has ended, ErrClosed when the node closes first,
// or ErrNoElection at once when the membership is not Etcd.
//
// Each time this node is elected, run is called with a context that ends
// as soon as the leadership may be lost: the lease could not be renewed
// TTL/4 before it may expire, etcd says it expired, or the leader key was
// deleted; context.Cause then wraps ErrLeadershipLost. run must stop its
// work when the context ends; Lead waits for it to return before it
// campaigns again. If run returns on its own, this node resigns (the next
// candidate leads at once) and waits one TTL before campaigning again, so
// a node that cannot do the work hands it over.
//
// When a candidacy ends, its lease is revoked so that the next candidate
// leads at once, except when the node is closing: a node closed (or dead)
// while leading leaves its lease to expire, one TTL. So cancel ctx before
// closing the node.
//
// Several Lead calls with different names may run at once; two with the
// same name on one node compete like two nodes.
func (n *Node) Lead(ctx context.Context, name, value string, run func(ctx context.Context)) error {
	o, ok := n.mem.(*openedEtcd)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoElection, n.cfg.Membership)
	}
	if !validLeaderName(name) {
		return fmt.Errorf("cluster: leadership name %q must be 1..64 of [0-9A-Za-z_-]", name)
	}
	log := n.log.With("leadership", name)
	backoff := 100 * time.Millisecond
	for {
		if ctx.Err() != nil {
			return nil
		}
		if n.ctx.Err() != nil {
			return ErrClosed
		}
		resigned, err := n.term(ctx, o, name, value, run)
		wait := time.Duration(0)
		switch {
		case err != nil && ctx.Err() == nil && n.ctx.Err() == nil:
			log.Warn("cluster: campaign failed; retrying", "err", err, "retry_in", backoff)
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		case resigned:
			wait, backoff = o.cfg.TTL, 100*time.Millisecond
		default:
			backoff = 100 * time.Millisecond
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-n.ctx.Done():
			case <-time.After(wait):
			}
		}
	}
}

// Leader returns the value announced by the node leading name now, or
// ErrNoLeader; ErrNoElection when the membership is not Etcd.
func (n *Node) Leader(ctx context.Context, name string) (string, error) {
	o, ok := n.mem.(*openedEtcd)
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNoElection, n.cfg.Membership)
	}
	resp, err := o.client.Get(ctx, o.electionPrefix(n, name)+"/", clientv3.WithFirstCreate()...)
	if err != nil {
		return "", fmt.Errorf("cluster: leader of %s: %w", name, err)
	}
	if len(resp.Kvs) == 0 {
		return "", fmt.Errorf("%w: %s", ErrNoLeader, name)
	}
	return string(resp.Kvs[0].Value), nil
}

func (o *openedEtcd) electionPrefix(n *Node, name string) string {
	return o.cfg.Prefix + "/" + n.cfg.Name + "/leaders/" + name
}

func validLeaderName(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// term is one candidacy: a fresh lease, a campaign, and run for as long as
// the leadership holds. resigned reports that run returned on its own.
func (n *Node) term(ctx context.Context, o *openedEtcd, name, value string, run func(context.Context)) (resigned bool, err error) {
	ttl := o.cfg.TTL
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopAfter := context.AfterFunc(n.ctx, cancel) // a closing or killed node stops campaigning
	defer stopAfter()
	log := n.log.With("leadership", name)

	gctx, gcancel := context.WithTimeout(lctx, ttl)
	sent := time.Now()
	grant, err := o.client.Grant(gctx, int64((ttl+time.Second-1)/time.Second))
	gcancel()
	if err != nil {
		return false, fmt.Errorf("cluster: election lease: %w", err)
	}
	defer func() {
		// Hand over at once, unless the node is closing or was killed:
		// then the lease expires by itself, as after a crash.
		cancel()
		if n.ctx.Err() != nil {
			return
		}
		rctx, rcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer rcancel()
		if _, err := o.client.Revoke(rctx, grant.ID); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			log.Warn("cluster: revoking the election lease failed; it expires by itself", "err", err)
		}
	}()

	// The renewal with its safety margin is ours; the session only gives
	// the election its lease (its own keep-alive is harmless).
	lost := make(chan string, 1)
	go func() {
		if reason := renewLease(lctx, o, "election", grant.ID, sent.Add(time.Duration(grant.TTL)*time.Second)); reason != "" {
			lost <- reason
		}
	}()
	sess, err := concurrency.NewSession(o.client, concurrency.WithLease(grant.ID), concurrency.WithContext(lctx))
	if err != nil {
		return false, fmt.Errorf("cluster: election session: %w", err)
	}
	e := concurrency.NewElection(sess, o.electionPrefix(n, name))
	// Campaign cleans up after a cancel with the client's own context,
	// which can block while etcd is unreachable: never wait for it then.
	elected := make(chan error, 1)
	go func() { elected <- e.Campaign(lctx, value) }()
	select {
	case err := <-elected:
		if err != nil {
			return false, fmt.Errorf("cluster: campaign: %w", err)
		}
	case reason := <-lost:
		return false, fmt.Errorf("cluster: campaign: %s", reason)
	case <-sess.Done():
		return false, errors.New("cluster: campaign: election session ended")
	case <-lctx.Done():
		return false, nil
	}

	select {
	case reason := <-lost: // elected too late to be sure of the term
		return false, fmt.Errorf("cluster: campaign: %s", reason)
	default:
	}
	tctx, tcancel := context.WithCancelCause(lctx)
	defer tcancel(nil)
	// The key goes away with the lease, or by hand: either way this node
	// no longer leads. A broken watch counts as that too (conservative).
	wch := o.client.Watch(clientv3.WithRequireLeader(tctx), e.Key(), clientv3.WithRev(e.Rev()+1))
	go func() {
		for resp := range wch {
			if err := resp.Err(); err != nil {
				tcancel(fmt.Errorf("%w: watching the leader key: %v", ErrLeadershipLost, err))
				return
			}
			for _, ev := range resp.Events {
				if ev.Type == mvccpb.DELETE {
					tcancel(fmt.Errorf("%w: leader key deleted", ErrLeadershipLost))
					return
				}
			}
		}
		tcancel(fmt.Errorf("%w: watch of the leader key ended", ErrLeadershipLost))
	}()

	log.Info("cluster: elected leader", "value", value)
	done := make(chan struct{})
	go func() { defer close(done); run(tctx) }()
	select {
	case <-done:
		resigned = true
	case reason := <-lost:
		tcancel(fmt.Errorf("%w: %s", ErrLeadershipLost, reason))
	case <-sess.Done():
		tcancel(fmt.Errorf("%w: election session ended", ErrLeadershipLost))
	case <-tctx.Done():
	}
	if !resigned {
		<-done
	}
	var reason any = context.Cause(tctx)
	if resigned {
		reason = "the work stopped on its own: resigning"
	}
	log.Info("cluster: no longer leader", "reason", reason)
	return resigned, nil
}

// renewLease renews lease until ctx ends (""), or until it can no longer
// prove the lease alive TTL/4 before deadline, the earliest moment it may
// expire in etcd (the reason, naming what the lease is for). deadline
// moves to the send time of the last successful renewal plus the TTL it
// granted.
//
// The first renewal goes out at once: the caller has spent part of the
// lease already (registering the member, a slow grant), and waiting a
// whole interval first could reach the give-up moment without a single
// try. Then renewals go out TTL/3 after the last successful one was sent,
// and a failed one is tried again after a short pause while the margin
// lasts, so that one slow or failed answer does not end a term by itself.
func renewLease(ctx context.Context, o *openedEtcd, what string, lease clientv3.LeaseID, deadline time.Time) string {
	ttl := o.cfg.TTL
	margin := ttl / 4
	next := time.Now()
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		giveUp := deadline.Add(-margin)
		t.Reset(max(min(time.Until(next), time.Until(giveUp)), 0))
		select {
		case <-ctx.Done():
			return ""
		case <-t.C:
		}
		if !time.Now().Before(giveUp) {
			return what + " lease not renewed in time"
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(ctx, giveUp)
		resp, err := o.client.KeepAliveOnce(rctx, lease)
		cancel()
		switch {
		case ctx.Err() != nil:
			return ""
		case errors.Is(err, rpctypes.ErrLeaseNotFound) || (err == nil && resp.TTL <= 0):
			return what + " lease expired"
		case err != nil:
			o.log.Warn("cluster: renewing the "+what+" lease failed; retrying", "err", err,
				"gives_up_in", time.Until(giveUp).Round(time.Millisecond))
			next = time.Now().Add(renewRetry(ttl))
		default:
			deadline = sent.Add(time.Duration(resp.TTL) * time.Second)
			next = sent.Add(ttl / 3)
		}
	}
}

// renewRetry is the pause before trying a failed renewal again: short
// against the margin (TTL/4), so that several tries fit in it.
func renewRetry(ttl time.Duration) time.Duration { return ttl / 20 }

// Election is one leadership of a node, for work that takes its elector
// as a value (webhook.Elector): Lead(ctx, run).
type Election struct {
	node        *Node
	name, value string
}

// Election returns the leadership called name, announcing value (see Lead).
func (n *Node) Election(name, value string) Election {
	return Election{node: n, name: name, value: value}
}

// Lead is Node.Lead of this election, except that the node closing ends
// it without an error: that is how a node stops campaigning.
func (e Election) Lead(ctx context.Context, run func(context.Context)) error {
	err := e.node.Lead(ctx, e.name, e.value, run)
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}
