package simprovider

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/reservation"
)

type recorder struct {
	by  []string
	got []reservation.Notification
	err error
}

func (r *recorder) RecordNotification(ctx context.Context, by string, n reservation.Notification) ([]reservation.Event, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, errors.New("no deadline")
	}
	r.by, r.got = append(r.by, by), append(r.got, n)
	return nil, r.err
}

func TestPusher_Notify(t *testing.T) {
	ok := reservation.Outcome{Kind: reservation.OutcomeSucceeded, ProviderID: "sim1"}
	for _, tc := range []struct {
		name     string
		set      bool
		merchant func(string) string
		want     string // the notification's merchant
		err      error
		records  int
		logged   string
	}{
		{name: "before the recorder is set: dropped", set: false},
		{name: "recorded by the principal", set: true, records: 1},
		{name: "refused: logged", set: true, err: errors.New("journal closed"), records: 1, logged: "journal closed"},
		{name: "for its merchant", set: true, records: 1, want: "hotel-sh",
			merchant: func(no string) string { return map[string]string{"R-1": "hotel-sh"}[no] }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			p := &Pusher{By: "provider", Logger: slog.New(slog.NewTextHandler(&logs, nil)), Merchant: tc.merchant}
			r := &recorder{err: tc.err}
			if tc.set {
				p.SetRecorder(r)
			}
			p.Notify("R-1", ok)
			if len(r.got) != tc.records {
				t.Fatalf("%d notifications recorded; want %d", len(r.got), tc.records)
			}
			if tc.records > 0 && (r.by[0] != "provider" || r.got[0] != (reservation.Notification{RefundNo: "R-1", Outcome: ok, Merchant: tc.want})) {
				t.Errorf("recorded %+v by %q; want R-1's outcome by provider", r.got[0], r.by[0])
			}
			if got := logs.String(); tc.logged == "" && got != "" || !strings.Contains(got, tc.logged) {
				t.Errorf("log %q; want it to mention %q", got, tc.logged)
			}
		})
	}
}
