package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/crashpoint"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// archivePaid is when the archive scenario's old reservations were paid.
var archivePaid = time.Date(2025, 1, 10, 2, 0, 0, 0, time.UTC)

// archiveScenario makes, with the real engine, a data directory whose
// journal has r1 and r2 finished (eligible 500 days after archivePaid),
// r3 with a refund in flight and r4 paid recently; it returns the
// directory and the time to archive at.
func archiveScenario(t *testing.T) (string, time.Time) {
	t.Helper()
	c := &clock{}
	c.ns.Store(archivePaid.Add(time.Hour).UnixNano())
	dir := t.TempDir()
	w := audittest.New(t, audittest.Options{Prefix: "R", Now: c.Now, Path: filepath.Join(dir, "refundd.db")})
	register := func(id string, amount int64, paid time.Time) {
		_, _, err := w.Engine.Execute(context.Background(), id, "booking", reservation.Register{ReservationID: id, UserID: "u-" + id,
			OutTradeNo: "ORD-" + id, Amount: amount, Currency: "CNY", PaidAt: paid})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Sandbox.Server.CreateOrder("ORD-"+id, "", amount); err != nil {
			t.Fatal(err)
		}
	}
	now := archivePaid.Add(500 * 24 * time.Hour)
	register("r1", 10000, archivePaid)
	w.Settle("r1", w.Refund("r1", 3000))
	c.Advance(time.Minute)
	register("r2", 5000, archivePaid)
	c.Advance(time.Minute)
	register("r3", 8000, archivePaid)
	w.Refund("r3", 1000) // left PROCESSING: in flight
	c.Advance(time.Minute)
	w.Settle("r1", w.Refund("r1", 7000))
	register("r4", 2000, now.Add(-24*time.Hour))
	w.Close()
	return dir, now
}

// reads are what the read commands say about every reservation, and the
// export of the whole journal.
func reads(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range []string{"r1", "r2", "r3", "r4"} {
		for _, cmd := range [][]string{{"journal", "show", id, "--json"}, {"journal", "state", id, "--seq", "2", "--json"}} {
			r := ctl(t, append(cmd, "--data", dir)...)
			if r.code != exitOK {
				t.Fatalf("%v: %s", cmd, r)
			}
			out[strings.Join(cmd, " ")] = r.stdout
		}
	}
	r := ctl(t, "journal", "export", "--data", dir)
	if r.code != exitOK {
		t.Fatalf("export: %s", r)
	}
	out["export"] = r.stdout
	return out
}

func sameReads(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("%s: %s differs:\n%s\nwant\n%s", what, k, got[k], v)
		}
	}
}

func keys(t *testing.T) (priv, pub string) {
	t.Helper()
	priv = filepath.Join(t.TempDir(), "cp.pem")
	if r := ctl(t, "keygen", "--out", priv); r.code != exitOK {
		t.Fatal(r)
	}
	return priv, priv + ".pub"
}

func TestArchive(t *testing.T) {
	dir, now := archiveScenario(t)
	priv, pub := keys(t)
	before := reads(t, dir)

	r := ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv, "--dry-run")
	if r.code != exitOK || !strings.Contains(r.stdout, "would archive 2 reservations") {
		t.Fatalf("dry run: %s", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "archive")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dry run wrote an archive: %v", err)
	}
	r = ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv)
	if r.code != exitOK || !strings.Contains(r.stdout, "archived     2 reservations") || !strings.Contains(r.stdout, "signed by key") ||
		!strings.Contains(r.stdout, "a due time is pending") || !strings.Contains(r.stdout, "refund window open") {
		t.Fatalf("archive: %s", r)
	}
	r = ctl(t, "journal", "verify", "--data", dir, "--public-key", pub)
	if r.code != exitOK || !strings.Contains(r.stdout, "1 segments, 11 records archived") {
		t.Fatalf("verify: %s", r)
	}
	sameReads(t, "after archival", reads(t, dir), before)

	// Backups take the archive along, and restore brings it back.
	backup := filepath.Join(t.TempDir(), "b.db")
	if r := ctl(t, "backup", "--data", dir, "--out", backup); r.code != exitOK {
		t.Fatalf("backup: %s", r)
	}
	if r := ctl(t, "journal", "verify", "--file", backup, "--public-key", pub); r.code != exitOK || !strings.Contains(r.stdout, "11 records archived") {
		t.Fatalf("verify the backup: %s", r)
	}
	restored := t.TempDir()
	if r := ctl(t, "restore", "--from", backup, "--data", restored); r.code != exitOK {
		t.Fatalf("restore: %s", r)
	}
	if r := ctl(t, "journal", "verify", "--data", restored, "--public-key", pub); r.code != exitOK || !strings.Contains(r.stdout, "11 records archived") {
		t.Fatalf("verify the restored journal: %s", r)
	}
	if r := ctl(t, "journal", "show", "r1", "--data", restored, "--json"); r.code != exitOK || r.stdout != before["journal show r1 --json"] {
		t.Fatalf("show r1 after restore: %s", r)
	}

	// Nothing more is eligible; another key's signature is refused.
	r = ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339))
	if r.code != exitOK || !strings.Contains(r.stdout, "archived     0 reservations") {
		t.Fatalf("second run: %s", r)
	}
	_, otherPub := keys(t)
	if r := ctl(t, "journal", "verify", "--data", dir, "--public-key", otherPub); r.code != exitProblems {
		t.Fatalf("verify with another key: %s", r)
	}
	// Without its archive the hot file does not pass for whole.
	if r := ctl(t, "journal", "verify", "--data", dir, "--archive", t.TempDir()); r.code == exitOK {
		t.Fatalf("verify without the archive: %s", r)
	}
}

// TestArchive_CrashAtEachStep kills a real refundctl (built with the crash
// points) with SIGKILL at each step of the move; whatever step it died at,
// the journal verifies, the reads agree with the journal before, and a
// run that is not killed then finishes the archival.
func TestArchive_CrashAtEachStep(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills real processes")
	}
	crashBin := filepath.Join(t.TempDir(), "refundctl-crash")
	if out, err := exec.Command("go", "build", "-tags", "crashpoints", "-o", crashBin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	orig, now := archiveScenario(t)
	priv, pub := keys(t)
	before := reads(t, orig)
	for _, point := range []string{crashpoint.ArchiveSegmentWritten, crashpoint.ArchiveManifestWritten,
		crashpoint.ArchiveGenerationWritten, crashpoint.ArchiveSwapped} {
		t.Run(point, func(t *testing.T) {
			dir := t.TempDir()
			copyTo(t, filepath.Join(orig, "refundd.db"), filepath.Join(dir, "refundd.db"))
			cmd := exec.Command(crashBin, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv)
			cmd.Env = append(os.Environ(), "REFUNDD_CRASH_AT="+point)
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("refundctl was not killed at %s: %v", point, err)
			}
			r := ctl(t, "journal", "verify", "--data", dir, "--public-key", pub)
			if r.code != exitOK {
				t.Fatalf("verify after the crash: %s", r)
			}
			if point == crashpoint.ArchiveManifestWritten && !strings.Contains(r.stdout, "left over from an interrupted run") {
				t.Fatalf("verify does not name the leftover manifest: %s", r)
			}
			sameReads(t, "after the crash", reads(t, dir), before)

			r = ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv)
			want := "archived     2 reservations"
			if point == crashpoint.ArchiveSwapped {
				want = "archived     0 reservations" // the move was complete
			}
			if r.code != exitOK || !strings.Contains(r.stdout, want) {
				t.Fatalf("archive again: %s", r)
			}
			if r := ctl(t, "journal", "verify", "--data", dir, "--public-key", pub); r.code != exitOK || !strings.Contains(r.stdout, "1 segments") {
				t.Fatalf("verify after the second run: %s", r)
			}
			sameReads(t, "after the second run", reads(t, dir), before)
		})
	}
}

func copyTo(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// A head recorded before archival may fall on a record that was archived
// since, or before archived records: verify --since finds it in the
// archive and checks the archived records after it with the hot ones.
func TestArchive_VerifySinceAnArchivedHead(t *testing.T) {
	dir, now := archiveScenario(t)
	priv, pub := keys(t)
	db, err := journal.Open(filepath.Join(dir, "refundd.db"), &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r1, err := db.Load(context.Background(), "r1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	head := func(r journal.Record) string { return fmt.Sprintf("%d:%s", r.Global, r.Hash) }
	first, last := r1[0], r1[len(r1)-1] // both archived; r2 and r3's records come between
	if r := ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv); r.code != exitOK {
		t.Fatalf("archive: %s", r)
	}
	for _, tc := range []struct{ head, want string }{
		// r1 (two refunds, archived) is replayed from its segment.
		{head(first), "reservations 4, refunds 3"},
		{head(last), "reservations 1, refunds 0"},
	} {
		r := ctl(t, "journal", "verify", "--data", dir, "--public-key", pub, "--since", tc.head)
		if r.code != exitOK || !strings.Contains(r.stdout, "since        "+tc.head) || !strings.Contains(r.stdout, tc.want) {
			t.Fatalf("verify --since %s: %s", tc.head, r)
		}
	}
	forged := first
	forged.Hash[0] ^= 1
	if r := ctl(t, "journal", "verify", "--data", dir, "--since", head(forged)); r.code != exitProblems || !strings.Contains(r.stderr, "not on") {
		t.Fatalf("verify --since a forged archived head: %s", r)
	}
	// The archived records after the head are checked: a segment changed
	// after the head is found.
	seg, err := filepath.Glob(filepath.Join(dir, "archive", "*.seg"))
	if err != nil || len(seg) != 1 {
		t.Fatalf("segments %v %v", seg, err)
	}
	b, err := os.ReadFile(seg[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(seg[0], b, 0o600); err != nil {
		t.Fatal(err)
	}
	if r := ctl(t, "journal", "verify", "--data", dir, "--since", head(first)); r.code == exitOK {
		t.Fatalf("verify --since over a damaged segment passed: %s", r)
	}
}

// stats --fold (and reconcile, and --build-counters, which fold the same
// way) replays the whole history, archived reservations included: the
// figures after archival are those before it.
func TestArchive_FoldReadsTheArchive(t *testing.T) {
	dir, now := archiveScenario(t)
	figures := func() string {
		t.Helper()
		r := ctl(t, "journal", "stats", "--fold", "--data", dir)
		i, j := strings.Index(r.stdout, "latest event"), strings.Index(r.stdout, "last checkpoint")
		if r.code != exitOK || i < 0 || j < i {
			t.Fatalf("stats --fold: %s", r)
		}
		return r.stdout[i:j]
	}
	before := figures()
	if r := ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339)); r.code != exitOK || !strings.Contains(r.stdout, "archived     2 reservations") {
		t.Fatalf("archive: %s", r)
	}
	if after := figures(); after != before {
		t.Fatalf("stats --fold after archival:\n%s\nbefore:\n%s", after, before)
	}
}

// TestArchive_HotBackup: a hot backup from a server whose journal archived
// reservations fetches every archive file the journal names, and checks
// the copy with them as one chain; the server serves no other file.
func TestArchive_HotBackup(t *testing.T) {
	dir, now := archiveScenario(t)
	priv, pub := keys(t)
	if r := ctl(t, "journal", "archive", "--data", dir, "--now", now.Format(time.RFC3339), "--checkpoint-key", priv); r.code != exitOK {
		t.Fatalf("archive: %s", r)
	}
	w := audittest.New(t, audittest.Options{Prefix: "R", Path: filepath.Join(dir, "refundd.db")})
	srv := serve(t, w)
	out := filepath.Join(t.TempDir(), "hot.db")
	for range 2 { // the second run finds the archive files in place
		if r := ctl(t, "backup", "--server", srv.URL, "--out", out); r.code != exitOK {
			t.Fatalf("hot backup: %s", r)
		}
	}
	if r := ctl(t, "journal", "verify", "--file", out, "--public-key", pub); r.code != exitOK || !strings.Contains(r.stdout, "1 segments, 11 records archived") {
		t.Fatalf("verify the hot backup: %s", r)
	}
	segs, err := w.DB.ArchivedSegments()
	if err != nil || len(segs) != 1 {
		t.Fatalf("archived segments %v, %v", segs, err)
	}
	for _, name := range []string{segs[0].Segment, segs[0].Manifest} {
		want, err := os.ReadFile(filepath.Join(dir, "archive", name))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := os.ReadFile(filepath.Join(journal.ArchiveDir(out), name)); err != nil || string(got) != string(want) {
			t.Fatalf("%s in the backup's archive differs from the server's (%v)", name, err)
		}
	}
	for _, name := range []string{"refundd.db", "..%2Frefundd.db", "2099-01.seg"} {
		resp, err := http.Get(srv.URL + "/v1/admin/archive/" + name)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET /v1/admin/archive/%s: %s, want 404", name, resp.Status)
		}
	}
}
