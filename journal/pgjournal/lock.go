package pgjournal

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// ErrLockLost is the cause (context.Cause) of a LockElector term's context
// when the lock may have been lost rather than given up: the session ended
// or could not be confirmed in time.
var ErrLockLost = errors.New("pgjournal: advisory lock lost")

// LockElector runs work on one process at a time by a PostgreSQL advisory lock
// (pg_try_advisory_lock) held on a connection of its own: the lock lives
// as long as that session. refundd elects its webhook leader by it under
// automanaged membership, which has no lease to elect by (docs/CLUSTER.md
// compares it with the etcd election).
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
type LockElector struct {
	// DSN is the journal's PostgreSQL URL; pool_* parameters are ignored.
	DSN string
	// Key is the advisory lock's key (AdvisoryKey).
	Key int64
	// Name says what the lock is for; it starts its log lines and errors.
	// Empty means "advisory lock".
	Name string
	// Value describes this process in logs.
	Value  string
	Logger *slog.Logger
	// TTL is the lock session's idle timeout: how long the lock of a
	// frozen or cut-off holder survives. Zero means 5s; at least 1s.
	TTL time.Duration
	// Poll is how often a candidate tries to take the lock. Zero means 1s.
	Poll time.Duration

	ttl, poll time.Duration
	log       *slog.Logger
	name      string
}

// AdvisoryKey is the key of the lock called name (e.g. "webhooks"): one per
// journal schema and cluster name, since advisory locks are shared by a
// whole database. Nodes of one cluster must compute the same key, so the
// hashed text never changes.
func AdvisoryKey(name, schema, clusterName string) int64 {
	if schema == "" {
		schema = "public"
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte("github.com/refundd/refundd/" + name + "/" + schema + "/" + clusterName))
	return int64(h.Sum64())
}

// Lead campaigns until ctx ends, calling run once per term with a context
// that ends as soon as the lock may be lost (its cause then wraps
// ErrLockLost). When run returns on its own, the lock is released and this
// process waits one TTL before campaigning again, so another takes it. It
// returns nil once ctx has ended.
func (l *LockElector) Lead(ctx context.Context, run func(context.Context)) error {
	l.ttl, l.poll, l.log = l.TTL, l.Poll, l.Logger
	if l.ttl <= 0 {
		l.ttl = 5 * time.Second
	}
	l.ttl = max(l.ttl, time.Second)
	if l.poll <= 0 {
		l.poll = time.Second
	}
	if l.log == nil {
		l.log = slog.Default()
	}
	if l.name = l.Name; l.name == "" {
		l.name = "advisory lock"
	}
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		resigned, err := l.term(ctx, run)
		var wait time.Duration
		switch {
		case err != nil && ctx.Err() == nil:
			l.log.Warn(l.name+": campaign failed; retrying", "err", err, "retry_in", backoff)
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
func (l *LockElector) term(ctx context.Context, run func(context.Context)) (resigned bool, err error) {
	cfg, err := pgxpool.ParseConfig(l.DSN)
	if err != nil {
		return false, fmt.Errorf("%s: %w", l.name, err)
	}
	cc := cfg.ConnConfig
	cc.RuntimeParams["application_name"] = "refundd " + l.name
	cctx, cancel := context.WithTimeout(ctx, l.ttl)
	conn, err := pgx.ConnectConfig(cctx, cc)
	cancel()
	if err != nil {
		return false, fmt.Errorf("%s: connect: %w", l.name, err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = conn.Close(cctx) // ends the session: a lock it holds is released
	}()
	if _, err := conn.Exec(ctx, fmt.Sprintf("SET idle_session_timeout = %d", l.ttl.Milliseconds())); err != nil {
		// Before PostgreSQL 14 only TCP keepalives end the session of a
		// holder that is gone without closing it; a frozen one keeps it.
		l.log.Warn(l.name+": idle_session_timeout unsupported (PostgreSQL 14+); a frozen leader keeps the lock", "err", err)
		for _, q := range []string{"SET tcp_keepalives_idle = 2", "SET tcp_keepalives_interval = 1", "SET tcp_keepalives_count = 3"} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return false, fmt.Errorf("%s: %s: %w", l.name, q, err)
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
		err := conn.QueryRow(qctx, "SELECT pg_try_advisory_lock($1)", l.Key).Scan(&got)
		cancel()
		switch {
		case ctx.Err() != nil:
			return false, nil
		case err != nil:
			return false, fmt.Errorf("%s: %w", l.name, err)
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
	l.log.Info(l.name+": taken", "node", l.Value)
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
		l.log.Info(l.name+": released; the work stopped on its own", "node", l.Value)
	} else {
		l.log.Info(l.name+": term over", "node", l.Value, "reason", reason)
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
func (l *LockElector) hold(ctx context.Context, lose context.CancelCauseFunc, conn *pgx.Conn, deadline time.Time) {
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
			lose(fmt.Errorf("%w: %s: session ended: %v", ErrLockLost, l.name, err))
			return
		}
		if !time.Now().Before(deadline.Add(-margin)) {
			lose(fmt.Errorf("%w: %s: session not confirmed in time", ErrLockLost, l.name))
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
			lose(fmt.Errorf("%w: %s: session lost: %v", ErrLockLost, l.name, err))
			return
		}
		deadline = sent.Add(l.ttl)
	}
}
