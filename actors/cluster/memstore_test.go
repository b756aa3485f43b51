package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/reservation"
)

// errFenced is the shared journal's refusal of a stale owner's append.
var errFenced = errors.New("memjournal: fenced")

// memJournal is a shared journal in memory with the semantics the cluster
// relies on from journal/pgjournal: loading a stream activates it (a new
// epoch), and an append is refused unless it carries the stream's current
// epoch and head. Each node gets its own view (node), like each node's
// pgjournal.DB.
type memJournal struct {
	mu      sync.Mutex
	streams map[string]*memStream
	claims  map[string]string // namespace/key -> stream
	dues    map[reservation.Timer]bool
	marks   map[string]bool
	fenced  int // appends refused for a stale epoch
}

type memStream struct {
	events []reservation.Event
	epoch  uint64
	// writers records, per event, the node and epoch it was written under.
	writers []string
}

func newMemJournal() *memJournal {
	return &memJournal{streams: map[string]*memStream{}, claims: map[string]string{}, dues: map[reservation.Timer]bool{}, marks: map[string]bool{}}
}

// node returns a node's view of the journal.
func (j *memJournal) node(name string) *memNode {
	return &memNode{j: j, name: name, epochs: map[string]uint64{}}
}

func (j *memJournal) fencedCount() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.fenced
}

// check verifies each stream was written only under its current epochs, in
// order: an event's epoch never decreases along the stream.
func (j *memJournal) check() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for id, s := range j.streams {
		var last uint64
		for i, w := range s.writers {
			var node string
			var epoch uint64
			if _, err := fmt.Sscanf(strings.Replace(w, "@", " ", 1), "%s %d", &node, &epoch); err != nil {
				return err
			}
			if epoch < last {
				return fmt.Errorf("%s: event %d written under epoch %d after epoch %d", id, i+1, epoch, last)
			}
			last = epoch
		}
	}
	return nil
}

type memNode struct {
	j      *memJournal
	name   string
	mu     sync.Mutex
	epochs map[string]uint64
}

var _ actors.Store = (*memNode)(nil)

func (n *memNode) Load(_ context.Context, id string) ([]reservation.Event, uint64, error) {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	s := n.j.streams[id]
	if s == nil {
		s = &memStream{}
		n.j.streams[id] = s
	}
	s.epoch++
	n.mu.Lock()
	n.epochs[id] = s.epoch
	n.mu.Unlock()
	return append([]reservation.Event(nil), s.events...), uint64(len(s.events)), nil
}

func (n *memNode) Version(_ context.Context, id string) (uint64, error) {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	if s := n.j.streams[id]; s != nil {
		return uint64(len(s.events)), nil
	}
	return 0, nil
}

func (n *memNode) Append(_ context.Context, id string, before *reservation.State, events []reservation.Event) error {
	var expected uint64
	if before != nil {
		expected = before.Version
	}
	n.mu.Lock()
	mine := n.epochs[id]
	n.mu.Unlock()
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	s := n.j.streams[id]
	if s == nil || mine == 0 || s.epoch != mine {
		n.j.fenced++
		return fmt.Errorf("%w: %s on %s", errFenced, id, n.name)
	}
	if uint64(len(s.events)) != expected {
		return fmt.Errorf("%w: %s at %d, expected %d", actors.ErrVersionConflict, id, len(s.events), expected)
	}
	ix := reservation.AppendIndexes(reservation.IndexChanges{}, before, events)
	for _, c := range ix.Claims {
		k := c.Namespace + "/" + c.Key
		if o, ok := n.j.claims[k]; ok && o != id {
			if c.Namespace == reservation.ClaimOutTradeNo {
				return reservation.ErrOutTradeNoTaken
			}
			return fmt.Errorf("memjournal: %s %s claimed twice", c.Namespace, c.Key)
		}
	}
	for _, c := range ix.Claims {
		n.j.claims[c.Namespace+"/"+c.Key] = id
	}
	for _, d := range ix.Dues {
		n.j.dues[reservation.Timer{ReservationID: id, RefundNo: d.RefundNo, DueAt: d.At.UTC()}] = true
	}
	for _, m := range ix.Marks {
		if m.Clear {
			delete(n.j.marks, m.Kind+"/"+id+"/"+m.RefundNo)
		} else {
			n.j.marks[m.Kind+"/"+id+"/"+m.RefundNo] = true
		}
	}
	for _, e := range events {
		s.events = append(s.events, e)
		s.writers = append(s.writers, fmt.Sprintf("%s@%d", n.name, mine))
	}
	for _, d := range ix.Dropped {
		delete(n.j.dues, reservation.Timer{ReservationID: id, RefundNo: d.RefundNo, DueAt: d.At.UTC()})
	}
	return nil
}

func (n *memNode) LookupRefund(_ context.Context, no string) (string, error) {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	if id, ok := n.j.claims["refund_no/"+no]; ok {
		return id, nil
	}
	return "", reservation.ErrNotFound
}

func (n *memNode) DueBefore(_ context.Context, t time.Time, limit int) ([]reservation.Timer, error) {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	var out []reservation.Timer
	for d := range n.j.dues {
		if !d.DueAt.After(t) {
			out = append(out, d)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		if !out[a].DueAt.Equal(out[b].DueAt) {
			return out[a].DueAt.Before(out[b].DueAt)
		}
		return out[a].ReservationID+out[a].RefundNo < out[b].ReservationID+out[b].RefundNo
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

func (n *memNode) DeleteDue(_ context.Context, timers []reservation.Timer) error {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	for _, t := range timers {
		t.DueAt = t.DueAt.UTC()
		delete(n.j.dues, t)
	}
	return nil
}

func (n *memNode) Attention(_ context.Context, kind, after string, limit int) ([]reservation.RefundRef, error) {
	n.j.mu.Lock()
	defer n.j.mu.Unlock()
	var keys []string
	for k := range n.j.marks {
		if rest, ok := strings.CutPrefix(k, kind+"/"); ok && rest > after {
			keys = append(keys, rest)
		}
	}
	sort.Strings(keys)
	var out []reservation.RefundRef
	for _, k := range keys {
		if len(out) == limit {
			break
		}
		id, no, _ := strings.Cut(k, "/")
		out = append(out, reservation.RefundRef{ReservationID: id, RefundNo: no})
	}
	return out, nil
}
