package webhook_test

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/feed"
	"github.com/refundd/refundd/internal/feed/feedtest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/webhook"
	"github.com/refundd/refundd/journal"
)

// A backup is taken, more events are delivered, the journal is restored
// from the backup (docs/AUDIT.md) and new events are journaled at the
// global sequences of events the endpoint already accepted. Their ids must
// differ from those: a consumer that de-duplicates on id, as
// docs/WEBHOOKS.md tells it to, would otherwise drop them. The events from
// before the backup keep their ids.
func TestDispatcher_EventIDsStayUniqueAcrossARestore(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "refundd.db")
	db, err := journal.Open(live, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newConsumer(t, func(int, feed.Event) int { return 200 })
	ep := endpointFor(c, "ledger")

	h := feedtest.New(t, db, 1)
	h.Register("r1", 1000) // global 1
	h.Request("r1", 300)   // globals 2-3: evt_2 refund.requested r1
	d1, err := webhook.New(fastConfig(db, ep))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, d1)
	c.waitAll(t, h.Want)
	// A hot backup at global 3 (it carries the webhook cursor too).
	backup := filepath.Join(dir, "backup.db")
	if _, err := db.BackupFile(bg, backup); err != nil {
		t.Fatal(err)
	}
	h.Register("r3", 900)                    // global 4
	b := h.Request("r3", 500)                // globals 5-6: evt_5 refund.requested r3
	h.Result("r3", b, reservation.Succeeded) // global 7: evt_7 refund.succeeded r3, 500 fen
	c.waitAll(t, h.Want)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	// Disaster: restore from the backup, as docs/AUDIT.md describes.
	if _, err := journal.Restore(bg, backup, live, &journal.RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	db2, err := journal.Open(live, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	h2 := feedtest.New(t, db2, 2)
	h2.Register("r2", 800)                    // global 4
	n := h2.Request("r2", 100)                // globals 5-6: evt_5 refund.requested r2
	h2.Result("r2", n, reservation.Succeeded) // global 7: evt_7 refund.succeeded r2, 100 fen
	d2, err := webhook.New(fastConfig(db2, ep))
	if err != nil {
		t.Fatal(err)
	}
	stop2 := running(t, d2)
	c.waitAll(t, h2.Want)
	// Wait until the dispatcher has caught up with the restored journal.
	deadline := time.Now().Add(10 * time.Second)
	for {
		lags, err := d2.Lag(bg)
		if err != nil {
			t.Fatal(err)
		}
		if lags[0].Cursor >= 7 || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = stop2()

	bodies := map[string][]byte{}
	rewritten := 0
	for _, d := range c.deliveries() {
		if b, ok := bodies[d.id]; ok && !bytes.Equal(b, d.body) {
			t.Errorf("event id %s delivered for two different events:\n  before restore: %s\n  after restore:  %s", d.id, b, d.body)
		}
		bodies[d.id] = d.body
		g, err := feed.ParseID(d.id)
		if err != nil {
			t.Fatalf("delivered id %q: %v", d.id, err)
		}
		if long := len(d.id) > len(feed.ID(g)); long != (g > 3 && bytes.Contains(d.body, []byte(`"r2"`))) {
			t.Errorf("event %s (global %d): an id with a hash is for, and only for, events journaled after the restore", d.id, g)
		} else if long {
			rewritten++
		}
	}
	if rewritten != 2 {
		t.Fatalf("%d events journaled after the restore were delivered, want 2 (r2's request and success)", rewritten)
	}
}
