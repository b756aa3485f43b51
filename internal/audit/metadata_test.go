package audit_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"slices"
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
)

// TestExport_ReasonCodeAndMetadata: every row of a refund carries its
// reason code and metadata, in the JSON rows and in the last two CSV
// columns; rows of other refunds and of the reservation leave them empty.
func TestExport_ReasonCodeAndMetadata(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "T"})
	w.Register("r1", 10000)
	amount := int64(3000)
	_, _, err := w.Engine.Execute(context.Background(), "r1", "api", reservation.RequestRefund{UserID: "u-r1", IdempotencyKey: "k1",
		Amount: &amount, ReasonCode: reservation.ReasonDuplicate, Metadata: map[string]string{"order": "O-1", "note": "a,b \"c\""}})
	if err != nil {
		t.Fatal(err)
	}
	w.Refund("r1", 1000) // none
	var rows []audit.Row
	if err := audit.Export(context.Background(), w.DB, audit.ExportOptions{}, func(r audit.Row) error { rows = append(rows, r); return nil }); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	_ = cw.Write(audit.RowHeader)
	for _, r := range rows {
		_ = cw.Write(r.CSV())
	}
	cw.Flush()
	recs, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if h := recs[0]; !slices.Equal(h[len(h)-2:], []string{"reason_code", "metadata"}) {
		t.Fatalf("header %v", h)
	}
	withMeta := 0
	for i, r := range rows {
		rec := recs[i+1]
		code, md := rec[len(rec)-2], rec[len(rec)-1]
		switch r.RefundNo {
		case "T-r1-1":
			withMeta++
			if code != "duplicate" || md != `{"note":"a,b \"c\"","order":"O-1"}` || r.ReasonCode != "duplicate" {
				t.Fatalf("row %d (%s): reason code %q metadata %q", i, r.Type, code, md)
			}
			b, _ := json.Marshal(r)
			var back struct {
				ReasonCode string            `json:"reason_code"`
				Metadata   map[string]string `json:"metadata"`
			}
			if err := json.Unmarshal(b, &back); err != nil || back.ReasonCode != "duplicate" || back.Metadata["order"] != "O-1" {
				t.Fatalf("JSON row %s: %v", b, err)
			}
		default:
			if code != "" || md != "" {
				t.Fatalf("row %d (%s %s): reason code %q metadata %q", i, r.Type, r.RefundNo, code, md)
			}
		}
	}
	if got := rows[1].Summary; got != `refund T-r1-1 requested: 30.00 (3000 fen), reason code duplicate, metadata {"note":"a,b \"c\"","order":"O-1"}` {
		t.Fatalf("summary %q", got)
	}
	if withMeta < 2 { // the request and its submission, at least
		t.Fatalf("%d rows of the refund with metadata", withMeta)
	}
}
