package audit_test

import (
	"path/filepath"
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

// After the backup, refund #2 of reservation a is refused by WeChat Pay
// (NOT_ENOUGH: no refund exists there under R-a-2) and refund #3 succeeds
// (money moved). The restore loses both. ReconcileAfterRestore must look
// past the gap and report R-a-3 as lost; with a gap allowance of one
// number it stops at R-a-2, as the probe used to.
func TestReconcileAfterRestore_LooksPastRefusedNumbers(t *testing.T) {
	sb := audittest.NewSandbox(t)
	dir := t.TempDir()
	w := audittest.New(t, audittest.Options{Path: filepath.Join(dir, "refundd.db"), Prefix: "R", Sandbox: sb})
	w.Register("a", 10000)
	w.Settle("a", w.Refund("a", 1000))
	backup := filepath.Join(dir, "backup.db")
	if _, err := w.DB.BackupFile(bg, backup); err != nil {
		t.Fatal(err)
	}
	// Someone refunds most of the order in the merchant platform, so the
	// next refund is refused (NOT_ENOUGH) and never exists at WeChat Pay.
	w.PlatformRefund("ORD-a", "MP-a-1", 8500, 10000)
	rejected := w.Refund("a", 2000)
	st, err := w.Engine.Get(bg, "a")
	if err != nil || st.Refund(rejected).State != reservation.Rejected {
		t.Fatalf("refund %s: %+v %v", rejected, st, err)
	}
	lost := w.Refund("a", 400) // accepted: real money, then lost with the restore
	if s := w.Settle("a", lost); s != reservation.Succeeded {
		t.Fatalf("%s is %s", lost, s)
	}
	w.Close()

	restored := restoreOver(t, w, backup, sb)
	for _, tc := range []struct {
		gap      int
		wantLost bool
	}{{gap: 1, wantLost: false}, {gap: 0, wantLost: true}} { // 0: the default, 5
		rc, err := audit.ReconcileAfterRestore(bg, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R", MaxGap: tc.gap})
		if err != nil {
			t.Fatal(err)
		}
		if !rc.Done() {
			t.Fatalf("gap %d: not done: %+v", tc.gap, rc)
		}
		if got := kinds(rc.Lost)[lost+"/lost_refund"] != ""; got != tc.wantLost {
			t.Fatalf("gap %d: refund %s (4.00 yuan, SUCCESS at WeChat Pay, made after the backup) reported lost: %v, want %v; lost %v",
				tc.gap, lost, got, tc.wantLost, rc.Lost)
		}
		if len(rc.Lost) != map[bool]int{false: 0, true: 1}[tc.wantLost] {
			t.Fatalf("gap %d: lost %v", tc.gap, rc.Lost)
		}
	}
}

// restoreOver restores backup over w's journal (w closed) and opens it again
// as the service would after the restore: under the new epoch's refund-number
// prefix, on the same sandbox.
func restoreOver(t *testing.T, w *audittest.World, backup string, sb *audittest.Sandbox) *audittest.World {
	t.Helper()
	info, err := journal.Restore(bg, backup, w.Path, &journal.RestoreOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	prefix, err := audit.EpochPrefix("R", info.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	return audittest.New(t, audittest.Options{Path: w.Path, Prefix: prefix, Sandbox: sb})
}
