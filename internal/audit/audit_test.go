package audit_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

var updateFixtures = flag.Bool("update-fixtures", false, "rewrite testdata/format2.db and its moments with this build")

var bg = context.Background()

func TestGenerateFixtures(t *testing.T) {
	if !*updateFixtures {
		t.Skip("run with -update-fixtures to rewrite testdata/format2.db")
	}
	path := filepath.Join("testdata", "format2.db")
	_ = os.Remove(path)
	moments := runScenario(t, path)
	writeGolden(t, filepath.Join("testdata", "format2.moments.json"), moments)
}

// copyFile copies a committed fixture to a temp dir.
func copyFile(t *testing.T, src string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dst
}

func openRO(t *testing.T, path string) *journal.DB {
	t.Helper()
	db, err := journal.Open(path, &journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func readMoments(t *testing.T, path string) []moment {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ms []moment
	if err := json.Unmarshal(b, &ms); err != nil {
		t.Fatal(err)
	}
	return ms
}

// asScenarioView reduces a tool's view to what the scenario observed.
func asScenarioView(v audit.StateView) stateView {
	out := stateView{ID: v.ID, Status: v.Status, Amount: v.Amount, Version: v.Version, Refunds: []refundView{}}
	for _, r := range v.Refunds {
		out.Refunds = append(out.Refunds, refundView{No: r.No, State: r.State, Amount: r.Amount})
	}
	return out
}

// checkMoments asserts that the state of every reservation at every
// observed moment, replayed from the journal, is what was observed live.
func checkMoments(t *testing.T, db *journal.DB, moments []moment) {
	t.Helper()
	for _, m := range moments {
		for _, id := range sortedIDs(m.States) {
			got, _, err := audit.StateAt(bg, db, id, audit.At{Time: m.At})
			if err != nil {
				t.Fatal(err)
			}
			if g := asScenarioView(got); !reflect.DeepEqual(g, m.States[id]) {
				t.Fatalf("%s at %s: replayed %+v, observed live %+v", id, m.At, g, m.States[id])
			}
			bySeq, _, err := audit.StateAt(bg, db, id, audit.At{Seq: m.States[id].Version})
			if err != nil || !reflect.DeepEqual(bySeq, got) {
				t.Fatalf("%s at seq %d differs from the state at %s: %v", id, m.States[id].Version, m.At, err)
			}
		}
	}
}

func TestFixtures_Replay(t *testing.T) {
	for _, f := range []string{"format1", "format2", "premerchant"} {
		t.Run(f, func(t *testing.T) {
			path := copyFile(t, filepath.Join("testdata", f+".db"))
			before := sum(t, path)
			db := openRO(t, path)
			rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if !rep.OK() || rep.Reservations != 5 || rep.Refunds != 7 {
				t.Fatalf("Verify: reservations %d refunds %d, journal problems %v, problems %v", rep.Reservations, rep.Refunds, rep.Journal.Problems, rep.Problems)
			}
			wantFormat := uint8(2)
			if f == "format1" {
				wantFormat = 1
			}
			if rep.Journal.Formats[wantFormat] != rep.Journal.Records {
				t.Fatalf("formats %v, want all %d records in format %d", rep.Journal.Formats, rep.Journal.Records, wantFormat)
			}
			checkMoments(t, db, readMoments(t, filepath.Join("testdata", f+".moments.json")))
			db.Close()
			if sum(t, path) != before {
				t.Fatal("reading the fixture changed it")
			}
		})
	}
}

func TestStateAt_EqualsLiveStates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.db")
	moments := runScenario(t, path)
	db := openRO(t, path)
	checkMoments(t, db, moments)

	t.Run("before registration", func(t *testing.T) {
		v, last, err := audit.StateAt(bg, db, "r5", audit.At{Time: scenarioStart})
		if err != nil || last != nil || v.Status != "" || len(v.Refunds) != 0 {
			t.Fatalf("StateAt before r5 existed = %+v, %+v, %v", v, last, err)
		}
	})
	t.Run("unknown reservation", func(t *testing.T) {
		if _, _, err := audit.StateAt(bg, db, "nope", audit.At{Seq: 1}); !errors.Is(err, audit.ErrNotFound) {
			t.Fatalf("StateAt = %v, want ErrNotFound", err)
		}
	})
	t.Run("needs exactly one of time and seq", func(t *testing.T) {
		if _, _, err := audit.StateAt(bg, db, "r1", audit.At{}); !errors.Is(err, audit.ErrInvalid) {
			t.Fatalf("StateAt = %v, want ErrInvalid", err)
		}
	})
}

func TestTimeline(t *testing.T) {
	db := openRO(t, copyFile(t, filepath.Join("testdata", "format2.db")))
	tl, err := audit.Timeline(bg, db, "r2")
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range tl {
		types = append(types, e.Type)
	}
	want := []string{reservation.TypeRegistered, reservation.TypeRefundRequested, reservation.TypeSubmissionStarted,
		reservation.TypeProviderResult, reservation.TypeAbandoned}
	if !reflect.DeepEqual(types, want) {
		t.Fatalf("types %v, want %v", types, want)
	}
	last := tl[len(tl)-1]
	if last.Refund != "T-r2-1" || last.State.Refunds[0].State != "FAILED" || last.State.Refundable != 5000 ||
		!strings.Contains(last.Summary, "abandoned") || last.By != "operator" {
		t.Fatalf("last entry %+v", last)
	}
	if !strings.Contains(tl[3].Summary, "REJECTED") || !strings.Contains(tl[3].Summary, "NOT_ENOUGH") {
		t.Fatalf("provider result summary %q", tl[3].Summary)
	}
}

// legal is a valid start: registered 1000 fen, refund T-x-1 of 500
// submitted.
func legal(at time.Time) []reservation.EventData {
	return []reservation.EventData{
		reservation.Registered{ReservationID: "x", UserID: "u", OutTradeNo: "ORD-x", Amount: 1000, Currency: "CNY"},
		reservation.RefundRequested{RefundNo: "T-x-1", Number: 1, IdempotencyKey: "k1", Fingerprint: "f", Amount: 500},
		reservation.SubmissionStarted{RefundNo: "T-x-1", Attempt: 1, Request: []byte("{}"), DueAt: at.Add(time.Minute)},
	}
}

// WeChat Pay paid a refund refundd had closed as FAILED: FAILED ->
// SUCCEEDED, counted, is the one legal way out of a terminal state.
var (
	failed = reservation.ProviderResult{RefundNo: "T-x-1", Source: reservation.SourceNotification, Outcome: reservation.OutcomeFailed,
		From: reservation.Processing, To: reservation.Failed}
	paidLate = reservation.ProviderResult{RefundNo: "T-x-1", Source: reservation.SourceNotification, Outcome: reservation.OutcomeSucceeded,
		From: reservation.Failed, To: reservation.Succeeded}
)

func TestVerify_PaidAfterFailedIsLegal(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var events []reservation.Event
	for _, d := range append(legal(at), failed, paidLate) {
		events = append(events, reservation.Event{At: at, By: "test", Data: d})
	}
	if err := eventstore.New(db).Append(bg, "x", nil, events); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("a refund paid after FAILED is reported: %v", rep.Problems)
	}
}

func TestVerify_IllegalEvents(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	succeed := reservation.ProviderResult{RefundNo: "T-x-1", Source: reservation.SourceResponse, Outcome: reservation.OutcomeSucceeded,
		From: reservation.Processing, To: reservation.Succeeded}
	tests := []struct {
		name   string
		events []reservation.EventData
		global uint64
		kind   string
		text   string
	}{
		{"terminal state left", append(legal(at), succeed, reservation.ProviderResult{RefundNo: "T-x-1", Source: reservation.SourceQuery,
			Outcome: reservation.OutcomeFailed, From: reservation.Succeeded, To: reservation.Failed}), 5, "invariant", "left the terminal state SUCCEEDED"},
		{"result from a state it was not in", append(legal(at), reservation.ProviderResult{RefundNo: "T-x-1", Outcome: reservation.OutcomeSucceeded,
			From: reservation.Unknown, To: reservation.Succeeded}), 4, "transition", "was UNKNOWN, it was PROCESSING"},
		{"over-refund", append(legal(at), reservation.RefundRequested{RefundNo: "T-x-2", Number: 2, IdempotencyKey: "k2", Amount: 600}),
			4, "invariant", "exceeds the paid 1000"},
		{"abandon while processing", append(legal(at), reservation.Abandoned{RefundNo: "T-x-1"}), 4, "transition", "only REJECTED"},
		{"resolve while processing", append(legal(at), reservation.Resolved{RefundNo: "T-x-1", Reason: "r"}), 4, "transition", "only ABNORMAL"},
		{"unknown refund", append(legal(at), reservation.QueryStarted{RefundNo: "T-x-9", Query: 1}), 4, "transition", "unknown refund T-x-9"},
		{"foreign refund number", append(legal(at)[:1], reservation.RefundRequested{RefundNo: "T-y-1", Number: 1, IdempotencyKey: "k", Amount: 5}),
			2, "transition", "not PREFIX-x-1"},
		{"registered twice", append(legal(at)[:1], legal(at)[0]), 2, "transition", "registered again"},
		{"canceled early", append(legal(at), reservation.Canceled{Refunded: 500}), 4, "transition", "canceled with 0 of 1000"},
		{"before registration", legal(at)[1:2], 1, "transition", "before the reservation was registered"},
		{"skipped attempt", append(legal(at), reservation.SubmissionStarted{RefundNo: "T-x-1", Attempt: 3}), 4, "transition", "attempt 3"},
		{"paid after failed while another refund holds the amount", append(legal(at), failed,
			reservation.RefundRequested{RefundNo: "T-x-2", Number: 2, IdempotencyKey: "k2", Amount: 1000}, paidLate),
			6, "transition", "paid after FAILED"},
		{"resubmission scheduled with other bytes", append(legal(at), reservation.SubmissionScheduled{RefundNo: "T-x-1", Request: []byte("{ }"), DueAt: at}),
			4, "transition", "other request bytes"},
		{"submission of a refund never approved", append(legal(at)[:2], reservation.ApprovalRequested{RefundNo: "T-x-1", Rule: "all", DueAt: at},
			reservation.SubmissionStarted{RefundNo: "T-x-1", Attempt: 1, Request: []byte("{}"), DueAt: at}), 4, "transition", "in state PENDING_APPROVAL"},
		// Every event of these journals is by "test": the approval is its requester's.
		{"approval by the requester", append(legal(at)[:2], reservation.ApprovalRequested{RefundNo: "T-x-1", Rule: "all", DueAt: at},
			reservation.Approved{RefundNo: "T-x-1", RequestedBy: "test"}), 4, "transition", "who requested it"},
		{"rejection of a refund not held", append(legal(at), reservation.ApprovalRejected{RefundNo: "T-x-1", Reason: "no"}),
			4, "transition", "only PENDING_APPROVAL"},
		{"resubmission scheduled of a settled refund", append(legal(at), succeed, reservation.SubmissionScheduled{RefundNo: "T-x-1", Request: []byte("{}"), DueAt: at}),
			5, "transition", "scheduled in state SUCCEEDED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "j.db")
			db, err := journal.Open(path, &journal.Options{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			events := make([]reservation.Event, len(tt.events))
			for i, d := range tt.events {
				events[i] = reservation.Event{At: at, By: "test", Data: d}
			}
			if err := eventstore.New(db).Append(bg, "x", nil, events); err != nil {
				t.Fatal(err)
			}
			rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
			db.Close()
			if err != nil {
				t.Fatal(err)
			}
			if !rep.Journal.OK() {
				t.Fatalf("the file itself is fine, got %v", rep.Journal.Problems)
			}
			found := false
			for _, p := range rep.Problems {
				found = found || (p.Global == tt.global && p.Kind == tt.kind && strings.Contains(p.Message, tt.text) && p.Stream == "x")
			}
			if !found || rep.OK() {
				t.Fatalf("want a %s problem at global %d mentioning %q; got %v", tt.kind, tt.global, tt.text, rep.Problems)
			}
		})
	}
}

func TestVerify_UndecodableAndIndexes(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "j.db")
	db, err := journal.Open(path, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	events := []reservation.Event{}
	for _, d := range legal(at) {
		events = append(events, reservation.Event{At: at, By: "t", Data: d})
	}
	if err := eventstore.New(db).Append(bg, "x", nil, events); err != nil {
		t.Fatal(err)
	}
	// A record of a newer build, an index entry no event made, a claim
	// taken from its stream and a due entry removed.
	if _, err := db.Append(bg, journal.AppendRequest{Stream: "x", Expected: 3, Events: []journal.Event{{Type: "refund.teleported", Version: 1, Data: []byte(`{}`)}},
		Marks: []journal.Mark{{Key: "attention/REJECTED/x/T-x-7"}}, Claims: []journal.Claim{{Namespace: eventstore.NamespaceRefundNo, Key: "T-x-8"}}}); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteDue(bg, []journal.Due{{At: at.Add(time.Minute), Stream: "x", Key: "T-x-1"}}); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ kind, text string }{
		{"decode", "refund.teleported"},
		{"index", "attention mark attention/REJECTED/x/T-x-7 does not match"},
		{"index", "refund_no T-x-8 is claimed by x but no event introduced it"},
	}
	for _, w := range want {
		found := false
		for _, p := range rep.Problems {
			found = found || (p.Kind == w.kind && strings.Contains(p.Message, w.text))
		}
		if !found {
			t.Errorf("want a %s problem mentioning %q; got %v", w.kind, w.text, rep.Problems)
		}
	}
	// The due entry check skips a stream that has an undecodable event
	// (its state is unknown): check it on a clean stream.
	path2 := filepath.Join(t.TempDir(), "j2.db")
	db2, err := journal.Open(path2, &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := eventstore.New(db2).Append(bg, "x", nil, events); err != nil {
		t.Fatal(err)
	}
	if err := db2.DeleteDue(bg, []journal.Due{{At: at.Add(time.Minute), Stream: "x", Key: "T-x-1"}}); err != nil {
		t.Fatal(err)
	}
	rep, err = audit.Verify(bg, db2, audit.VerifyOptions{})
	db2.Close()
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || !strings.Contains(rep.Problems[0].Message, "no due entry") {
		t.Fatalf("problems %v, want the missing due entry", rep.Problems)
	}
}

func TestExportAndStats(t *testing.T) {
	db := openRO(t, copyFile(t, filepath.Join("testdata", "format2.db")))
	var rows []audit.Row
	if err := audit.Export(bg, db, audit.ExportOptions{}, func(r audit.Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	st, err := audit.ComputeStats(bg, db, audit.StatsOptions{Fold: true})
	if err != nil {
		t.Fatal(err)
	}
	if uint64(len(rows)) != st.Records || st.Records == 0 {
		t.Fatalf("%d rows for %d records", len(rows), st.Records)
	}
	// Amounts: 5 reservations paid 10000+5000+8000+2000+3000; refunded
	// 3000+2000+2000+1000+500; r3's 8000 in flight; r2's 5000 released.
	if st.Reservations != 5 || st.Canceled != 1 || st.Paid != 28000 || st.Refunded != 8500 || st.InFlight != 8000 || st.Released != 5000 {
		t.Fatalf("stats %+v", st)
	}
	if st.RefundStates["SUCCEEDED"] != 5 || st.RefundStates["FAILED"] != 1 || st.RefundStates["PROCESSING"] != 1 {
		t.Fatalf("refund states %v", st.RefundStates)
	}
	if st.OldestInFlight == nil || st.OldestInFlight.RefundNo != "T-r3-1" || st.OldestInFlight.Age != 4*time.Minute {
		t.Fatalf("oldest in flight %+v (as of %s)", st.OldestInFlight, st.AsOf)
	}
	if st.EventTypes[reservation.TypeRegistered] != 5 || st.Head.Global != st.Records || st.FileSize <= 0 {
		t.Fatalf("stats %+v", st)
	}
	first := rows[1] // r1's refund request
	if first.Type != reservation.TypeRefundRequested || first.Amount != 3000 || first.AmountYuan != "30.00" || first.RefundNo != "T-r1-1" {
		t.Fatalf("row %+v", first)
	}
	// A time window keeps only the events decided in it.
	var windowed []audit.Row
	from := scenarioStart.Add(3 * time.Minute)
	err = audit.Export(bg, db, audit.ExportOptions{From: from, To: from.Add(time.Minute)}, func(r audit.Row) error {
		windowed = append(windowed, r)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range windowed {
		if r.At.Before(from) || !r.At.Before(from.Add(time.Minute)) || r.Reservation != "r2" {
			t.Fatalf("row outside the window: %+v", r)
		}
	}
	if len(windowed) != 4 {
		t.Fatalf("%d rows in the window, want r2's four", len(windowed))
	}
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	_ = w.Write(audit.RowHeader)
	_ = w.Write(first.CSV())
	w.Flush()
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil || len(recs[1]) != len(audit.RowHeader) || recs[1][9] != "3000" || recs[1][10] != "30.00" || recs[1][2] != reservation.DefaultMerchant {
		t.Fatalf("csv %v, %v", recs, err)
	}
}

func TestEpochPrefix(t *testing.T) {
	tests := []struct {
		base  string
		epoch uint64
		want  string
		ok    bool
	}{
		{"R", 0, "R", true}, {"R", 1, "RE1", true}, {"REFUNDD", 12, "REFUNDDE12", true},
		{"ABCDEFGHIJKLM", 99, "ABCDEFGHIJKLME99", true}, {"ABCDEFGHIJKLM", 100, "", false},
		{"ABCDEFGHIJKLMNOP", 0, "ABCDEFGHIJKLMNOP", true}, {"ABCDEFGHIJKLMNOP", 1, "", false},
		{"", 1, "", false}, {"R-1", 0, "", false},
	}
	for _, tt := range tests {
		got, err := audit.EpochPrefix(tt.base, tt.epoch)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("EpochPrefix(%q, %d) = %q, %v; want %q ok=%v", tt.base, tt.epoch, got, err, tt.want, tt.ok)
		}
		if err != nil && !errors.Is(err, audit.ErrInvalid) {
			t.Errorf("error %v does not wrap ErrInvalid", err)
		}
		if err == nil {
			if err := (reservation.Policy{RefundNoPrefix: got}).Validate(); err != nil {
				t.Errorf("%q is not a valid policy prefix: %v", got, err)
			}
		}
	}
	ps, err := audit.EpochPrefixes("R", 2)
	if err != nil || !reflect.DeepEqual(ps, []string{"R", "RE1", "RE2"}) {
		t.Fatalf("EpochPrefixes = %v, %v", ps, err)
	}
}

func TestKeys_RoundTrip(t *testing.T) {
	priv, pub, err := audit.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	key, err := audit.ParseSigningKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := audit.ParsePublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	c := journal.Checkpoint{Global: 3, Time: time.Now()}
	c.Sign(key)
	if err := c.VerifySignature(pk); err != nil {
		t.Fatal(err)
	}
	if _, err := audit.ParseSigningKey(pub); !errors.Is(err, audit.ErrInvalid) {
		t.Fatalf("ParseSigningKey(public) = %v", err)
	}
	if _, err := audit.ParsePublicKey([]byte("nonsense")); !errors.Is(err, audit.ErrInvalid) {
		t.Fatalf("ParsePublicKey(nonsense) = %v", err)
	}
}

// TestVerify_SpacedResubmissions: a resubmission held back by WeChat Pay's
// spacing (issue 17 item 3) is journaled as SubmissionScheduled of a refund
// already submitted, REJECTED or UNKNOWN; the audit must take it as legal.
func TestVerify_SpacedResubmissions(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	policy := reservation.Policy{RefundNoPrefix: "T", RefundSpacing: time.Minute, MaxAttempts: 1}
	s := &reservation.State{}
	var journaled []reservation.Event
	do := func(cmd reservation.Command, d time.Duration) []reservation.Event {
		t.Helper()
		ev, err := reservation.Decide(s, cmd, reservation.Env{Now: at.Add(d), By: "test", Policy: policy})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ev {
			reservation.Apply(s, e)
		}
		journaled = append(journaled, ev...)
		return ev
	}
	request := func(key string, d time.Duration) string {
		no := do(reservation.RequestRefund{UserID: "u", IdempotencyKey: key, Amount: new(int64(100))}, d)[0].Data.(reservation.RefundRequested).RefundNo
		do(reservation.StartSubmission{RefundNo: no, Request: []byte(`{"n":"` + no + `"}`)}, d)
		return no
	}
	scheduled := func(ev []reservation.Event) {
		t.Helper()
		if len(ev) != 1 || ev[0].Data.EventType() != reservation.TypeSubmissionWaits {
			t.Fatalf("events %v, want a scheduled submission", ev)
		}
	}
	fire := func(no string) {
		due := s.Refund(no).DueAt
		do(reservation.FireTimer{RefundNo: no, DueAt: due}, due.Sub(at))
	}
	do(reservation.Register{ReservationID: "x", UserID: "u", OutTradeNo: "ORD-x", Amount: 1000, Currency: "CNY"}, 0)
	r1 := request("k1", 0)
	do(reservation.RecordOutcome{RefundNo: r1, Source: reservation.SourceResponse, Attempt: 1, Outcome: reservation.Outcome{Kind: reservation.OutcomeRejected}}, time.Second)
	r2 := request("k2", 2*time.Minute)
	do(reservation.RecordOutcome{RefundNo: r2, Source: reservation.SourceResponse, Attempt: 1, Outcome: reservation.Outcome{Kind: reservation.OutcomeUnknown}}, 2*time.Minute+time.Second)
	scheduled(do(reservation.Resubmit{RefundNo: r1}, 2*time.Minute+10*time.Second)) // REJECTED, within r2's spacing
	fire(r1)
	do(reservation.CheckProvider{RefundNo: r2}, 3*time.Minute+time.Second)
	scheduled(do(reservation.RecordOutcome{RefundNo: r2, Source: reservation.SourceQuery, Outcome: reservation.Outcome{Kind: reservation.OutcomeNotFound}}, 3*time.Minute+2*time.Second)) // UNKNOWN
	fire(r2)

	db, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := eventstore.New(db).Append(bg, "x", nil, journaled); err != nil {
		t.Fatal(err)
	}
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() || rep.Refunds != 2 {
		t.Fatalf("Verify: refunds %d, journal problems %v, problems %v", rep.Refunds, rep.Journal.Problems, rep.Problems)
	}
}

// A journal the core decided with approvals verifies: holds, a conflict
// about a refund never sent, approval by another person, a rejection and
// an expiry.
func TestVerify_ApprovalIsLegal(t *testing.T) {
	at := time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC)
	db, err := journal.Open(filepath.Join(t.TempDir(), "j.db"), &journal.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := eventstore.New(db)
	st := &reservation.State{}
	policy := reservation.Policy{RefundNoPrefix: "T", ApproveAll: true, ApprovalTimeout: time.Hour}
	do := func(cmd reservation.Command, by string) {
		t.Helper()
		at = at.Add(time.Minute)
		events, err := reservation.Decide(st, cmd, reservation.Env{Now: at, By: by, Policy: policy,
			Encode: func(r reservation.RefundRequest) ([]byte, error) { return []byte(r.RefundNo), nil }})
		if err != nil || len(events) == 0 {
			t.Fatalf("%T: %v %v", cmd, events, err)
		}
		if err := store.Append(bg, "x", st, events); err != nil {
			t.Fatal(err)
		}
		for _, e := range events {
			reservation.Apply(st, e)
		}
	}
	do(reservation.Register{ReservationID: "x", UserID: "u", OutTradeNo: "ORD-x", Amount: 1000, Currency: "CNY"}, "service:shop")
	for _, k := range []string{"k1", "k2", "k3"} {
		do(reservation.RequestRefund{UserID: "u", IdempotencyKey: k, Amount: ptr(100)}, "service:shop")
	}
	do(reservation.RecordOutcome{RefundNo: "T-x-1", Source: reservation.SourceNotification, Outcome: reservation.Outcome{
		Kind: reservation.OutcomeSucceeded, ProviderID: "wx", OutTradeNo: "ORD-x", RefundAmount: 100, TotalAmount: 1000}}, "provider:wechatpay")
	do(reservation.Approve{RefundNo: "T-x-1"}, "approver:carol")
	do(reservation.Reject{RefundNo: "T-x-2", Reason: "no"}, "approver:carol")
	do(reservation.FireTimer{RefundNo: "T-x-3", DueAt: st.Refund("T-x-3").DueAt}, "engine")
	rep, err := audit.Verify(bg, db, audit.VerifyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("a legal approval journal is reported: %v", rep.Problems)
	}
}
