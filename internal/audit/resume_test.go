package audit_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/refundd/refundd/internal/audit"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
)

// After a restore, ResumeAfterRestore journals the refund the backup lost,
// clears the reconcile flag and only then resumes refunds; a loop whose
// context has ended resumes nothing and leaves the flag set.
func TestResumeAfterRestore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		canceled bool
	}{
		{name: "done"},
		{name: "stopped", canceled: true},
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
			lost := w.Refund("a", 2000)
			if s := w.Settle("a", lost); s != reservation.Succeeded {
				t.Fatalf("%s is %s", lost, s)
			}
			w.Close()
			restored := restoreOver(t, w, backup, sb)

			var gate audit.RestoreGate
			if paused, err := gate.Check(bg, restored.DB); err != nil || !paused || !strings.Contains(gate.Paused(), "restored from a backup") {
				t.Fatalf("gate on a restored journal: paused %v (%q), %v; want refunds paused", paused, gate.Paused(), err)
			}
			ctx, cancel := context.WithCancel(bg)
			defer cancel()
			if tc.canceled {
				cancel()
			}
			var logs bytes.Buffer
			var flagAtResume *bool
			audit.ResumeAfterRestore(ctx, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"},
				slog.New(slog.NewTextHandler(&logs, nil)), func() {
					p, err := restored.DB.ReconcileRequired(bg)
					if err != nil {
						t.Error(err)
					}
					set := p != nil
					flagAtResume = &set
				})
			if tc.canceled {
				gate.Reconcile(ctx, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			} else {
				if paused, err := gate.Check(bg, restored.DB); err != nil || paused {
					t.Fatalf("gate after the reconciliation: paused %v, %v; want refunds taken", paused, err)
				}
				gate.Reconcile(ctx, restored.DB, sb.Client, restored.Engine, audit.RestoreCheckOptions{BasePrefix: "R"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
			}
			pending, err := restored.DB.ReconcileRequired(bg)
			if err != nil {
				t.Fatal(err)
			}
			if tc.canceled {
				if flagAtResume != nil || pending == nil || gate.Paused() == "" {
					t.Fatalf("stopped loop: resumed %v, flag %+v, gate %q; want no resume, the flag kept and refunds paused", flagAtResume, pending, gate.Paused())
				}
				return
			}
			if gate.Paused() != "" {
				t.Errorf("gate still pauses refunds after the reconciliation: %q", gate.Paused())
			}
			if flagAtResume == nil || *flagAtResume || pending != nil {
				t.Fatalf("resumed %v (flag still set then: %v), flag now %+v; want resumed after the flag was cleared", flagAtResume != nil, flagAtResume, pending)
			}
			st, err := restored.Engine.Get(bg, "a")
			if err != nil {
				t.Fatal(err)
			}
			if r := st.Refund(lost); r == nil || !r.Recovered {
				t.Fatalf("lost refund %s not journaled as recovered: %+v", lost, st.Refunds)
			}
			if !strings.Contains(logs.String(), "refund lost with the restore") || !strings.Contains(logs.String(), lost) {
				t.Errorf("log does not name the lost refund %s:\n%s", lost, logs.String())
			}
		})
	}
}
