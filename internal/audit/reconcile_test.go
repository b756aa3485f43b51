package audit_test

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/journal"
)

// disagreeingWorld makes a journal and a sandbox that disagree in three
// ways: a refund made in the merchant platform (only in the bill), a
// refund the journal thinks succeeded but WeChat Pay never saw (only in
// the journal), and a refund sent for 1 fen less than the journal says.
func disagreeingWorld(t *testing.T) (w *audittest.World, facts []audit.RefundFact, bill *wechatpay.Bill, date string) {
	t.Helper()
	w = audittest.New(t, audittest.Options{Prefix: "T"})
	w.Register("a", 10000)
	w.Register("b", 5000)
	w.Register("c", 3000)
	ok1 := w.Refund("a", 3000)
	ok2 := w.Refund("b", 1000)
	w.Lie("T-c-1")
	extra := w.Refund("c", 3000)
	w.Shave("T-a-2", 1)
	shaved := w.Refund("a", 2000)
	for _, r := range []struct{ id, no string }{{"a", ok1}, {"b", ok2}, {"a", shaved}} {
		if st := w.Settle(r.id, r.no); st != reservation.Succeeded {
			t.Fatalf("%s settled as %s", r.no, st)
		}
	}
	if extra != "T-c-1" || shaved != "T-a-2" {
		t.Fatalf("refund numbers %s %s", extra, shaved)
	}
	w.PlatformRefund("ORD-b", "MP-b-1", 700, 5000)
	date, raw := w.Bill()
	var err error
	if bill, err = wechatpay.ParseBill(raw); err != nil {
		t.Fatal(err)
	}
	w.Close()
	db := openRO(t, w.Path)
	states, _, err := audit.Replay(bg, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w, audit.Facts(states), bill, date
}

func kinds(ms []audit.Mismatch) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		out[m.RefundNo+"/"+m.Kind] = m.Detail
	}
	return out
}

func TestReconcileBill_Sandbox(t *testing.T) {
	_, facts, bill, date := disagreeingWorld(t)
	rep, err := audit.ReconcileBill(facts, bill, audit.BillOptions{Prefixes: []string{"T"}, Slack: 1})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(rep.Mismatches)
	if len(got) != 3 {
		t.Fatalf("mismatches %v, want exactly three", rep.Mismatches)
	}
	for key, text := range map[string]string{
		"MP-b-1/not_in_journal": "made in the merchant platform",
		"T-c-1/not_in_bill":     "SUCCEEDED 30.00",
		"T-a-2/amount":          "bill 19.99 (1999 fen), journal 20.00 (2000 fen)",
	} {
		if !strings.Contains(got[key], text) {
			t.Errorf("%s: %q, want it to mention %q", key, got[key], text)
		}
	}
	if rep.Date != date || rep.BillRefunds != 4 || rep.Matched != 2 || rep.JournalRefunds != 4 || rep.OK() {
		t.Fatalf("report %+v", rep)
	}
	t.Run("another merchant's bill", func(t *testing.T) {
		rows, _ := bill.Refunds()
		ours := rows[0].MchID
		if ours == "" {
			t.Fatal("the sandbox's bill names no merchant")
		}
		if _, err := audit.ReconcileBill(facts, bill, audit.BillOptions{Date: date, MchID: ours}); err != nil {
			t.Fatalf("our own bill refused: %v", err)
		}
		_, err := audit.ReconcileBill(facts, bill, audit.BillOptions{Date: date, MchID: "1900009999"})
		if !errors.Is(err, audit.ErrInvalid) || !strings.Contains(err.Error(), "not this merchant's bill") {
			t.Fatalf("err = %v, want ErrInvalid naming another merchant's bill", err)
		}
	})
	t.Run("our prefix on an unknown refund", func(t *testing.T) {
		rep, err := audit.ReconcileBill(facts, bill, audit.BillOptions{Prefixes: []string{"MP"}, Date: date})
		if err != nil {
			t.Fatal(err)
		}
		if d := kinds(rep.Mismatches)["MP-b-1/not_in_journal"]; !strings.Contains(d, "lost by a restore") {
			t.Fatalf("detail %q", d)
		}
	})
	t.Run("an agreeing journal", func(t *testing.T) {
		var agree []audit.RefundFact
		for _, f := range facts {
			if f.RefundNo != "T-c-1" && f.RefundNo != "T-a-2" {
				agree = append(agree, f)
			}
		}
		rows, _ := bill.Refunds()
		for _, r := range rows {
			if r.OutRefundNo == "MP-b-1" || r.OutRefundNo == "T-a-2" {
				agree = append(agree, audit.RefundFact{RefundNo: r.OutRefundNo, OutTradeNo: r.OutTradeNo, Amount: r.Refund,
					State: reservation.Succeeded, SubmittedAt: r.RequestedAt})
			}
		}
		rep, err := audit.ReconcileBill(agree, bill, audit.BillOptions{Date: date})
		if err != nil || !rep.OK() || rep.Matched != 4 {
			t.Fatalf("report %+v, %v", rep, err)
		}
	})
}

func TestReconcileProvider_Sandbox(t *testing.T) {
	w, facts, _, _ := disagreeingWorld(t)
	rep, err := audit.ReconcileProvider(bg, facts, w.Sandbox.Client, audit.ProviderOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(rep.Mismatches)
	if rep.Queried != 4 || rep.Matched != 2 || len(got) != 2 || len(rep.Failed) != 0 {
		t.Fatalf("report %+v", rep)
	}
	if !strings.Contains(got["T-c-1/status"], "provider says NOT_FOUND, journal says SUCCEEDED") ||
		!strings.Contains(got["T-a-2/amount"], "provider 19.99") {
		t.Fatalf("mismatches %v", got)
	}
}

func TestReconcileAfterRestore(t *testing.T) {
	sb := audittest.NewSandbox(t)
	dir := t.TempDir()
	w := audittest.New(t, audittest.Options{Path: filepath.Join(dir, "refundd.db"), Prefix: "R", Sandbox: sb})
	w.Register("a", 10000)
	w.Register("b", 10000)
	w.Settle("a", w.Refund("a", 1000))
	inFlight := w.Refund("b", 2000) // PROCESSING in the backup; it succeeds later
	backup := filepath.Join(dir, "backup.db")
	if _, err := w.DB.BackupFile(bg, backup); err != nil {
		t.Fatal(err)
	}
	lost1 := w.Refund("a", 500) // made after the backup: lost with the restore
	lost2 := w.Refund("a", 400)
	w.Close()

	info, err := journal.Restore(bg, backup, w.Path, &journal.RestoreOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	if info.Epoch != 1 {
		t.Fatalf("epoch %d", info.Epoch)
	}
	prefix, err := audit.EpochPrefix("R", info.Epoch)
	if err != nil {
		t.Fatal(err)
	}
	restored := audittest.New(t, audittest.Options{Path: w.Path, Prefix: prefix, Sandbox: sb})
	if p, err := restored.DB.ReconcileRequired(bg); err != nil || p == nil {
		t.Fatalf("ReconcileRequired = %+v, %v", p, err)
	}
	rc, err := audit.ReconcileAfterRestore(bg, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"})
	if err != nil {
		t.Fatal(err)
	}
	if rc.Checked != 1 || rc.Applied != 1 || !rc.Done() {
		t.Fatalf("check %+v", rc)
	}
	lost := kinds(rc.Lost)
	if len(lost) != 2 || lost[lost1+"/lost_refund"] == "" || lost[lost2+"/lost_refund"] == "" {
		t.Fatalf("lost %v, want %s and %s", rc.Lost, lost1, lost2)
	}
	st, err := restored.Engine.Get(bg, "b")
	if err != nil || st.Refund(inFlight).State != reservation.Succeeded {
		t.Fatalf("the in-flight refund was not settled: %+v %v", st, err)
	}
	// New refunds use the new epoch's numbers: never one the provider has.
	// The two lost refunds were journaled as recovered and count.
	if no := restored.Refund("a", 100); no != "RE1-a-4" {
		t.Fatalf("new refund number %s, want RE1-a-4", no)
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
}

// TestBackup_UnderLoadReplaysToServiceState takes a hot backup while the
// engine refunds concurrently and checks that every reservation in it
// replays to the state the service held at that reservation's sequence.
func TestBackup_UnderLoadReplaysToServiceState(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "T"})
	ids := []string{"a", "b", "c", "d"}
	for _, id := range ids {
		w.Register(id, 100000)
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 30; i++ {
				select {
				case <-done:
					return
				default:
				}
				no := w.Refund(id, 100)
				if i%2 == 0 {
					w.Settle(id, no)
				}
			}
		}()
	}
	if err := w.DB.WaitGlobal(bg, 60); err != nil {
		t.Fatal(err)
	}
	backup := filepath.Join(t.TempDir(), "backup.db")
	head, err := w.DB.BackupFile(bg, backup)
	if err != nil {
		t.Fatal(err)
	}
	close(done)
	wg.Wait()
	w.Close()

	b := openRO(t, backup)
	rep, err := audit.Verify(bg, b, audit.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("backup: %v %v %v", err, rep.Journal.Problems, rep.Problems)
	}
	if rep.Journal.Head.Global != head.Global || head.Global < 60 {
		t.Fatalf("backup head %d, BackupFile said %d", rep.Journal.Head.Global, head.Global)
	}
	backupStates, _, err := audit.Replay(bg, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	live := openRO(t, w.Path)
	for id, st := range backupStates {
		want, _, err := audit.StateAt(bg, live, id, audit.At{Seq: st.Version})
		if err != nil {
			t.Fatal(err)
		}
		if got := audit.View(st); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: the backup replays to\n%+v\nthe service held at seq %d\n%+v", id, got, st.Version, want)
		}
	}
	if len(backupStates) != len(ids) {
		t.Fatalf("%d reservations in the backup", len(backupStates))
	}
}

// TestRefundFacts_AsFactsOfTheReplay: the facts folded one reservation at
// a time on every core are those of the whole replay, and a bill's
// reconciliation on only the facts BillFacts keeps is the same as on all.
func TestRefundFacts_AsFactsOfTheReplay(t *testing.T) {
	w, facts, bill, date := disagreeingWorld(t)
	db := openRO(t, w.Path)
	all, undecoded, err := audit.RefundFacts(bg, db, nil, nil)
	if err != nil || undecoded != 0 {
		t.Fatal(err, undecoded)
	}
	if !reflect.DeepEqual(all, facts) {
		t.Fatalf("RefundFacts %+v\nFacts of the replay %+v", all, facts)
	}
	keep, err := audit.BillFacts(bill, "")
	if err != nil {
		t.Fatal(err)
	}
	kept, _, err := audit.RefundFacts(bg, db, keep, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := audit.BillOptions{Prefixes: []string{"T"}, Slack: 1}
	want, err := audit.ReconcileBill(facts, bill, opts)
	if err != nil {
		t.Fatal(err)
	}
	got, err := audit.ReconcileBill(kept, bill, opts)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("on the kept facts %+v\non all %+v", got, want)
	}
	day, _ := time.ParseInLocation(time.DateOnly, date, time.FixedZone("CST", 8*3600))
	for _, tt := range []struct {
		name string
		f    audit.RefundFact
		want bool
	}{
		{"in the bill", audit.RefundFact{RefundNo: "T-a-2"}, true},
		{"submitted that day", audit.RefundFact{RefundNo: "X-1", SubmittedAt: day.Add(time.Hour)}, true},
		{"submitted the day before", audit.RefundFact{RefundNo: "X-2", SubmittedAt: day.Add(-time.Hour)}, false},
		{"never submitted", audit.RefundFact{RefundNo: "X-3"}, false},
	} {
		if got := keep(&tt.f); got != tt.want {
			t.Errorf("%s: kept %v, want %v", tt.name, got, tt.want)
		}
	}
}
