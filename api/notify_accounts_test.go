package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/refundd/refundd/actors"
	"github.com/refundd/refundd/api"
	"github.com/refundd/refundd/internal/eventstore"
	"github.com/refundd/refundd/internal/quarantine"
	"github.com/refundd/refundd/internal/reservation"
	"github.com/refundd/refundd/internal/simprovider"
	"github.com/refundd/refundd/internal/wechatpay"
	"github.com/refundd/refundd/internal/wechatpay/sandbox"
	"github.com/refundd/refundd/journal/journaltest"
)

// The WeChat Pay accounts of the isolation tests: a direct merchant
// (hotel-a), a service provider with two sub-merchants (sub-1, sub-2), and a
// direct account without a Merchant function (its merchant is the default)
// and without an APIv2 key.
const (
	acMchA   = "1900000001"
	acSpMch  = "1900000900"
	acSub1   = "1900000901"
	acSub2   = "1900000902"
	acMchC   = "1900000003"
	acRoute  = "/v1/notify/wechatpay/accounts/"
	acLegacy = "/v1/notify/wechatpay/refund"
)

// acKeys are generated once: RSA keys are slow to make.
var acKeys struct{ a, b, c sandbox.Keys }

type acEnv struct {
	t      *testing.T
	srv    *httptest.Server
	api    *api.Server
	engine *actors.Engine
	store  *eventstore.Store
	q      *quarantine.Store
	now    atomic.Int64
}

func newAcEnv(t *testing.T) *acEnv {
	t.Helper()
	if acKeys.a.MchID == "" {
		for _, k := range []struct {
			to  *sandbox.Keys
			mch string
		}{{&acKeys.a, acMchA}, {&acKeys.b, acSpMch}, {&acKeys.c, acMchC}} {
			keys, err := sandbox.GenerateKeys(k.mch)
			if err != nil {
				t.Fatal(err)
			}
			*k.to = keys
		}
	}
	e := &acEnv{t: t}
	e.now.Store(time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC).UnixNano())
	clock := func() time.Time { return time.Unix(0, e.now.Load()).UTC() }
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.store = eventstore.New(journaltest.Open(t))
	engine, err := actors.New(actors.Config{Store: e.store, Provider: simprovider.New(simprovider.Options{Delay: time.Hour, Now: clock}),
		Encode: simprovider.Encode, Logger: log, Policy: reservation.Policy{RefundNoPrefix: "N"}, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = engine.Close(context.Background()) })
	e.engine = engine
	if e.q, err = quarantine.Open(t.TempDir(), quarantine.Options{}); err != nil {
		t.Fatal(err)
	}
	verifier := func(k sandbox.Keys) *wechatpay.Verifier {
		v, err := k.Verifier()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	e.api = api.New(engine, api.Options{Logger: log, Merchants: []string{"hotel-a", "sub-1", "sub-2", reservation.DefaultMerchant},
		Notify: &api.NotifyConfig{Quarantine: e.q, Accounts: []api.NotifyAccount{
			{Name: "direct-a", MchID: acMchA, Verifier: verifier(acKeys.a), APIv3Key: acKeys.a.APIv3Key, APIv2Key: acKeys.a.APIv2Key,
				Merchant: func(mch, sub string) (string, bool) { return "hotel-a", mch == acMchA && sub == "" }},
			{Name: "sp-b", MchID: acSpMch, Verifier: verifier(acKeys.b), APIv3Key: acKeys.b.APIv3Key, APIv2Key: acKeys.b.APIv2Key,
				Merchant: func(mch, sub string) (string, bool) {
					switch {
					case mch != acSpMch:
						return "", false
					case sub == acSub1:
						return "sub-1", true
					case sub == acSub2:
						return "sub-2", true
					}
					return "", false
				}},
			{Name: "direct-c", MchID: acMchC, Verifier: verifier(acKeys.c), APIv3Key: acKeys.c.APIv3Key},
		}}})
	e.srv = httptest.NewServer(e.api)
	t.Cleanup(e.srv.Close)
	return e
}

// refund registers reservation id for merchant (10000 fen) and requests a
// refund of 4000 that stays PROCESSING.
func (e *acEnv) refund(id, merchant string) string {
	e.t.Helper()
	ctx := context.Background()
	if _, _, err := e.engine.Execute(ctx, id, "test", reservation.Register{ReservationID: id, UserID: "u",
		OutTradeNo: "ORD-" + id, Amount: 10000, Currency: "CNY", Merchant: merchant}); err != nil {
		e.t.Fatal(err)
	}
	amount := int64(4000)
	st, _, err := e.engine.Execute(ctx, id, "test", reservation.RequestRefund{UserID: "u", IdempotencyKey: "k", Amount: &amount})
	if err != nil {
		e.t.Fatal(err)
	}
	no := st.RefundByKey("k").No
	waitFor(e.t, "provider accepted", func() bool {
		st, _ := e.engine.Get(ctx, id)
		return st.Refund(no).ProviderID != ""
	})
	return no
}

func (e *acEnv) version(id string) uint64 {
	e.t.Helper()
	v, err := e.store.Version(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return v
}

func (e *acEnv) refundState(id, no string) reservation.RefundState {
	e.t.Helper()
	st, err := e.engine.Get(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return st.Refund(no).State
}

// kept counts the quarantined entries for endpoint with reason.
func (e *acEnv) kept(endpoint, reason string) int {
	e.t.Helper()
	list, err := e.q.List(1000)
	if err != nil {
		e.t.Fatal(err)
	}
	n := 0
	for _, m := range list {
		if m.Endpoint == endpoint && m.Reason == reason {
			n++
		}
	}
	return n
}

// acV3 is a v3 notification: signed and encrypted with keys, naming the
// merchant (mchid, or sp_mchid and sub_mchid) and refund no of reservation
// id.
type acV3 struct {
	keys           sandbox.Keys
	mchID          string // direct: mchid
	spMch, subMch  string // partner
	id, no, status string
}

func (e *acEnv) postV3(path string, n acV3) (int, string) {
	e.t.Helper()
	body, err := wechatpay.BuildRefundNotification(n.keys.APIv3Key,
		wechatpay.Notification{ID: "EV-" + n.no, CreateTime: "2026-11-30T16:00:00+08:00"},
		wechatpay.RefundResource{MchID: n.mchID, SpMchID: n.spMch, SubMchID: n.subMch, OutTradeNo: "ORD-" + n.id, OutRefundNo: n.no,
			RefundID: simprovider.RefundID(n.no), RefundStatus: n.status, SuccessTime: "2026-11-30T16:00:00+08:00",
			Amount: wechatpay.RefundAmount{Total: 10000, Refund: 4000, PayerTotal: 10000, PayerRefund: 4000}})
	if err != nil {
		e.t.Fatal(err)
	}
	h, err := wechatpay.SignHeaders(n.keys.PlatformKey, n.keys.PublicKeyID, time.Now().Unix(), wechatpay.NewNonce(), body)
	if err != nil {
		e.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.Set(req.Header)
	return e.do(req)
}

// acV2 is an APIv2 notification encrypted with v2Key, naming mch_id (and
// sub_mch_id) and refund no of reservation id.
type acV2 struct {
	v2Key         []byte
	mchID, subMch string
	id, no        string
}

func (e *acEnv) postV2(path string, n acV2) (int, string) {
	e.t.Helper()
	body, err := wechatpay.BuildRefundNotificationV2(n.v2Key,
		wechatpay.V2Envelope{ReturnCode: "SUCCESS", AppID: "wx0", MchID: n.mchID, SubMchID: n.subMch, NonceStr: wechatpay.NewNonce()},
		wechatpay.V2RefundInfo{OutRefundNo: n.no, OutTradeNo: "ORD-" + n.id, RefundID: simprovider.RefundID(n.no), TotalFee: 10000, RefundFee: 4000,
			RefundStatus: "SUCCESS", SuccessTime: "2026-11-30 16:00:00"})
	if err != nil {
		e.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "text/xml")
	return e.do(req)
}

func (e *acEnv) do(req *http.Request) (int, string) {
	e.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A notification verified with one account's keys changes only the refunds
// of that account's merchants, and only of the merchant it names: anything
// else is refused (WeChat retries), changes nothing in the journal, is kept
// raw in the quarantine and is counted under the merchant it was for (or
// under (unattributed) when its account has no such merchant).
func TestNotify_AccountsChangeOnlyTheirOwnMerchantsRefunds(t *testing.T) {
	e := newAcEnv(t)
	refunds := map[string]string{} // reservation id -> refund number
	for id, merchant := range map[string]string{
		"a1": "hotel-a", "a2": "hotel-a", "a3": "hotel-a", // A's: refused against, applied by its route, by the legacy route
		"s1": "sub-1", "s1ok": "sub-1", "s1v2": "sub-1", // sub-1's: refused against, applied (v3), hinted (v2)
		"c1": reservation.DefaultMerchant, "c2": reservation.DefaultMerchant,
	} {
		refunds[id] = e.refund(id, merchant)
	}
	a, b, c := acKeys.a, acKeys.b, acKeys.c
	v3 := func(keys sandbox.Keys, mch, sp, sub, id string) acV3 {
		return acV3{keys: keys, mchID: mch, spMch: sp, subMch: sub, id: id, no: refunds[id], status: "SUCCESS"}
	}
	v2 := func(key []byte, mch, sub, id string) acV2 {
		return acV2{v2Key: key, mchID: mch, subMch: sub, id: id, no: refunds[id]}
	}
	const (
		applied      = "applied"
		hint         = "hint"
		mismatch     = "mismatch"
		rejected     = "rejected"
		unattributed = api.Unattributed
	)
	tests := []struct {
		name     string
		path     string
		v3       *acV3
		v2       *acV2
		id       string // the reservation whose refund it names
		status   int
		outcome  string
		merchant string // counted under
		endpoint string // quarantined under, when refused
	}{
		// Account A's keys naming B's refund.
		{name: "A's keys and mchid, sub-1's refund", path: acRoute + "direct-a/refund", v3: ptrTo(v3(a, acMchA, "", "", "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: "hotel-a", endpoint: "account direct-a v3"},
		{name: "A's keys naming B's sp_mchid and sub_mchid", path: acRoute + "direct-a/refund", v3: ptrTo(v3(a, "", acSpMch, acSub1, "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: unattributed, endpoint: "account direct-a v3"},
		{name: "A's keys posted to B's route", path: acRoute + "sp-b/refund", v3: ptrTo(v3(a, "", acSpMch, acSub1, "s1")), id: "s1",
			status: 401, outcome: rejected, merchant: unattributed, endpoint: "account sp-b v3"},
		{name: "legacy route (A's) naming sub-1's refund", path: acLegacy, v3: ptrTo(v3(a, acMchA, "", "", "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: "hotel-a", endpoint: "v3"},
		{name: "C's keys (default merchant) naming A's refund", path: acRoute + "direct-c/refund", v3: ptrTo(v3(c, acMchC, "", "", "a1")), id: "a1",
			status: 400, outcome: mismatch, merchant: reservation.DefaultMerchant, endpoint: "account direct-c v3"},
		{name: "C's keys naming a sub_mchid", path: acRoute + "direct-c/refund", v3: ptrTo(v3(c, "", acMchC, acSub1, "c1")), id: "c1",
			status: 400, outcome: mismatch, merchant: unattributed, endpoint: "account direct-c v3"},
		// Partner notifications: the sub-merchant decides.
		{name: "B's keys, sub-2, sub-1's refund", path: acRoute + "sp-b/refund", v3: ptrTo(v3(b, "", acSpMch, acSub2, "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: "sub-2", endpoint: "account sp-b v3"},
		{name: "B's keys, no sub_mchid, sub-1's refund", path: acRoute + "sp-b/refund", v3: ptrTo(v3(b, "", acSpMch, "", "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: unattributed, endpoint: "account sp-b v3"},
		{name: "B's keys naming A's mchid, A's refund", path: acRoute + "sp-b/refund", v3: ptrTo(v3(b, acMchA, "", "", "a1")), id: "a1",
			status: 400, outcome: mismatch, merchant: unattributed, endpoint: "account sp-b v3"},
		{name: "no such account", path: acRoute + "nobody/refund", v3: ptrTo(v3(a, acMchA, "", "", "a1")), id: "a1",
			status: 404, outcome: rejected, merchant: unattributed, endpoint: "account ? v3"},
		// APIv2, where sub_mch_id is in the envelope.
		{name: "v2: B's key, sub-2, sub-1's refund", path: acRoute + "sp-b/v2/refund", v2: ptrTo(v2(b.APIv2Key, acSpMch, acSub2, "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: "sub-2", endpoint: "account sp-b v2"},
		{name: "v2: B's key, no sub_mch_id, sub-1's refund", path: acRoute + "sp-b/v2/refund", v2: ptrTo(v2(b.APIv2Key, acSpMch, "", "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: unattributed, endpoint: "account sp-b v2"},
		{name: "v2: A's key posted to B's route", path: acRoute + "sp-b/v2/refund", v2: ptrTo(v2(a.APIv2Key, acSpMch, acSub1, "s1")), id: "s1",
			status: 400, outcome: rejected, merchant: unattributed, endpoint: "account sp-b v2"},
		{name: "v2: legacy route (A's) naming sub-1's refund", path: "/v1/notify/wechatpay/v2/refund", v2: ptrTo(v2(a.APIv2Key, acMchA, "", "s1")), id: "s1",
			status: 400, outcome: mismatch, merchant: "hotel-a", endpoint: "v2"},
		{name: "v2: an account without an APIv2 key", path: acRoute + "direct-c/v2/refund", v2: ptrTo(v2(c.APIv2Key, acMchC, "", "c1")), id: "c1",
			status: 404, outcome: rejected, merchant: unattributed, endpoint: "account ? v2"},
		// What each account may do.
		{name: "B's keys, sub-1, sub-1's refund", path: acRoute + "sp-b/refund", v3: ptrTo(v3(b, "", acSpMch, acSub1, "s1ok")), id: "s1ok",
			status: 204, outcome: applied, merchant: "sub-1"},
		{name: "v2: B's key, sub-1, sub-1's refund", path: acRoute + "sp-b/v2/refund", v2: ptrTo(v2(b.APIv2Key, acSpMch, acSub1, "s1v2")), id: "s1v2",
			status: 200, outcome: hint, merchant: "sub-1"},
		{name: "A's keys, A's refund, A's route", path: acRoute + "direct-a/refund", v3: ptrTo(v3(a, acMchA, "", "", "a2")), id: "a2",
			status: 204, outcome: applied, merchant: "hotel-a"},
		{name: "A's keys, A's refund, legacy route", path: acLegacy, v3: ptrTo(v3(a, acMchA, "", "", "a3")), id: "a3",
			status: 204, outcome: applied, merchant: "hotel-a"},
		{name: "C's keys, the default merchant's refund", path: acRoute + "direct-c/refund", v3: ptrTo(v3(c, acMchC, "", "", "c2")), id: "c2",
			status: 204, outcome: applied, merchant: reservation.DefaultMerchant},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			no := refunds[tc.id]
			version := e.version(tc.id)
			counted := e.api.NotifyStats().ByMerchant()[tc.merchant][tc.outcome]
			total := e.api.NotifyStats().Snapshot()[tc.outcome]
			kept := e.kept(tc.endpoint, tc.outcome)
			var (
				code int
				body string
			)
			if tc.v3 != nil {
				code, body = e.postV3(tc.path, *tc.v3)
			} else {
				code, body = e.postV2(tc.path, *tc.v2)
			}
			if code != tc.status {
				t.Fatalf("answer %d %s, want %d", code, body, tc.status)
			}
			if got := e.api.NotifyStats().ByMerchant()[tc.merchant][tc.outcome]; got != counted+1 {
				t.Fatalf("%s counted under %s %d times, want %d (by merchant: %v)", tc.outcome, tc.merchant, got, counted+1, e.api.NotifyStats().ByMerchant())
			}
			if got := e.api.NotifyStats().Snapshot()[tc.outcome]; got != total+1 {
				t.Fatalf("%s total %d, want %d", tc.outcome, got, total+1)
			}
			switch tc.outcome {
			case applied:
				if s := e.refundState(tc.id, no); s != reservation.Succeeded {
					t.Fatalf("refund is %s, want SUCCEEDED", s)
				}
			case hint:
				if e.version(tc.id) == version {
					t.Fatal("the hint journaled no query")
				}
			default:
				if v := e.version(tc.id); v != version {
					t.Fatalf("a refused notification changed the journal: version %d, was %d", v, version)
				}
				if s := e.refundState(tc.id, no); s != reservation.Processing {
					t.Fatalf("a refused notification changed the refund to %s", s)
				}
				if got := e.kept(tc.endpoint, tc.outcome); got != kept+1 {
					t.Fatalf("quarantined under %q as %s: %d, want %d", tc.endpoint, tc.outcome, got, kept+1)
				}
			}
		})
	}
	// The counters are the configured merchants' and (unattributed) only,
	// and GET /v1/notify/stats shows them beside the totals.
	if got := len(e.api.NotifyStats().ByMerchant()); got != 5 {
		t.Fatalf("%d by-merchant counters, want 5: %v", got, e.api.NotifyStats().ByMerchant())
	}
	resp, err := http.Get(e.srv.URL + "/v1/notify/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats struct {
		Notifications map[string]int64            `json:"notifications"`
		ByMerchant    map[string]map[string]int64 `json:"by_merchant"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil {
		t.Fatal(err)
	}
	if stats.Notifications[applied] != 4 || stats.ByMerchant["sub-1"][applied] != 1 || stats.ByMerchant["sub-2"][mismatch] != 2 ||
		stats.ByMerchant[unattributed][rejected] != 4 {
		t.Fatalf("GET /v1/notify/stats: %+v", stats)
	}
}

func ptrTo[V any](v V) *V { return &v }

// TestNotify_AccountAddedWhileRunning: an account added while the server
// runs (Server.AddNotifyAccounts, then AddMerchants: a reload) has its
// routes from then on, verified with its keys only: before, its route
// answers no such account; after, its own notification is applied, one
// signed by another account is refused, and an account name already
// served keeps its keys.
func TestNotify_AccountAddedWhileRunning(t *testing.T) {
	e := newAcEnv(t)
	d, err := sandbox.GenerateKeys("1900000004")
	if err != nil {
		t.Fatal(err)
	}
	v, err := d.Verifier()
	if err != nil {
		t.Fatal(err)
	}
	no := e.refund("d1", "hotel-d")
	own := acV3{keys: d, mchID: d.MchID, id: "d1", no: no, status: "SUCCESS"}
	if code, body := e.postV3(acRoute+"direct-d/refund", own); code != http.StatusNotFound {
		t.Fatalf("route of an account not added yet: %d %s", code, body)
	}
	e.api.AddNotifyAccounts(api.NotifyAccount{Name: "direct-d", MchID: d.MchID, Verifier: v, Keys: api.NewNotifyKeys(d.APIv3Key, d.APIv2Key),
		Merchant: func(mch, sub string) (string, bool) { return "hotel-d", mch == d.MchID && sub == "" }},
		// Already served: keeps direct-a's keys.
		api.NotifyAccount{Name: "direct-a", MchID: d.MchID, Verifier: v, APIv3Key: d.APIv3Key})
	e.api.AddMerchants("hotel-d")

	foreign := own
	foreign.keys = acKeys.a
	if code, body := e.postV3(acRoute+"direct-d/refund", foreign); code != http.StatusUnauthorized {
		t.Fatalf("D's refund signed by A at D's route: %d %s", code, body)
	}
	if code, body := e.postV3(acRoute+"direct-a/refund", own); code != http.StatusUnauthorized {
		t.Fatalf("D's keys at A's route after A was added again: %d %s", code, body)
	}
	if s := e.refundState("d1", no); s != reservation.Processing {
		t.Fatalf("refused notifications changed the refund to %s", s)
	}
	if code, body := e.postV3(acRoute+"direct-d/refund", own); code != http.StatusNoContent {
		t.Fatalf("D's refund signed by D at D's route: %d %s", code, body)
	}
	if s := e.refundState("d1", no); s != reservation.Succeeded {
		t.Fatalf("refund is %s after its account's notification, want SUCCEEDED", s)
	}
	if got := e.api.NotifyStats().ByMerchant()["hotel-d"]["applied"]; got != 1 {
		t.Fatalf("applied under hotel-d: %d", got)
	}
}
