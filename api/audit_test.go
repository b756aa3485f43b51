package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/auth"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/journal"
	"github.com/refundd/refundd/journal/journaltest"
)

// auditEnv is the real engine on a journal, behind a handler with the
// audit routes.
type auditEnv struct {
	db     *journal.DB
	engine *actors.Engine
	srv    *httptest.Server
}

func newAuditEnv(t *testing.T, jopts *journal.Options, cfg func(*api.AuditConfig), opts api.Options) *auditEnv {
	t.Helper()
	db := journaltest.OpenWith(t, jopts)
	engine, err := actors.New(actors.Config{Store: eventstore.New(db), Provider: simprovider.New(simprovider.Options{}), Encode: simprovider.Encode,
		Logger: quietLogger(), Policy: reservation.Policy{RefundNoPrefix: "T"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	ac := &api.AuditConfig{Journal: db}
	if cfg != nil {
		cfg(ac)
	}
	opts.Audit, opts.Logger = ac, quietLogger()
	srv := httptest.NewServer(api.New(engine, opts))
	t.Cleanup(srv.Close)
	return &auditEnv{db: db, engine: engine, srv: srv}
}

func (e *auditEnv) get(t *testing.T, path, token string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func (e *auditEnv) register(t *testing.T, id string) {
	t.Helper()
	_, _, err := e.engine.Execute(context.Background(), id, "test", reservation.Register{ReservationID: id, UserID: "u",
		OutTradeNo: "ORD-" + id, Amount: 10000, Currency: "CNY"})
	if err != nil {
		t.Fatal(err)
	}
}

// headBody is GET /v1/audit/head as the spec describes it, decoded
// independently of the api types.
type headBody struct {
	Head struct {
		Global    uint64 `json:"global"`
		Hash      string `json:"hash"`
		Time      string `json:"time"`
		KeyID     string `json:"key_id"`
		Signature []byte `json:"signature"`
	} `json:"head"`
	Checkpoint *struct {
		Global uint64 `json:"global"`
		Hash   string `json:"hash"`
	} `json:"checkpoint"`
	Epoch             uint64 `json:"epoch"`
	ReconcileRequired bool   `json:"reconcile_required"`
}

func TestAuditHead(t *testing.T) {
	key := ed25519.NewKeyFromSeed([]byte("0123456789abcdef0123456789abcdef"))
	e := newAuditEnv(t, &journal.Options{NoSync: true, SigningKey: key, CheckpointEvery: 2, CheckpointInterval: -1}, nil, api.Options{})
	for i := range 3 {
		e.register(t, fmt.Sprintf("r%d", i))
	}
	resp, b := e.get(t, "/v1/audit/head", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var h headBody
	if err := json.Unmarshal(b, &h); err != nil {
		t.Fatal(err)
	}
	head, err := e.db.ChainHead(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Head.Global != 3 || h.Head.Hash != head.Hash.String() || len(h.Head.Hash) != 64 || h.Epoch != 0 || h.ReconcileRequired {
		t.Fatalf("head %s", b)
	}
	if h.Checkpoint == nil || h.Checkpoint.Global != 2 {
		t.Fatalf("checkpoint %s, want the one stored at global 2", b)
	}
	// The signature is over the documented message and verifies.
	var cp journal.Checkpoint
	if err := json.Unmarshal(b, &struct {
		Head *journal.Checkpoint `json:"head"`
	}{&cp}); err != nil {
		t.Fatal(err)
	}
	if err := cp.VerifySignature(key.Public().(ed25519.PublicKey)); err != nil || h.Head.KeyID != journal.KeyID(key.Public().(ed25519.PublicKey)) {
		t.Fatalf("signature: %v (key id %s)", err, h.Head.KeyID)
	}
	if !strings.Contains(string(cp.Message()), "hash: "+h.Head.Hash) {
		t.Fatalf("message %q", cp.Message())
	}
}

func TestAdminBackup(t *testing.T) {
	for _, spool := range []bool{false, true} {
		t.Run(fmt.Sprintf("spool=%v", spool), func(t *testing.T) {
			dir := t.TempDir()
			e := newAuditEnv(t, &journal.Options{NoSync: true}, func(c *api.AuditConfig) {
				if spool {
					c.SpoolDir = dir
				}
			}, api.Options{})
			e.register(t, "r0")
			// Appends keep coming while backups are taken.
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			var n atomic.Int64
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 1; ctx.Err() == nil; i++ {
					_, _, err := e.engine.Execute(context.Background(), fmt.Sprintf("r%d", i), "test", reservation.Register{
						ReservationID: fmt.Sprintf("r%d", i), UserID: "u", OutTradeNo: fmt.Sprintf("ORD-%d", i), Amount: 100, Currency: "CNY"})
					if err != nil {
						t.Error(err)
						return
					}
					n.Add(1)
				}
			}()
			for i := range 3 {
				for n.Load() < int64(10*(i+1)) && ctx.Err() == nil {
					if err := e.db.WaitGlobal(context.Background(), uint64(n.Load())); err != nil {
						t.Fatal(err)
					}
				}
				resp, body := e.get(t, "/v1/admin/backup", "")
				if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
				if cl, _ := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64); cl != int64(len(body)) || cl == 0 {
					t.Fatalf("Content-Length %s, body %d bytes", resp.Header.Get("Content-Length"), len(body))
				}
				global, _ := strconv.ParseUint(resp.Header.Get(api.HeaderHeadGlobal), 10, 64)
				if !strings.Contains(resp.Header.Get("Content-Disposition"), fmt.Sprintf("refundd-%d.db", global)) {
					t.Fatalf("Content-Disposition %q", resp.Header.Get("Content-Disposition"))
				}
				p := filepath.Join(t.TempDir(), "b.db")
				if err := os.WriteFile(p, body, 0o600); err != nil {
					t.Fatal(err)
				}
				b, err := journal.Open(p, &journal.Options{ReadOnly: true})
				if err != nil {
					t.Fatal(err)
				}
				res, err := b.Check(context.Background(), nil)
				b.Close()
				if err != nil || !res.OK() {
					t.Fatalf("backup %d: %v %v", i, err, res.Problems)
				}
				if res.Head.Global != global || res.Head.Hash.String() != resp.Header.Get(api.HeaderHeadHash) {
					t.Fatalf("backup holds %d %s, headers say %s %s", res.Head.Global, res.Head.Hash,
						resp.Header.Get(api.HeaderHeadGlobal), resp.Header.Get(api.HeaderHeadHash))
				}
				// The copy is a prefix of the live chain.
				h, _ := hex.DecodeString(resp.Header.Get(api.HeaderHeadHash))
				var hash journal.Hash
				copy(hash[:], h)
				live, err := e.db.Check(context.Background(), &journal.CheckOptions{Heads: []journal.Checkpoint{{Global: global, Hash: hash}}})
				if err != nil || live.HeadsMatched != 1 {
					t.Fatalf("backup head not on the live chain: %v %+v", err, live.Problems)
				}
			}
			cancel()
			wg.Wait()
			if spool {
				left, _ := os.ReadDir(dir)
				if len(left) != 0 {
					t.Fatalf("spool files left behind: %v", left)
				}
			}
		})
	}
}

func TestAuditRoutes_Permissions(t *testing.T) {
	var ts auth.Tokens
	tokens := map[auth.Role]string{}
	for _, r := range auth.Roles() {
		tok := "token-for-" + string(r) + "-0123456789"
		if err := ts.Add(r, "t", tok); err != nil {
			t.Fatal(err)
		}
		tokens[r] = tok
	}
	e := newAuditEnv(t, &journal.Options{NoSync: true}, nil, api.Options{Auth: &ts})
	tests := []struct {
		role       auth.Role
		head, back int
	}{
		{auth.RoleService, http.StatusForbidden, http.StatusForbidden},
		{auth.RoleReader, http.StatusForbidden, http.StatusForbidden},
		{auth.RoleAuditor, http.StatusOK, http.StatusForbidden},
		{auth.RoleOperator, http.StatusOK, http.StatusOK},
		{"", http.StatusUnauthorized, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		if resp, b := e.get(t, "/v1/audit/head", tokens[tt.role]); resp.StatusCode != tt.head {
			t.Errorf("%q head: %d %s, want %d", tt.role, resp.StatusCode, b, tt.head)
		}
		if resp, b := e.get(t, "/v1/admin/backup", tokens[tt.role]); resp.StatusCode != tt.back {
			t.Errorf("%q backup: %d %.100s, want %d", tt.role, resp.StatusCode, b, tt.back)
		}
	}
}

func TestRefundGate(t *testing.T) {
	var paused atomic.Value
	paused.Store("refunds are paused: the journal was restored and is being reconciled")
	e := newAuditEnv(t, &journal.Options{NoSync: true}, func(c *api.AuditConfig) {
		c.RefundsPaused = func() string { return paused.Load().(string) }
	}, api.Options{})
	post := func(path, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, e.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "k1")
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := post("/v1/reservations", `{"id":"r1","user_id":"u1","out_trade_no":"O1","amount":1000,"currency":"CNY"}`); code != http.StatusCreated {
		t.Fatalf("registration while paused: %d %s", code, b)
	}
	code, b := post("/v1/reservations/r1/refunds", `{"user_id":"u1","amount":100}`)
	var eb struct {
		Error struct{ Code, Message string } `json:"error"`
	}
	_ = json.Unmarshal([]byte(b), &eb)
	if code != http.StatusServiceUnavailable || eb.Error.Code != "unavailable" || !strings.Contains(eb.Error.Message, "reconciled") {
		t.Fatalf("refund while paused: %d %s", code, b)
	}
	if resp, _ := e.get(t, "/v1/reservations/r1", ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("read while paused: %d", resp.StatusCode)
	}
	paused.Store("")
	if code, b := post("/v1/reservations/r1/refunds", `{"user_id":"u1","amount":100}`); code != http.StatusCreated && code != http.StatusAccepted && code != http.StatusOK {
		t.Fatalf("refund after the pause: %d %s", code, b)
	}
}

func TestAuditRoutes_Off(t *testing.T) {
	env := newEnv(t, envOptions{})
	for _, p := range []string{"/v1/audit/head", "/v1/admin/backup"} {
		if r := env.do(t, http.MethodGet, p, ""); r.status != http.StatusNotFound {
			t.Fatalf("%s without AuditConfig: %v", p, r)
		}
	}
}
