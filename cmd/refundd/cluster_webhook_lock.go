package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refundd/refundd/actors/cluster"
)

// lockElector elects the webhook leader by a PostgreSQL advisory lock
// (pg_try_advisory_lock) held on a connection of its own: the lock lives
// as long as that session. It is used with automanaged membership, which
// has no lease to elect by (docs/CLUSTER.md compares it with the etcd
// election).
//
// A holder that dies closes its socket and the server drops the lock at
// once. A holder that freezes or is cut off from PostgreSQL leaves the
// session open, so the session is told to end once it has been idle for
// ttl (idle_session_timeout, PostgreSQL 14 and later). The holder runs a
// query every ttl/4 and ends its term ttl/4 before the session could have
// timed out since the last query that succeeded, or at the first failed
// one: its term is over before the server can hand the lock to another.
// A session the server ends while the holder is fine (pg_terminate_backend,
// a server restart) frees the lock first and ends the term a moment later,
// when the holder reads the socket: a short overlap.
type lockElector struct {
	// dsn is the journal's PostgreSQL URL; pool_* parameters are ignored.
	dsn string
	// key is the advisory lock's key (advisoryKey).
	key int64
	// value describes this node in logs.
	value string
	log   *slog.Logger
	// ttl is the lock session's idle timeout: how long the lock of a
	// frozen or cut-off holder survives. Zero means 5s; at least 1s.
	ttl time.Duration
	// poll is how often a candidate tries to take the lock. Zero means 1s.
	poll time.Duration
}

// advisoryKey is the webhook leader lock's key: one per journal schema and
// cluster name, since advisory locks are shared by a whole database.
func advisoryKey(schema, clusterName string) int64 {
	if schema == "" {
		schema = "public"
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("github.com/refundd/refundd/webhooks/" + schema + "/" + clusterName))
	return int64(h.Sum64())
}

func (l *lockElector) lead(ctx context.Context, run func(context.Context)) error {
	if l.ttl <= 0 {
		l.ttl = 5 * time.Second
	}
	l.ttl = max(l.ttl, time.Second)
	if l.poll <= 0 {
		l.poll = time.Second
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		resigned, err := l.term(ctx, run)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn("webhook leader lock: campaign failed; retrying", "err", err, "retry_in", backoff)
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		case resigned:
			// Let another node take it: candidates only poll.
			wait, backoff = l.ttl, 100*time.Millisecond
		default:
			backoff = 100 * time.Millisecond
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}
	return nil
}

// term is one candidacy on a fresh session: try the lock every poll until
// it is taken, then run while it holds. Closing the session releases it.
func (l *lockElector) term(ctx context.Context, run func(context.Context)) (resigned bool, err error) {
	cfg, err := pgxpool.ParseConfig(l.dsn)
	if err != nil {
		return false, fmt.Errorf("webhook leader lock: %w", err)
	}
	cc := cfg.ConnConfig
	cc.RuntimeParams["application_name"] = "refundd webhook leader lock"
	cctx, cancel := context.WithTimeout(ctx, l.ttl)
	conn, err := pgx.ConnectConfig(cctx, cc)
	cancel()
	if err != nil {
		return false, fmt.Errorf("webhook leader lock: connect: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // ends the session: a lock it holds is released
	}()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", l.ttl.Milliseconds())); err != nil {
		// Before PostgreSQL 14 only TCP keepalives end the session of a
		// holder that is gone without closing it; a frozen one keeps it.
		l.log.Warn("webhook leader lock: idle_session_timeout unsupported (PostgreSQL 14+); a frozen leader keeps the lock", "err", err)
		for _, q := range []string{"SET tcp_keepalives_idle = 2", "SET tcp_keepalives_interval = 1", "SET tcp_keepalives_count = 3"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return false, fmt.Errorf("webhook leader lock: %s: %w", q, err)
			}
		}
	}
	var deadline time.Time
	t := time.NewTimer(0)
	defer t.Stop()
	for deadline.IsZero() {
		select {
		case <-ctx.Done():
			return false, nil
		case <-t.C:
		}
		sent := time.Now()
		qctx, cancel := context.WithTimeout(ctx, l.ttl/2)
		var got bool
		err := conn.QueryRow(qctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&got)
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("webhook leader lock: %w", err)
		case got:
			deadline = sent.Add(l.ttl)
		default:
			t.Reset(l.poll)
		}
	}

	tctx, tcancel := context.WithCancelCause(ctx)
	defer tcancel(nil)
	held := make(chan struct{})
	go func() { defer close(held); l.hold(tctx, tcancel, conn, deadline) }()
	l.log.Info("webhook leader lock: taken", "node", l.value)
	done := make(chan struct{})
	go func() { defer close(done); run(tctx) }()
	select {
	case <-done:
		resigned = true
	case <-tctx.Done():
	}
	reason := context.Cause(tctx)
	tcancel(nil)
	<-done
	<-held // the connection is ours again; the deferred Close releases the lock
	if resigned {
		l.log.Info("webhook leader lock: released; the work stopped on its own", "node", l.value)
	} else {
		l.log.Info("webhook leader lock: term over", "node", l.value, "reason", reason)
	}
	return resigned, nil
}

// hold keeps the session busy enough not to time out and watches it,
// until ctx ends. Between queries it waits on the socket, so a session the
// server ends (terminated, restarted) ends the term at once (lose). A
// query runs every ttl/4; the term also ends at the first failed one, or
// when none has succeeded for ttl*3/4 since deadline-ttl: the server ends
// an idle session after ttl, counted from later than the send time of the
// last query.
func (l *lockElector) hold(ctx context.Context, lose context.CancelCauseFunc, conn *pgx.Conn, deadline time.Time) {
	margin := l.ttl / 4
	for {
		wait := min(l.ttl/4, time.Until(deadline.Add(-margin)))
		wctx, cancel := context.WithTimeout(ctx, max(wait, 0))
		// Nothing LISTENs, so this returns when the wait is over (a
		// timeout leaves the connection usable) or the session ended.
		err := conn.PgConn().WaitForNotification(wctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil && !conn.IsClosed() && errors.Is(err, context.DeadlineExceeded) {
			err = nil
		}
		if err != nil {
			lose(fmt.Errorf("%w: webhook leader lock: session ended: %v", cluster.ErrLeadershipLost, err))
			return
		}
		if !time.Now().Before(deadline.Add(-margin)) {
			lose(fmt.Errorf("%w: webhook leader lock: session not confirmed in time", cluster.ErrLeadershipLost))
			return
		}
		sent := time.Now()
		pctx, cancel := context.WithDeadline(ctx, deadline.Add(-margin))
		_, err = conn.Exec(pctx, "SELECT 1")
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			lose(fmt.Errorf("%w: webhook leader lock: session lost: %v", cluster.ErrLeadershipLost, err))
			return
		}
		deadline = sent.Add(l.ttl)
	}
}
