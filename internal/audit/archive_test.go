package audit_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/journal"
)

// archiveIDs are the scenario's reservations.
var archiveIDs = []string{"r1", "r2", "r3", "r4", "r5"}

// statesOf replays every reservation of the journal at path (archive
// included) and returns its last state as JSON.
func statesOf(t *testing.T, path string) map[string]string {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string]string{}
	for _, id := range archiveIDs {
		tl, err := audit.Timeline(context.Background(), db, id)
		if err != nil {
			t.Fatalf("timeline %s: %v", id, err)
		}
		b, _ := json.Marshal(tl[len(tl)-1].State)
		out[id] = string(b)
	}
	return out
}

// verifyArchived runs the full Verify over archive + hot journal, on the
// file opened read-only, as refundctl does: the reservations are replayed
// beside the chain walk.
func verifyArchived(t *testing.T, path string, pub ed25519.PublicKey) *audit.Report {
	t.Helper()
	return verifyArchivedRO(t, path, pub, true)
}

// verifyArchivedRO is verifyArchived with the file opened read-only or
// not (then the reservations are replayed after the chain walk).
func verifyArchivedRO(t *testing.T, path string, pub ed25519.PublicKey, readOnly bool) *audit.Report {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: readOnly})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := journal.OpenArchive(db, journal.ArchiveDir(path))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(context.Background(), db, audit.VerifyOptions{Check: journal.CheckOptions{PublicKey: pub, Archive: a}})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// plan selects what may be archived at now.
func plan(t *testing.T, path string, now time.Time) *audit.ArchiveSelection {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sel, err := audit.PlanArchive(context.Background(), db, audit.ArchiveOptions{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return sel
}

// TestArchive_ReplaysTheSame is the property: whichever eligible
// reservations are archived, in one run or two, archive + hot journal
// replay to the states the journal had before, verify as one chain, and
// the journal's counters still match the events.
func TestArchive_ReplaysTheSame(t *testing.T) {
	ctx := context.Background()
	pub, key, _ := ed25519.GenerateKey(nil)
	orig := filepath.Join(t.TempDir(), "refundd.db")
	runScenario(t, orig)
	want := statesOf(t, orig)
	now := scenarioStart.Add(500 * 24 * time.Hour)
	eligible := plan(t, orig, now)
	// r3's refund waits for a retry: in flight, it stays.
	if slices.Contains(eligible.Streams, "r3") || len(eligible.Streams) == 0 {
		t.Fatalf("eligible %v (kept %v)", eligible.Streams, eligible.Kept)
	}

	before := verifyArchived(t, orig, pub)
	wantRefunds := before.Refunds
	if !before.OK() || before.Reservations != 5 || wantRefunds == 0 {
		t.Fatalf("verify before archival: ok=%v reservations=%d refunds=%d", before.OK(), before.Reservations, wantRefunds)
	}

	rng := rand.New(rand.NewPCG(24, 3))
	for round := range 6 {
		path := copyFile(t, orig)
		ids := slices.Clone(eligible.Streams)
		rng.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
		ids = ids[:1+rng.IntN(len(ids))]
		runs := [][]string{ids}
		if len(ids) > 1 && round%2 == 1 {
			cut := 1 + rng.IntN(len(ids)-1)
			runs = [][]string{ids[:cut], ids[cut:]}
		}
		for i, run := range runs {
			slices.Sort(run)
			sel := plan(t, path, now.Add(time.Duration(i)*24*time.Hour))
			for _, id := range run {
				if !slices.Contains(sel.Streams, id) {
					t.Fatalf("round %d: %s no longer eligible", round, id)
				}
			}
			// The list rows of the reservations of this run, not of the
			// others eligible.
			rows := slices.DeleteFunc(slices.Clone(sel.ListRows), func(k string) bool {
				for _, id := range run {
					if containsID(k, id) {
						return false
					}
				}
				return true
			})
			_, err := journal.ArchiveStreams(ctx, path, journal.ArchiveDir(path), journal.ArchivePlan{
				Streams: run, DropMarks: rows, Cutoff: now, SigningKey: key})
			if err != nil {
				t.Fatalf("round %d run %d: %v", round, i, err)
			}
		}
		if got := statesOf(t, path); !equalMaps(got, want) {
			t.Fatalf("round %d (archived %v in %d runs): states\n%v\nwant\n%v", round, ids, len(runs), got, want)
		}
		for _, readOnly := range []bool{true, false} {
			rep := verifyArchivedRO(t, path, pub, readOnly)
			if !rep.OK() || rep.Reservations != 5 || rep.Refunds != wantRefunds || rep.Journal.Archived == 0 || rep.Counters != "match the events" {
				t.Fatalf("round %d, read-only %v: verify: ok=%v reservations=%d refunds=%d (want %d) archived=%d counters=%q problems=%v journal=%v",
					round, readOnly, rep.OK(), rep.Reservations, rep.Refunds, wantRefunds, rep.Journal.Archived, rep.Counters, rep.Problems, rep.Journal.Problems)
			}
		}
	}
}

func containsID(listKey, id string) bool {
	return slices.Contains(splitKey(listKey), id)
}

func splitKey(k string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(k); i++ {
		if k[i] == '/' {
			parts = append(parts, k[start:i])
			start = i + 1
		}
	}
	return append(parts, k[start:])
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestPlanArchive_Eligibility: what stays hot at each moment.
func TestPlanArchive_Eligibility(t *testing.T) {
	path := filepath.Join(t.TempDir(), "refundd.db")
	runScenario(t, path)
	day := 24 * time.Hour
	for _, tc := range []struct {
		name string
		now  time.Time
		want []string
	}{
		{"window open", scenarioStart.Add(200 * day), nil},
		{"window closed, too recent", scenarioStart.Add(380 * day), nil},
		{"old enough; r3 in flight", scenarioStart.Add(500 * day), []string{"r1", "r2", "r4", "r5"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := plan(t, path, tc.now)
			if !slices.Equal(sel.Streams, tc.want) {
				t.Fatalf("eligible %v, want %v (kept %v)", sel.Streams, tc.want, sel.Kept)
			}
		})
	}
}
