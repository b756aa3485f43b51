package main

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/pgjournal/pgtest"
)

// journal verify --journal checks a cluster's PostgreSQL journal: a
// history written through the event store verifies; an event the rules
// could not have produced (a refund beyond what was paid) is a problem; a
// schema without a journal is an error, and is not created.
func TestJournalVerify_Postgres(t *testing.T) {
	store := pgtest.New(t)
	db := store.Open(t, nil)
	// A real history: the engine on the PostgreSQL journal, refunds
	// answered by the in-memory provider.
	engine, err := actors.New(actors.Config{
		Store: eventstore.New(db), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
		Policy: reservation.Policy{RefundNoPrefix: "V"}, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	amount := int64(300)
	for i := range 8 {
		id := "res" + strconv.Itoa(i)
		if _, _, err := engine.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u", OutTradeNo: "ORD-" + id, Amount: 1000, Currency: "CNY"}); err != nil {
			t.Fatal(err)
		}
		for k := range 2 {
			if _, _, err := engine.Execute(ctx, id, "u", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k" + strconv.Itoa(k), Amount: &amount}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := engine.Close(ctx); err != nil {
		t.Fatal(err)
	}
	records, err := db.LastGlobal(ctx)
	if err != nil {
		t.Fatal(err)
	}

	r := ctl(t, "journal", "verify", "--journal", store.DSN, "--journal-schema", store.Schema)
	if r.code != exitOK || !strings.Contains(r.stdout, "OK: no problems found") {
		t.Fatalf("a good journal:\n%s", r)
	}
	if !strings.Contains(r.stdout, "records      "+strconv.FormatUint(records, 10)+" ") || !strings.Contains(r.stdout, "reservations 8, refunds 16") {
		t.Fatalf("want %d records, 8 reservations, 16 refunds reported:\n%s", records, r)
	}
	// The counters (GET /v1/totals') are compared with the events; the list
	// index, once refundd marked it kept, with the states, both ways.
	if !strings.Contains(r.stdout, "counters     match the events") || !strings.Contains(r.stdout, "list index   not kept") {
		t.Fatalf("counters and list index of a good journal:\n%s", r)
	}
	if _, err := eventstore.BackfillLists(ctx, db, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, "journal", "verify", "--journal", store.DSN, "--journal-schema", store.Schema)
	if r.code != exitOK || !strings.Contains(r.stdout, "list index   match the reservations' states") {
		t.Fatalf("a good journal with its list index:\n%s", r)
	}
	evs, _, err := eventstore.Reader{DB: db}.Load(ctx, "res0")
	if err != nil {
		t.Fatal(err)
	}
	var stale journal.Mark
	for _, row := range reservation.ListRows(nil, reservation.Replay(evs)) {
		if row.RefundNo != "" {
			row.State = string(reservation.Unknown)
			stale = journal.Mark{Key: eventstore.ListMarkKey(row)}
		}
	}
	if err := db.WriteMarks(ctx, []journal.Mark{stale}); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, store.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "UPDATE "+pgx.Identifier{store.Schema, "counters"}.Sanitize()+" SET value = value + 1 WHERE key = 'reservations'"); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, "journal", "verify", "--journal", store.DSN, "--journal-schema", store.Schema)
	if r.code != exitProblems || !strings.Contains(r.stdout, "list row "+stale.Key+" matches no reservation's state") ||
		!strings.Contains(r.stdout, "counter reservations is 9, the events make it 8") {
		t.Fatalf("a stale list row and a wrong counter:\n%s", r)
	}

	// A refund of 1,000,000 fen on a reservation registered for 100.
	if _, err := db.Activate(ctx, "bad1"); err != nil {
		t.Fatal(err)
	}
	var recs []journal.Event
	at := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for _, d := range []reservation.EventData{
		reservation.Registered{ReservationID: "bad1", UserID: "u", OutTradeNo: "ORD-bad1", Amount: 100, Currency: "CNY"},
		reservation.RefundRequested{RefundNo: "X-bad1-1", Number: 1, IdempotencyKey: "k", Amount: 1_000_000},
	} {
		typ, ver, data, err := reservation.Encode(reservation.Event{At: at, By: "test", Data: d})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, journal.Event{Type: typ, Version: ver, Data: data})
	}
	if _, err := db.Append(ctx, journal.AppendRequest{Stream: "bad1", Events: recs}); err != nil {
		t.Fatal(err)
	}
	r = ctl(t, "journal", "verify", "--journal", store.DSN, "--journal-schema", store.Schema)
	if r.code != exitProblems || !strings.Contains(r.stdout, "bad1") {
		t.Fatalf("an over-refund written past the rules:\n%s", r)
	}

	r = ctl(t, "journal", "verify", "--journal", store.DSN, "--journal-schema", store.Schema+"_none")
	if r.code != exitFailed || !strings.Contains(r.stderr, "no refundd journal") {
		t.Fatalf("a schema without a journal:\n%s", r)
	}
	r = ctl(t, "journal", "verify", "--journal", store.DSN, "--file", "x.db")
	if r.code != exitUsage {
		t.Fatalf("--journal with --file:\n%s", r)
	}
}
