package audit_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
)

// A refund made after the backup is lost with the restore, but WeChat Pay
// paid it. The client then retries that request with its idempotency key,
// which the restored journal does not know. The gate must have journaled
// the refund WeChat Pay has (recovered, with its amount, state and id) so
// that the cap counts it and the retry is refused, not paid a second time.
func TestReconcileAfterRestore_RecoveredRefundRefusesTheLostRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		lost   int64  // the lost refund's amount; 0: everything refundable
		retry  *int64 // the retried request's amount; nil: everything
		want   reservation.Code
		status reservation.Status
	}{
		{name: "part", lost: 6000, retry: ptr(6000), want: reservation.CodeInsufficientRefundable, status: reservation.StatusAccepted},
		{name: "all", lost: 0, retry: nil, want: reservation.CodeCanceled, status: reservation.StatusCanceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sb := audittest.NewSandbox(t)
			dir := t.TempDir()
			w := audittest.New(t, audittest.Options{Path: filepath.Join(dir, "refundd.db"), Prefix: "R", Sandbox: sb})
			w.Register("a", 10000)
			w.Settle("a", w.Refund("a", 1000))
			backup := filepath.Join(dir, "backup.db")
			if _, err := w.DB.BackupFile(bg, backup); err != nil {
				t.Fatal(err)
			}
			amount := tc.lost
			if amount == 0 {
				amount = 9000
			}
			lost := w.Refund("a", amount) // idempotency key "a-2"
			if s := w.Settle("a", lost); s != reservation.Succeeded {
				t.Fatalf("%s is %s", lost, s)
			}
			paid := sb.Client.Query(bg, lost)
			w.Close()

			restored := restoreOver(t, w, backup, sb)
			// Twice: a gate run again after a crash journals nothing twice.
			for run := 1; run <= 2; run++ {
				rc, err := audit.ReconcileAfterRestore(bg, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"})
				if err != nil {
					t.Fatal(err)
				}
				if !rc.Done() || len(rc.Lost) != 1 || rc.Lost[0].RefundNo != lost {
					t.Fatalf("run %d: %+v", run, rc)
				}
			}
			// The client retries the lost request with its key.
			_, _, err := restored.Engine.Execute(bg, "a", "api", reservation.RequestRefund{UserID: "u-a", IdempotencyKey: "a-2", Amount: tc.retry})
			if reservation.CodeOf(err) != tc.want {
				st, _ := restored.Engine.Get(bg, "a")
				t.Fatalf("retry of the lost request: err %v, want %s; refunds %s", err, tc.want, describe(st))
			}
			st, err := restored.Engine.Get(bg, "a")
			if err != nil {
				t.Fatal(err)
			}
			r := st.Refund(lost)
			if r == nil {
				t.Fatalf("refund %s (paid by WeChat Pay after the backup) is not in the restored reservation: %+v", lost, st.Refunds)
			}
			if r.Amount != amount || r.State != reservation.Succeeded || r.ProviderID != paid.ProviderID || r.ProviderID == "" ||
				!r.Recovered || len(r.Request) != 0 || r.IdempotencyKey != "" {
				t.Fatalf("recovered refund %+v, want %d fen SUCCEEDED with id %q, recovered, no request", r, amount, paid.ProviderID)
			}
			if v := audit.View(st); !v.Refunds[1].Recovered || v.Refunds[0].Recovered {
				t.Fatalf("view %+v: only the second refund is recovered", v.Refunds)
			}
			if len(st.Refunds) != 2 || st.Refundable() != 9000-amount || st.Status != tc.status {
				t.Fatalf("reservation after recovery: %d refunds, refundable %d, status %s", len(st.Refunds), st.Refundable(), st.Status)
			}
			if err := restored.DB.ClearReconcileRequired(bg); err != nil {
				t.Fatal(err)
			}
			restored.Close()
			db := openRO(t, w.Path)
			rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
			if err != nil || !rep.OK() {
				t.Fatalf("restored journal: %v %v %v", err, rep.Journal.Problems, rep.Problems)
			}
		})
	}
}

func ptr(n int64) *int64 { return &n }

// describe lists a reservation's refunds for failure messages.
func describe(st *reservation.State) string {
	out := ""
	for _, r := range st.Refunds {
		out += fmt.Sprintf("[%s %d fen %s id %q] ", r.No, r.Amount, r.State, r.ProviderID)
	}
	return out
}

// The backup holds a REJECTED refund's amount; after the backup an
// operator abandoned it and a refund that WeChat Pay paid took its place.
// In the restored journal the paid refund does not fit beside the held
// amount: the gate must not journal it over the cap, nor finish, until an
// operator settles the journal's refund; then it recovers it.
func TestReconcileAfterRestore_RecoveredRefundThatDoesNotFitWaitsForAnOperator(t *testing.T) {
	sb := audittest.NewSandbox(t)
	dir := t.TempDir()
	w := audittest.New(t, audittest.Options{Path: filepath.Join(dir, "refundd.db"), Prefix: "R", Sandbox: sb})
	w.Register("a", 10000)
	w.Settle("a", w.Refund("a", 1000))
	// Refunded in the merchant platform, so 9000 is refused (NOT_ENOUGH).
	w.PlatformRefund("ORD-a", "MP-a-1", 8500, 10000)
	rejected := w.Refund("a", 9000)
	st, err := w.Engine.Get(bg, "a")
	if err != nil || st.Refund(rejected).State != reservation.Rejected {
		t.Fatalf("refund %s: %+v %v", rejected, st, err)
	}
	backup := filepath.Join(dir, "backup.db")
	if _, err := w.DB.BackupFile(bg, backup); err != nil {
		t.Fatal(err)
	}
	abandon := reservation.Abandon{RefundNo: rejected, Reason: "refused"}
	if _, _, err := w.Engine.Abandon(bg, "a", "operator:alice", abandon); err != nil {
		t.Fatal(err)
	}
	lost := w.Refund("a", 500)
	if s := w.Settle("a", lost); s != reservation.Succeeded {
		t.Fatalf("%s is %s", lost, s)
	}
	w.Close()

	restored := restoreOver(t, w, backup, sb)
	gate := func() *audit.RestoreCheck {
		t.Helper()
		rc, err := audit.ReconcileAfterRestore(bg, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"})
		if err != nil {
			t.Fatal(err)
		}
		return rc
	}
	rc := gate()
	if rc.Done() || len(rc.Failed) != 1 || rc.Failed[0].Kind != "not_applied" || rc.Failed[0].RefundNo != lost {
		t.Fatalf("gate with the held amount: %+v; want %s not applied", rc, lost)
	}
	st, err = restored.Engine.Get(bg, "a")
	if err != nil || st.Refund(lost) != nil || st.Refundable() != 0 {
		t.Fatalf("journaled over the cap: %s %v", describe(st), err)
	}
	// The operator settles the journal's refund; the next try recovers.
	if _, _, err := restored.Engine.Abandon(bg, "a", "operator:alice", abandon); err != nil {
		t.Fatal(err)
	}
	if rc := gate(); !rc.Done() || len(rc.Lost) != 1 {
		t.Fatalf("gate after the operator: %+v", rc)
	}
	st, err = restored.Engine.Get(bg, "a")
	if r := st.Refund(lost); err != nil || r == nil || !r.Recovered || r.Amount != 500 || st.Refundable() != 8500 {
		t.Fatalf("after the operator: %s %v", describe(st), err)
	}
}
