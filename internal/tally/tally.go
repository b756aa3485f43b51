// Package tally keeps the operational counters that no journal event
// carries (notification outcomes, provider call outcomes, webhook
// deliveries) durably, in the journal's key-value area, so that they
// survive a restart and travel with a backup of the journal.
//
// Why not the journal's counters (AppendRequest.Counters)? Those are the
// events' meaning, rebuilt from the log by refundctl journal stats
// --build-counters and checked against a replay by journal verify; a
// refused or duplicate notification, a provider answer that changed
// nothing and a webhook POST leave no event, so no replay could make or
// check them. They are kept beside the log instead, as the webhook cursors
// are.
//
// Each process keeps its own entry, tally/<owner> (in a cluster the node
// id), as one JSON object of counters: only its owner writes it, so a write
// needs no read of other nodes' entries and never races them; readers sum
// every owner's entry (Values).
//
// Writes are grouped: changes queued while a write runs go out together in
// the next one, so a burst costs one write, not one per change. Add returns
// after the write that holds its change is fsynced (for an answer that must
// follow it: an acknowledged notification); Note queues a change without
// waiting (a provider answer or a webhook POST, where nothing is answered on
// the strength of the count) and is written with the next Add, or at most
// Options.NoteEvery after the last write, and Close writes what is queued. A
// crash loses the noted changes of the last NoteEvery, those of the write in
// flight and those queued behind it.
//
// Why pace the notes: every provider answer notes a change, so under load
// an unpaced writer wrote back to back, one journal commit after another;
// each write it made alone was a commit the appends waited behind
// (docs/BENCHMARKS.md, "Key-value writes").
package tally

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/refundd/refundd/journal"
)

// KV is the key-value area the counters are kept in: *journal.DB and
// *pgjournal.DB implement it, safe for concurrent use. WriteKV returns after
// the write is durable.
type KV interface {
	List(ctx context.Context, prefix string) ([]journal.KV, error)
	WriteKV(ctx context.Context, put []journal.KV, del []string) error
}

// Prefix is where the counters live in the key-value area.
const Prefix = "tally/"

// writeTimeout bounds one write, whoever's context queued the change: a
// change queued by a request that gave up is still someone's count.
const writeTimeout = 10 * time.Second

// DefaultNoteEvery is Options.NoteEvery's default: a second of provider and
// webhook counts is what a crash may lose.
const DefaultNoteEvery = time.Second

// Options are a Store's settings; the zero value (or nil) takes the
// defaults.
type Options struct {
	// NoteEvery is the longest a change queued by Note waits for a write
	// when no Add comes (0: DefaultNoteEvery; negative: no wait, each Note
	// starts a write unless one runs).
	NoteEvery time.Duration
}

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("tally: closed")

// Store is one process's counters. Its methods are safe for concurrent use.
type Store struct {
	kv    KV
	key   string
	every time.Duration                        // Options.NoteEvery, resolved
	wake  chan struct{}                        // an Add or Close for a writer waiting out NoteEvery
	after func(time.Duration) <-chan time.Time // time.After; tests see the writer wait

	mu      sync.Mutex
	values  map[string]int64 // as last written
	pending map[string]int64 // queued for the next write
	notes   map[string]int64 // the part of pending queued by Note
	writeOf map[string]int64 // the changes of the write in flight, nil between writes
	waiters []chan error     // Adds whose changes are in pending
	writing bool             // a writer goroutine runs
	lastAt  time.Time        // when the last write started
	closed  bool
	idle    *sync.Cond // signalled when writing turns false
}

// Open reads owner's counters (1..256 bytes: a node id, say). The caller
// keeps kv open until after Close. opts may be nil.
func Open(ctx context.Context, kv KV, owner string, opts *Options) (*Store, error) {
	if owner == "" || len(owner) > 256 {
		return nil, fmt.Errorf("tally: owner must be 1..256 bytes, got %d", len(owner))
	}
	s := &Store{kv: kv, key: Prefix + owner, every: DefaultNoteEvery, wake: make(chan struct{}, 1), after: time.After,
		values: map[string]int64{}, pending: map[string]int64{}, notes: map[string]int64{}}
	if opts != nil && opts.NoteEvery != 0 {
		s.every = opts.NoteEvery
	}
	s.idle = sync.NewCond(&s.mu)
	entries, err := kv.List(ctx, s.key)
	if err != nil {
		return nil, fmt.Errorf("tally: open: %w", err)
	}
	for _, e := range entries {
		if e.Key != s.key {
			continue // another owner whose name starts with ours
		}
		if err := json.Unmarshal(e.Value, &s.values); err != nil {
			return nil, fmt.Errorf("tally: open %s: %w", s.key, err)
		}
	}
	return s, nil
}

// Add queues changes (key -> amount) and returns once they are durable, or
// with the write's error (the changes are then dropped: whatever they count
// was answered as a failure, and is counted when it comes again). ctx bounds
// the wait, not the write.
func (s *Store) Add(ctx context.Context, changes map[string]int64) error {
	done := make(chan error, 1)
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.queueLocked(changes, nil)
	s.waiters = append(s.waiters, done)
	s.startLocked()
	s.wakeLocked()
	s.mu.Unlock()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Note queues changes without waiting for them to be written. A failed
// write keeps them queued for the next one. After Close it does nothing.
func (s *Store) Note(changes map[string]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.queueLocked(changes, s.notes)
	s.startLocked()
}

// queueLocked adds changes to pending and, when also is not nil, to it.
func (s *Store) queueLocked(changes, also map[string]int64) {
	for k, n := range changes {
		if n != 0 {
			s.pending[k] += n
			if also != nil {
				also[k] += n
			}
		}
	}
}

// startLocked starts the writer unless one runs: it writes until nothing is
// queued, so every queued change is written by it or by its successor.
func (s *Store) startLocked() {
	if s.writing || len(s.pending) == 0 && len(s.waiters) == 0 {
		return
	}
	s.writing = true
	go s.write()
}

// wakeLocked tells a writer waiting out NoteEvery that a write is wanted
// now.
func (s *Store) wakeLocked() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Store) write() {
	s.mu.Lock()
	for len(s.pending) > 0 || len(s.waiters) > 0 {
		if len(s.waiters) == 0 && !s.closed {
			// Only notes: they wait for an Add, Close or NoteEvery.
			if wait := time.Until(s.lastAt.Add(s.every)); wait > 0 {
				s.mu.Unlock()
				select {
				case <-s.after(wait):
				case <-s.wake:
				}
				s.mu.Lock()
				continue
			}
		}
		s.lastAt = time.Now()
		next := maps.Clone(s.values)
		for k, n := range s.pending {
			next[k] += n
		}
		waiters, notes := s.waiters, s.notes
		s.writeOf = s.pending
		s.pending, s.notes, s.waiters = map[string]int64{}, map[string]int64{}, nil
		s.mu.Unlock()
		err := s.put(next)
		s.mu.Lock()
		s.writeOf = nil
		if err == nil {
			s.values = next
		}
		for _, w := range waiters {
			w <- err
		}
		if err != nil {
			// The noted changes wait for the next write: the one an Add
			// queued meanwhile needs, or the one the next Add, Note or
			// Close starts. Retrying here would spin on a journal that
			// keeps failing.
			s.queueLocked(notes, s.notes)
			if len(s.waiters) == 0 {
				break
			}
		}
	}
	s.writing = false
	s.idle.Broadcast()
	s.mu.Unlock()
}

func (s *Store) put(values map[string]int64) error {
	v, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("tally: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), writeTimeout)
	defer cancel()
	if err := s.kv.WriteKV(ctx, []journal.KV{{Key: s.key, Value: v}}, nil); err != nil {
		return fmt.Errorf("tally: write %s: %w", s.key, err)
	}
	return nil
}

// Own returns this process's counters as written, plus the changes being
// written and those queued: what it has counted.
func (s *Store) Own() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := maps.Clone(s.values)
	for _, changes := range []map[string]int64{s.writeOf, s.pending} {
		for k, n := range changes {
			out[k] += n
		}
	}
	return out
}

// Values returns the sum of every owner's counters (this process's as Own
// says, the others' as written).
func (s *Store) Values(ctx context.Context) (map[string]int64, error) {
	entries, err := s.kv.List(ctx, Prefix)
	if err != nil {
		return nil, fmt.Errorf("tally: read: %w", err)
	}
	out := s.Own()
	for _, e := range entries {
		if e.Key == s.key {
			continue
		}
		var v map[string]int64
		if err := json.Unmarshal(e.Value, &v); err != nil {
			return nil, fmt.Errorf("tally: read %s: %w", e.Key, err)
		}
		for k, n := range v {
			out[k] += n
		}
	}
	return out, nil
}

// Close writes what is queued and waits for it; later changes are refused
// (Add) or dropped (Note). It returns the last write's error.
func (s *Store) Close() error {
	s.mu.Lock()
	s.closed = true
	var done chan error
	if len(s.pending) > 0 {
		done = make(chan error, 1)
		s.waiters = append(s.waiters, done)
		s.startLocked()
		s.wakeLocked()
	}
	for s.writing {
		s.idle.Wait()
	}
	s.mu.Unlock()
	if done != nil {
		return <-done
	}
	return nil
}
