package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/audit/audittest"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/journal"
)

var bin string // the built refundctl

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "refundctl-test-")
	if err != nil {
		panic(err)
	}
	bin = filepath.Join(dir, "refundctl")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

type result struct {
	stdout, stderr string
	code           int
}

// ctl runs the built binary.
func ctl(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "REFUNDCTL_TOKEN=")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{out.String(), errb.String(), code}
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, r)
	}
	return v
}

func fileSum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

type clock struct{ ns atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *clock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// observed is a reservation's live state at a moment of the scenario.
type observed struct {
	at    time.Time
	id    string
	state *reservation.State
}

// scenario makes a journal with the real engine (WeChat Pay client and
// sandbox) on a clock that moves a minute per step, and returns the file
// (closed) and what was observed live after each step.
func scenario(t *testing.T) (string, []observed) {
	t.Helper()
	c := &clock{}
	c.ns.Store(time.Date(2026, 3, 1, 2, 0, 0, 0, time.UTC).UnixNano())
	w := audittest.New(t, audittest.Options{Prefix: "R", Now: c.Now})
	var seen []observed
	look := func(id string) {
		st, err := w.Engine.Get(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		seen = append(seen, observed{at: c.Now(), id: id, state: st})
		c.Advance(time.Minute)
	}
	w.Register("r1", 10000)
	look("r1")
	no := w.Refund("r1", 3000)
	look("r1")
	w.Settle("r1", no)
	look("r1")
	w.Register("r2", 5000)
	w.Refund("r2", 5000)
	look("r2")
	no = w.Refund("r1", 7000)
	look("r1")
	w.Settle("r1", no)
	look("r1")
	w.Close()
	return w.Path, seen
}

func TestUsage(t *testing.T) {
	path, _ := scenario(t)
	tests := []struct {
		args []string
		code int
		text string
	}{
		{nil, exitUsage, "Commands:"},
		{[]string{"help"}, exitOK, "journal verify"},
		{[]string{"journal", "nope"}, exitUsage, "unknown command"},
		{[]string{"journal", "verify"}, exitUsage, "exactly one of --file, --data and --server"},
		{[]string{"journal", "verify", "--file", path, "--data", "x"}, exitUsage, "exactly one of"},
		{[]string{"journal", "verify", "--bogus"}, exitUsage, "flag provided but not defined"},
		{[]string{"journal", "state", "r1", "--file", path}, exitUsage, "exactly one of --at and --seq"},
		{[]string{"journal", "show", "--file", path}, exitUsage, "give one reservation id"},
		{[]string{"journal", "export", "--file", path, "--format", "xml"}, exitUsage, "jsonl or csv"},
		{[]string{"reconcile", "--file", path}, exitUsage, "exactly one of --bill"},
		{[]string{"reconcile", "--file", path, "--query", "--pace-queries", "-1"}, exitUsage, "--pace-queries"},
		{[]string{"restore", "--from", path}, exitUsage, "exactly one of --data and --to"},
		{[]string{"journal", "verify", "--file", filepath.Join(t.TempDir(), "missing.db")}, exitFailed, "no such file"},
	}
	for _, tt := range tests {
		r := ctl(t, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stdout+r.stderr, tt.text) {
			t.Errorf("refundctl %v: want exit %d mentioning %q; got %s", tt.args, tt.code, tt.text, r)
		}
	}
	for _, cmd := range commands() {
		args := append(strings.Fields(cmd.name), "--help")
		if r := ctl(t, args...); r.code != exitOK || !strings.Contains(r.stdout, "usage: refundctl "+cmd.name) || !strings.Contains(r.stdout, "Flags:") {
			t.Errorf("%s --help: %s", cmd.name, r)
		}
	}
}

func TestReadOnlyCommands_LeaveTheFileIdentical(t *testing.T) {
	path, _ := scenario(t)
	before := fileSum(t, path)
	for _, args := range [][]string{
		{"journal", "verify", "--file", path},
		{"journal", "verify", "--data", filepath.Dir(path), "--json"},
		{"journal", "show", "r1", "--file", path},
		{"journal", "state", "r1", "--file", path, "--seq", "3"},
		{"journal", "export", "--file", path, "--format", "csv"},
		{"journal", "stats", "--file", path},
		{"journal", "head", "--file", path, "--json"},
	} {
		if r := ctl(t, args...); r.code != exitOK {
			t.Fatalf("%v: %s", args, r)
		}
	}
	if fileSum(t, path) != before {
		t.Fatal("a read-only command changed the journal file")
	}
}

// verifyJSON is the --json shape of journal verify, decoded independently.
type verifyJSON struct {
	OK     bool   `json:"ok"`
	Source string `json:"source"`
	Report struct {
		Journal struct {
			Records uint64 `json:"records"`
			Head    struct {
				Global uint64 `json:"global"`
				Hash   string `json:"hash"`
			} `json:"head"`
			Problems []struct {
				Global  uint64 `json:"global"`
				Kind    string `json:"kind"`
				Message string `json:"message"`
			} `json:"problems"`
		} `json:"journal"`
		Reservations int `json:"reservations"`
		Refunds      int `json:"refunds"`
		Range        struct {
			From, To, Records uint64
			Streams           int
		} `json:"range"`
		Problems []struct {
			Global  uint64 `json:"global"`
			Stream  string `json:"stream"`
			Kind    string `json:"kind"`
			Message string `json:"message"`
		} `json:"problems"`
	} `json:"report"`
}

func patch(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(fn); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func be64(v uint64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func TestVerify(t *testing.T) {
	path, _ := scenario(t)
	r := ctl(t, "journal", "verify", "--file", path, "--json")
	v := decode[verifyJSON](t, r)
	if r.code != exitOK || !v.OK || v.Report.Reservations != 2 || v.Report.Refunds != 3 || v.Report.Journal.Records == 0 || len(v.Report.Journal.Head.Hash) != 64 {
		t.Fatalf("clean journal: %s", r)
	}
	if r := ctl(t, "journal", "verify", "--file", path); r.code != exitOK || !strings.Contains(r.stdout, "OK: no problems found") {
		t.Fatalf("human output: %s", r)
	}

	tests := []struct {
		name   string
		mutate func(tx *bolt.Tx) error
		global uint64
		kind   string
		text   string
	}{
		{"flipped byte", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("log"))
			v := append([]byte{}, b.Get(be64(3))...)
			v[len(v)/2] ^= 0x20
			return b.Put(be64(3), v)
		}, 3, "record", "checksum mismatch"},
		{"deleted record", func(tx *bolt.Tx) error { return tx.Bucket([]byte("log")).Delete(be64(4)) }, 5, "sequence", "global 5 follows 3"},
		{"reordered records", func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("log"))
			v4, v5 := append([]byte{}, b.Get(be64(4))...), append([]byte{}, b.Get(be64(5))...)
			if err := b.Put(be64(4), v5); err != nil {
				return err
			}
			return b.Put(be64(5), v4)
		}, 4, "record", "stored under global 4 but encodes global 5"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "j.db")
			b, _ := os.ReadFile(path)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			patch(t, p, tt.mutate)
			r := ctl(t, "journal", "verify", "--file", p, "--json")
			v := decode[verifyJSON](t, r)
			found := false
			for _, pr := range v.Report.Journal.Problems {
				found = found || (pr.Global == tt.global && pr.Kind == tt.kind && strings.Contains(pr.Message, tt.text))
			}
			if r.code != exitProblems || v.OK || !found {
				t.Fatalf("want exit 1 and a %s problem at global %d (%q): %s", tt.kind, tt.global, tt.text, r)
			}
			h := ctl(t, "journal", "verify", "--file", p)
			if h.code != exitProblems || !strings.Contains(h.stdout, fmt.Sprintf("PROBLEM global %d [%s]", tt.global, tt.kind)) || !strings.Contains(h.stdout, "FAILED:") {
				t.Fatalf("human output: %s", h)
			}
		})
	}
}

// TestVerify_RecordedHead rewrites history the way an operator with the
// file could: back to an earlier backup, then other events on top. The
// result is internally consistent; only a head recorded before catches it.
func TestVerify_RecordedHead(t *testing.T) {
	sb := audittest.NewSandbox(t)
	dir := t.TempDir()
	live := filepath.Join(dir, "refundd.db")
	w := audittest.New(t, audittest.Options{Path: live, Prefix: "R", Sandbox: sb})
	w.Register("r1", 10000)
	backup := filepath.Join(dir, "backup.db")
	if _, err := w.DB.BackupFile(context.Background(), backup); err != nil {
		t.Fatal(err)
	}
	w.Settle("r1", w.Refund("r1", 4000))
	w.Close()
	headFile := filepath.Join(dir, "head.json")
	r := ctl(t, "journal", "head", "--file", live, "--json")
	if r.code != exitOK {
		t.Fatal(r)
	}
	if err := os.WriteFile(headFile, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	recorded := decode[api.HeadView](t, r).Head

	// The forgery: the backup, and a different refund in its place.
	if _, err := journal.Restore(context.Background(), backup, live, &journal.RestoreOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	// The restored journal's epoch prefix: the old numbers are taken.
	w2 := audittest.New(t, audittest.Options{Path: live, Prefix: "RE1", Sandbox: sb})
	w2.Settle("r1", w2.Refund("r1", 100))
	w2.Settle("r1", w2.Refund("r1", 100))
	w2.Close()

	if r := ctl(t, "journal", "verify", "--file", live); r.code != exitOK {
		t.Fatalf("the rewritten journal is consistent on its own: %s", r)
	}
	for _, args := range [][]string{
		{"--checkpoint", headFile},
		{"--head", fmt.Sprintf("%d:%s", recorded.Global, recorded.Hash)},
	} {
		r := ctl(t, append([]string{"journal", "verify", "--file", live, "--json"}, args...)...)
		v := decode[verifyJSON](t, r)
		found := false
		for _, p := range v.Report.Journal.Problems {
			found = found || (p.Kind == "head" && p.Global == recorded.Global && strings.Contains(p.Message, "were changed"))
		}
		if r.code != exitProblems || !found {
			t.Fatalf("%v: the recorded head at %d must fail: %s", args, recorded.Global, r)
		}
	}
}

// TestVerify_Since: with --since a recorded head, verify checks the chain
// and the rules of what was appended after it, and only that: a record
// changed before the head goes unseen (it is not read), one after it is
// found, and a head that is not on the chain is refused.
func TestVerify_Since(t *testing.T) {
	sb := audittest.NewSandbox(t)
	dir := t.TempDir()
	live := filepath.Join(dir, "refundd.db")
	w := audittest.New(t, audittest.Options{Path: live, Prefix: "R", Sandbox: sb})
	w.Register("r1", 10000)
	w.Settle("r1", w.Refund("r1", 4000))
	w.Close()
	r := ctl(t, "journal", "head", "--file", live, "--json")
	if r.code != exitOK {
		t.Fatal(r)
	}
	headFile := filepath.Join(dir, "head.json")
	if err := os.WriteFile(headFile, []byte(r.stdout), 0o600); err != nil {
		t.Fatal(err)
	}
	head := decode[api.HeadView](t, r).Head
	w = audittest.New(t, audittest.Options{Path: live, Prefix: "R", Sandbox: sb})
	w.Register("r2", 5000)
	w.Settle("r2", w.Refund("r2", 5000))
	w.Close()
	full := decode[verifyJSON](t, ctl(t, "journal", "verify", "--file", live, "--json"))
	last := full.Report.Journal.Head.Global
	if !full.OK || head.Global < 3 || last <= head.Global {
		t.Fatalf("setup: head %d, last %d, full verify %+v", head.Global, last, full)
	}
	sinceHead := fmt.Sprintf("%d:%s", head.Global, head.Hash)

	copyOf := func(t *testing.T, mutate func(tx *bolt.Tx) error) string {
		p := filepath.Join(t.TempDir(), "j.db")
		b, _ := os.ReadFile(live)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if mutate != nil {
			patch(t, p, mutate)
		}
		return p
	}
	flip := func(g uint64) func(tx *bolt.Tx) error {
		return func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("log"))
			v := append([]byte{}, b.Get(be64(g))...)
			v[len(v)/2] ^= 0x20
			return b.Put(be64(g), v)
		}
	}
	tests := []struct {
		name    string
		since   string
		mutate  func(tx *bolt.Tx) error
		code    int
		problem uint64 // the global of the one file problem expected; 0 for none
		stderr  string
	}{
		{"the new records", sinceHead, nil, exitOK, 0, ""},
		{"a head file", headFile, nil, exitOK, 0, ""},
		{"a record changed before the head is not read", sinceHead, flip(2), exitOK, 0, ""},
		{"a record changed after the head", sinceHead, flip(head.Global + 2), exitProblems, head.Global + 2, ""},
		{"a forged head", fmt.Sprintf("%d:%s", head.Global, strings.Repeat("ab", 32)), nil, exitProblems, 0, "not on the chain"},
		{"a head beyond the end", fmt.Sprintf("%d:%s", last+5, head.Hash), nil, exitProblems, 0, "not on the chain"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := copyOf(t, tt.mutate)
			r := ctl(t, "journal", "verify", "--file", p, "--since", tt.since, "--json")
			if r.code != tt.code {
				t.Fatalf("exit %d, want %d: %s", r.code, tt.code, r)
			}
			if tt.stderr != "" {
				if !strings.Contains(r.stderr, tt.stderr) || r.stdout != "" {
					t.Fatalf("want a refusal mentioning %q and no report: %s", tt.stderr, r)
				}
				return
			}
			v := decode[verifyJSON](t, r)
			rg := v.Report.Range
			if rg.From != head.Global || rg.To != last || rg.Records != last-head.Global || v.Report.Journal.Records != last-head.Global || rg.Streams != 1 {
				t.Fatalf("range %+v (records %d), want %d..%d, %d records of 1 reservation: %s", rg, v.Report.Journal.Records, head.Global, last, last-head.Global, r)
			}
			var globals []uint64
			for _, pr := range v.Report.Journal.Problems {
				globals = append(globals, pr.Global)
			}
			switch {
			case tt.problem == 0 && (len(globals) > 0 || len(v.Report.Problems) > 0):
				t.Fatalf("problems %+v, want none", v.Report)
			case tt.problem != 0 && (len(globals) == 0 || globals[0] != tt.problem):
				t.Fatalf("file problems at %v, want one at %d: %s", globals, tt.problem, r)
			}
		})
	}
	h := ctl(t, "journal", "verify", "--file", live, "--since", sinceHead)
	if want := fmt.Sprintf("verified     globals %d..%d: %d records, 1 reservations", head.Global+1, last, last-head.Global); h.code != exitOK || !strings.Contains(h.stdout, want) {
		t.Fatalf("human output: want %q: %s", want, h)
	}
	if r := ctl(t, "journal", "verify", "--file", copyOf(t, flip(2))); r.code != exitProblems {
		t.Fatalf("a full verify must find the record changed before the head: %s", r)
	}
}

func TestVerify_SignedCheckpoints(t *testing.T) {
	dir := t.TempDir()
	keyFile := filepath.Join(dir, "cp.key")
	if r := ctl(t, "keygen", "--out", keyFile); r.code != exitOK || !strings.Contains(r.stdout, "key id") {
		t.Fatal(r)
	}
	if r := ctl(t, "keygen", "--out", keyFile); r.code != exitFailed {
		t.Fatalf("keygen over an existing key: %s", r)
	}
	priv, _ := os.ReadFile(keyFile)
	key, err := parseKeyForTest(priv)
	if err != nil {
		t.Fatal(err)
	}
	w := audittest.New(t, audittest.Options{Prefix: "R", Journal: journal.Options{SigningKey: key, CheckpointEvery: 2, CheckpointInterval: -1}})
	w.Register("r1", 1000)
	w.Settle("r1", w.Refund("r1", 500))
	w.Close()
	if r := ctl(t, "journal", "verify", "--file", w.Path, "--public-key", keyFile+".pub"); r.code != exitOK || !strings.Contains(r.stdout, "signed") {
		t.Fatalf("signed journal: %s", r)
	}
	other := filepath.Join(dir, "other.key")
	ctl(t, "keygen", "--out", other)
	r := ctl(t, "journal", "verify", "--file", w.Path, "--public-key", other+".pub", "--json")
	v := decode[verifyJSON](t, r)
	if r.code != exitProblems || len(v.Report.Journal.Problems) == 0 || v.Report.Journal.Problems[0].Kind != "checkpoint" ||
		!strings.Contains(v.Report.Journal.Problems[0].Message, "signed by key") {
		t.Fatalf("checkpoints signed by another key: %s", r)
	}
}

func TestShowAndState(t *testing.T) {
	path, seen := scenario(t)
	for _, o := range seen {
		// At the observed moment, and in the ways people write times.
		for _, at := range []string{o.at.Format(time.RFC3339Nano), o.at.In(beijing).Format(time.DateTime)} {
			r := ctl(t, "journal", "state", o.id, "--file", path, "--at", at, "--json")
			if r.code != exitOK {
				t.Fatal(r)
			}
			v := decode[struct {
				Exists bool `json:"exists"`
				State  struct {
					Status     string `json:"status"`
					Refunded   int64  `json:"refunded"`
					InFlight   int64  `json:"in_flight"`
					Refundable int64  `json:"refundable"`
					Version    uint64 `json:"version"`
					Refunds    []struct {
						No     string `json:"refund_no"`
						State  string `json:"state"`
						Amount int64  `json:"amount"`
					} `json:"refunds"`
				} `json:"state"`
			}](t, r)
			st := o.state
			if !v.Exists || v.State.Status != string(st.Status) || v.State.Version != st.Version || v.State.Refunded != st.Refunded() ||
				v.State.InFlight != st.InFlight() || v.State.Refundable != st.Refundable() || len(v.State.Refunds) != len(st.Refunds) {
				t.Fatalf("%s at %s: tool says %+v, live was %+v", o.id, at, v.State, st)
			}
			for i, rf := range st.Refunds {
				if g := v.State.Refunds[i]; g.No != rf.No || g.State != string(rf.State) || g.Amount != rf.Amount {
					t.Fatalf("%s at %s refund %d: tool %+v, live %+v", o.id, at, i, g, rf)
				}
			}
		}
	}
	r := ctl(t, "journal", "state", "r2", "--file", path, "--at", "2026-03-01T01:00:00Z")
	if r.code != exitOK || !strings.Contains(r.stdout, "did not exist yet") {
		t.Fatalf("before registration: %s", r)
	}
	if r := ctl(t, "journal", "state", "r1", "--file", path, "--seq", "2"); r.code != exitOK || !strings.Contains(r.stdout, "as of event #2") {
		t.Fatalf("--seq: %s", r)
	}
	if r := ctl(t, "journal", "state", "nobody", "--file", path, "--seq", "1"); r.code != exitProblems || !strings.Contains(r.stderr, "not in") {
		t.Fatalf("unknown reservation: %s", r)
	}

	r = ctl(t, "journal", "show", "r1", "--file", path, "--json")
	tl := decode[struct {
		ReservationID string `json:"reservation_id"`
		Events        []struct {
			Global  uint64          `json:"global"`
			Seq     uint64          `json:"seq"`
			At      time.Time       `json:"at"`
			Type    string          `json:"type"`
			Summary string          `json:"summary"`
			Data    json.RawMessage `json:"data"`
			State   struct {
				Status string `json:"status"`
			} `json:"state"`
		} `json:"events"`
	}](t, r)
	if r.code != exitOK || tl.ReservationID != "r1" || len(tl.Events) == 0 || tl.Events[0].Type != reservation.TypeRegistered ||
		tl.Events[0].Seq != 1 || len(tl.Events[0].Data) == 0 || tl.Events[len(tl.Events)-1].State.Status != "CANCELED" {
		t.Fatalf("show --json: %s", r)
	}
	h := ctl(t, "journal", "show", "r1", "--file", path)
	if h.code != exitOK || !strings.Contains(h.stdout, "refund R-r1-1 requested: 30.00 (3000 fen)") || !strings.Contains(h.stdout, "-> CANCELED") {
		t.Fatalf("show: %s", h)
	}
}

func TestExportAndStats(t *testing.T) {
	path, seen := scenario(t)
	r := ctl(t, "journal", "export", "--file", path, "--format", "csv")
	rows, err := csv.NewReader(strings.NewReader(r.stdout)).ReadAll()
	if r.code != exitOK || err != nil || len(rows) < 2 || strings.Join(rows[0], ",") != "global,reservation_id,merchant,seq,at,type,version,by,refund_no,amount_fen,amount_yuan,refund_state,status,summary,data,reason_code,metadata" {
		t.Fatalf("csv: %v %s", err, r)
	}
	r = ctl(t, "journal", "export", "--file", path, "--from", seen[1].at.Format(time.RFC3339), "--to", seen[2].at.Format(time.RFC3339))
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	for _, l := range lines {
		var row struct {
			At         time.Time `json:"at"`
			Amount     int64     `json:"amount"`
			AmountYuan string    `json:"amount_yuan"`
		}
		if err := json.Unmarshal([]byte(l), &row); err != nil || row.At.Before(seen[1].at) || !row.At.Before(seen[2].at) {
			t.Fatalf("row outside the range or malformed: %v %s", err, l)
		}
	}
	out := filepath.Join(t.TempDir(), "events.jsonl")
	if r := ctl(t, "journal", "export", "--file", path, "--out", out); r.code != exitOK || r.stdout != "" {
		t.Fatalf("--out: %s", r)
	}
	if b, _ := os.ReadFile(out); bytes.Count(b, []byte("\n")) != len(rows)-1 {
		t.Fatalf("--out wrote %d lines, want %d", bytes.Count(b, []byte("\n")), len(rows)-1)
	}

	// The counters kept by the appends give the figures the fold gives,
	// but for the oldest refund in flight, which only the fold finds.
	type stats struct {
		Source       string         `json:"source"`
		Records      uint64         `json:"records"`
		Reservations int            `json:"reservations"`
		Canceled     int            `json:"canceled"`
		Paid         int64          `json:"paid"`
		Refunded     int64          `json:"refunded"`
		InFlight     int64          `json:"in_flight"`
		RefundStates map[string]int `json:"refund_states"`
		EventTypes   map[string]int `json:"event_types"`
		FileSize     int64          `json:"file_size"`
		AsOf         time.Time      `json:"as_of"`
		Oldest       *struct {
			RefundNo string `json:"refund_no"`
		} `json:"oldest_in_flight"`
	}
	r = ctl(t, "journal", "stats", "--file", path, "--json", "--fold")
	st := decode[stats](t, r)
	if r.code != exitOK || st.Source != "fold" || st.Reservations != 2 || st.Canceled != 1 || st.Paid != 15000 || st.Refunded != 10000 || st.InFlight != 5000 ||
		st.RefundStates["SUCCEEDED"] != 2 || st.RefundStates["PROCESSING"] != 1 || st.Oldest == nil || st.Oldest.RefundNo != "R-r2-1" ||
		uint64(len(rows)-1) != st.Records || st.FileSize == 0 {
		t.Fatalf("stats: %s", r)
	}
	r = ctl(t, "journal", "stats", "--file", path, "--json")
	counted := decode[stats](t, r)
	if r.code != exitOK || counted.Source != "counters" || counted.Oldest != nil {
		t.Fatalf("stats from counters: %s", r)
	}
	counted.Source, counted.Oldest, st.Source, st.Oldest = "", nil, "", nil
	if !reflect.DeepEqual(counted, st) {
		t.Fatalf("stats from counters %+v\nfrom the fold %+v", counted, st)
	}
}

func TestLockedByRefundd(t *testing.T) {
	w := audittest.New(t, audittest.Options{})
	w.Register("r1", 100)
	start := time.Now()
	r := ctl(t, "journal", "verify", "--data", filepath.Dir(w.Path), "--lock-timeout", "100ms")
	if r.code != exitFailed || !strings.Contains(r.stderr, "held by a running refundd") || !strings.Contains(r.stderr, "refundctl backup --server") {
		t.Fatalf("verify of a held journal: %s", r)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("the lock timeout was not honoured")
	}
}

// serve puts the audit routes of a live journal on a test server, with an
// appender that keeps writing until the test ends.
func serve(t *testing.T, w *audittest.World) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(api.New(w.Engine, api.Options{Audit: &api.AuditConfig{Journal: w.DB},
		Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(srv.Close)
	return srv
}

func TestBackupFromServer(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "R"})
	w.Register("r0", 1000)
	srv := serve(t, w)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 1; ctx.Err() == nil; i++ {
			id := fmt.Sprintf("r%d", i)
			_, _, err := w.Engine.Execute(context.Background(), id, "t", reservation.Register{ReservationID: id, UserID: "u",
				OutTradeNo: "O" + id, Amount: 100, Currency: "CNY"})
			if err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { cancel(); wg.Wait() }()
	if err := w.DB.WaitGlobal(context.Background(), 20); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b.db")
	r := ctl(t, "backup", "--server", srv.URL, "--out", out, "--json")
	b := decode[struct {
		OK    bool   `json:"ok"`
		File  string `json:"file"`
		Bytes int64  `json:"bytes"`
		Head  struct {
			Global uint64 `json:"global"`
			Hash   string `json:"hash"`
		} `json:"head"`
		Check struct {
			HeadsMatched int `json:"heads_matched"`
		} `json:"check"`
	}](t, r)
	if r.code != exitOK || !b.OK || b.File != out || b.Bytes == 0 || b.Head.Global < 20 {
		t.Fatalf("backup: %s", r)
	}
	// The check reported is the one run as the copy arrived, against the
	// head the server announced (the copy is not checked a second time).
	if b.Check.HeadsMatched != 1 {
		t.Fatalf("backup's check matched %d announced heads, want 1: %s", b.Check.HeadsMatched, r)
	}
	// The copy's head is on the live chain: it replays to the service's
	// state at that sequence.
	h, _ := journal.ParseHash(b.Head.Hash)
	res, err := w.DB.Check(context.Background(), &journal.CheckOptions{Heads: []journal.Checkpoint{{Global: b.Head.Global, Hash: h}}})
	if err != nil || res.HeadsMatched != 1 {
		t.Fatalf("backup head not on the live chain: %v %v", err, res.Problems)
	}
	if r := ctl(t, "journal", "verify", "--file", out); r.code != exitOK {
		t.Fatalf("verify the backup: %s", r)
	}
	if r := ctl(t, "journal", "stats", "--server", srv.URL, "--json"); r.code != exitOK {
		t.Fatalf("stats from a server: %s", r)
	}
	if r := ctl(t, "journal", "head", "--server", srv.URL); r.code != exitOK || !strings.Contains(r.stdout, "head ") {
		t.Fatalf("head from a server: %s", r)
	}
	// A copy of a stopped journal.
	cancel()
	wg.Wait()
	w.Close()
	out2 := filepath.Join(t.TempDir(), "c.db")
	if r := ctl(t, "backup", "--file", w.Path, "--out", out2); r.code != exitOK || !strings.Contains(r.stdout, "head ") {
		t.Fatalf("backup of a stopped journal: %s", r)
	}
	if r := ctl(t, "backup", "--server", "http://127.0.0.1:1", "--out", filepath.Join(t.TempDir(), "x.db")); r.code != exitFailed {
		t.Fatalf("backup from nowhere: %s", r)
	}
}

func TestRestore(t *testing.T) {
	path, _ := scenario(t)
	dataDir := t.TempDir()
	r := ctl(t, "restore", "--from", path, "--data", dataDir, "--prefix", "R", "--json")
	v := decode[struct {
		Journal string `json:"journal"`
		Prefix  string `json:"refund_prefix"`
		Restore struct {
			Epoch  uint64 `json:"epoch"`
			Backup struct {
				Global uint64 `json:"global"`
			} `json:"backup"`
		} `json:"restore"`
		LatestEvent time.Time `json:"latest_event"`
	}](t, r)
	if r.code != exitOK || v.Restore.Epoch != 1 || v.Prefix != "RE1" || v.Journal != filepath.Join(dataDir, "refundd.db") || v.LatestEvent.IsZero() {
		t.Fatalf("restore: %s", r)
	}
	if r := ctl(t, "restore", "--from", path, "--data", dataDir); r.code != exitFailed || !strings.Contains(r.stderr, "exists") {
		t.Fatalf("restore over a journal: %s", r)
	}
	if r := ctl(t, "journal", "head", "--data", dataDir); r.code != exitOK || !strings.Contains(r.stdout, "reconcile   REQUIRED") || !strings.Contains(r.stdout, "epoch       1") {
		t.Fatalf("head after restore: %s", r)
	}
	r = ctl(t, "restore", "--from", path, "--data", dataDir, "--replace", "--prefix", "R")
	if r.code != exitOK || !strings.Contains(r.stdout, "epoch         2") || !strings.Contains(r.stdout, "RE2-RESERVATION-N") || !strings.Contains(r.stdout, "old journal   kept at") {
		t.Fatalf("restore --replace: %s", r)
	}
	if r := ctl(t, "journal", "verify", "--data", dataDir); r.code != exitOK {
		t.Fatalf("verify the restored journal: %s", r)
	}
}

// reconcileJSON is the --json shape of reconcile.
type reconcileJSON struct {
	OK   bool   `json:"ok"`
	Mode string `json:"mode"`
	Bill *struct {
		Date       string `json:"date"`
		Matched    int    `json:"matched"`
		Mismatches []struct {
			Kind     string `json:"kind"`
			RefundNo string `json:"refund_no"`
			Detail   string `json:"detail"`
		} `json:"mismatches"`
	} `json:"bill"`
	Provider *struct {
		Queried    int `json:"queried"`
		Mismatches []struct {
			Kind     string `json:"kind"`
			RefundNo string `json:"refund_no"`
		} `json:"mismatches"`
	} `json:"provider"`
	Fixed []struct {
		RefundNo string `json:"refund_no"`
		Status   int    `json:"status"`
		Error    string `json:"error"`
	} `json:"fixed"`
}

func TestReconcile(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "T"})
	w.Register("a", 10000)
	w.Register("b", 5000)
	w.Register("c", 3000)
	w.Settle("a", w.Refund("a", 3000))
	w.Lie("T-c-1")
	w.Refund("c", 3000) // the journal says SUCCEEDED; WeChat Pay never saw it
	w.Shave("T-a-2", 1)
	w.Settle("a", w.Refund("a", 2000)) // WeChat Pay refunded 1 fen less
	w.Refund("b", 1000)                // PROCESSING in the journal, SUCCESS at WeChat Pay
	w.PlatformRefund("ORD-b", "MP-b-1", 700, 5000)
	date, raw := w.Bill()
	billFile := filepath.Join(t.TempDir(), "refund-bill.csv")
	if err := os.WriteFile(billFile, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	keyDir := t.TempDir()
	if _, err := w.Sandbox.Keys.WriteDir(keyDir, w.Sandbox.HTTP.URL); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, w)
	// The journal stays open in the service: the tool reads a hot backup.
	want := map[string]string{"MP-b-1": "not_in_journal", "T-c-1": "not_in_bill", "T-a-2": "amount"}
	check := func(r result) {
		t.Helper()
		v := decode[reconcileJSON](t, r)
		got := map[string]string{}
		for _, m := range v.Bill.Mismatches {
			got[m.RefundNo] = m.Kind
		}
		if r.code != exitProblems || v.OK || v.Mode != "bill" || v.Bill.Date != date || len(got) != 4 ||
			got["MP-b-1"] != want["MP-b-1"] || got["T-c-1"] != want["T-c-1"] || got["T-a-2"] != want["T-a-2"] || got["T-b-1"] != "status" {
			t.Fatalf("reconcile: %v\n%s", got, r)
		}
	}
	check(ctl(t, "reconcile", "--server", srv.URL, "--bill", billFile, "--prefix", "T", "--slack", "1ns", "--json"))
	saved := filepath.Join(t.TempDir(), "saved.csv")
	check(ctl(t, "reconcile", "--server", srv.URL, "--bill-date", date, "--sandbox-keys", keyDir, "--save-bill", saved, "--slack", "1ns", "--json"))
	if b, err := os.ReadFile(saved); err != nil || !bytes.HasPrefix(b, []byte("\ufeff")) {
		t.Fatalf("--save-bill: %v", err)
	}
	h := ctl(t, "reconcile", "--server", srv.URL, "--bill", billFile, "--prefix", "T", "--slack", "1ns")
	if h.code != exitProblems || !strings.Contains(h.stdout, "MISMATCH not_in_journal MP-b-1") || !strings.Contains(h.stdout, "made in the merchant platform") ||
		!strings.Contains(h.stdout, "DISAGREE: 4 mismatches") {
		t.Fatalf("human output: %s", h)
	}

	// Query mode, and corrections fed through the running service.
	r := ctl(t, "reconcile", "--server", srv.URL, "--query", "--sandbox-keys", keyDir, "--fix", "--json")
	v := decode[reconcileJSON](t, r)
	got := map[string]string{}
	for _, m := range v.Provider.Mismatches {
		got[m.RefundNo] = m.Kind
	}
	if r.code != exitProblems || v.Mode != "query" || v.Provider.Queried != 4 || got["T-c-1"] != "status" || got["T-a-2"] != "amount" || got["T-b-1"] != "status" {
		t.Fatalf("query: %v\n%s", got, r)
	}
	if len(v.Fixed) != 1 || v.Fixed[0].RefundNo != "T-b-1" || v.Fixed[0].Status != 200 || v.Fixed[0].Error != "" {
		t.Fatalf("--fix asks the service to reconcile the one refund that is not final: %+v", v.Fixed)
	}
	// The service asked WeChat Pay: the refund settles through the engine.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := w.Engine.Await(ctx, "b", func(s *reservation.State) bool { return s.Refund("T-b-1").State == reservation.Succeeded }); err != nil {
		t.Fatalf("T-b-1 not settled after --fix: %v", err)
	}
}

// TestGroupAndVersion: "journal" alone names a group, so its commands are
// listed (not "unknown command"); version is a command and a flag.
func TestGroupAndVersion(t *testing.T) {
	tests := []struct {
		args   []string
		code   int
		stdout string
	}{
		{[]string{"journal"}, exitUsage, ""},
		{[]string{"journal", "--help"}, exitOK, "usage: refundctl journal COMMAND"},
		{[]string{"journal", "-h"}, exitOK, "journal state RESERVATION"},
		{[]string{"version"}, exitOK, "refundctl "},
		{[]string{"--version"}, exitOK, "refundctl "},
	}
	for _, tt := range tests {
		r := ctl(t, tt.args...)
		out := r.stdout
		if tt.code != exitOK {
			out = r.stderr
		}
		if r.code != tt.code || !strings.Contains(out, tt.stdout) || strings.Contains(r.stderr, "unknown command") ||
			(tt.args[0] == "journal" && (!strings.Contains(out, "journal verify") || strings.Contains(out, "keygen"))) {
			t.Errorf("refundctl %v: want exit %d, %q and the journal commands only; got %s", tt.args, tt.code, tt.stdout, r)
		}
	}
}

// TestProbe: the image's health check is "refundctl probe": ready on a
// 2xx, not ready (1) on another status, no answer (3) when nothing listens.
func TestProbe(t *testing.T) {
	ready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte(`{"status":"ok"}`))
	}))
	defer ready.Close()
	unready := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, `{"status":"unavailable"}`, http.StatusServiceUnavailable)
	}))
	defer unready.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	tests := []struct {
		args []string
		code int
		text string
	}{
		{[]string{"probe", ready.URL + "/readyz"}, exitOK, "ready: HTTP 200"},
		{[]string{"probe", unready.URL + "/readyz"}, exitProblems, "not ready: HTTP 503"},
		{[]string{"probe", gone.URL + "/readyz"}, exitFailed, "refused"},
		{[]string{"probe", "a", "b"}, exitUsage, "at most one URL"},
	}
	for _, tt := range tests {
		if r := ctl(t, tt.args...); r.code != tt.code || !strings.Contains(r.stdout+r.stderr, tt.text) {
			t.Errorf("refundctl %v: want exit %d and %q; got %s", tt.args, tt.code, tt.text, r)
		}
	}
}

// TestReconcile_NothingCompared: a range with no refunds in it is not
// agreement; the tool says nothing was compared and exits exitNothing.
func TestReconcile_NothingCompared(t *testing.T) {
	w := audittest.New(t, audittest.Options{Prefix: "T"})
	w.Register("a", 10000)
	w.Settle("a", w.Refund("a", 3000))
	keyDir := t.TempDir()
	if _, err := w.Sandbox.Keys.WriteDir(keyDir, w.Sandbox.HTTP.URL); err != nil {
		t.Fatal(err)
	}
	srv := serve(t, w)
	tests := []struct {
		name string
		args []string
		code int
		text string
	}{
		{"empty range", []string{"--from", "2000-01-01", "--to", "2000-01-02"}, exitNothing, "NOTHING COMPARED"},
		{"whole journal", nil, exitOK, "OK: the journal and WeChat Pay agree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"reconcile", "--server", srv.URL, "--query", "--sandbox-keys", keyDir}, tt.args...)
			if r := ctl(t, args...); r.code != tt.code || !strings.Contains(r.stdout, tt.text) {
				t.Errorf("refundctl %v: want exit %d and %q; got %s", args, tt.code, tt.text, r)
			}
		})
	}
}

func TestFixtures_AllFormats(t *testing.T) {
	for _, f := range []string{"format1", "format2"} {
		src := filepath.Join("..", "..", "internal", "audit", "testdata", f+".db")
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(t.TempDir(), f+".db")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		r := ctl(t, "journal", "verify", "--file", p, "--json")
		v := decode[struct {
			OK     bool `json:"ok"`
			Report struct {
				Journal struct {
					Formats map[string]uint64 `json:"formats"`
					Records uint64            `json:"records"`
				} `json:"journal"`
				Reservations int `json:"reservations"`
			} `json:"report"`
		}](t, r)
		format := strings.TrimPrefix(f, "format")
		if r.code != exitOK || !v.OK || v.Report.Reservations != 5 || v.Report.Journal.Formats[format] != v.Report.Journal.Records {
			t.Fatalf("%s: %s", f, r)
		}
		if r := ctl(t, "journal", "state", "r5", "--file", p, "--at", "2026-03-01T02:08:30Z"); r.code != exitOK || !strings.Contains(r.stdout, "T-r5-2") || !strings.Contains(r.stdout, "ABNORMAL") {
			t.Fatalf("%s state: %s", f, r)
		}
	}
}
