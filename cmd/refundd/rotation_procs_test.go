package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/refundd/refundd/internal/wechatpay/sandbox"
)

// TestRotation_RealProcessesUnderLoad: refundd and wxpaysim as real
// processes, refunds flowing from several clients, while WeChat Pay (the
// sandbox, in platform certificate mode) first starts signing with a new
// platform certificate refundd has never seen, then switches to its
// WeChat Pay public key (which refundd was given beside the certificates,
// as during a real switchover), then changes the APIv3 key, which the
// operator has given refundd first (a new key file and SIGHUP: the previous
// key keeps opening notifications for the grace period). Some
// notifications are sent with a forged signature throughout.
//
// At the end every refund is SUCCEEDED in refundd and SUCCESS at WeChat,
// every genuine notification was acknowledged, none was refused more than
// once (the one download the new serial triggers brings the certificate
// between two retries), none was refused after the switch to the public
// key nor across the APIv3 key change, no forged one was ever
// acknowledged, and refundd downloaded on demand at most once. With
// --wechatpay-apiv3-key-grace 0 the notifications WeChat built before its
// change stay refused: the grace is what this checks.
func TestRotation_RealProcessesUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs refundd and wxpaysim")
	}
	refunddBin, simBin := buildCrashBinaries(t)
	addr := freeAddr(t)
	base := "http://" + addr
	// WeChat's notification retries 15 s apart, scaled to 0.3 s.
	sim := startSim(t, simBin, t.TempDir(), simOptions{processingDelay: "5s", timeFactor: "0.02",
		notifyURL: base + "/v1/notify/wechatpay/refund", extra: []string{"--certificate-mode"}})
	rd := newRefundd(refunddBin, t.TempDir(), addr, sim, false, "--wechatpay-download-certificates", "--log-level", "info")
	d := rd.start(t)
	c := client{t: t, base: base}
	op := client{t: t, base: base, token: testOperatorToken}

	const workers, perPhase = 4, 12
	phases := []struct {
		name string
		flip func() error
	}{
		{"first certificate", nil},
		{"new certificate", func() error {
			_, err := sim.admin("POST", "/sandbox/credentials/certificates", map[string]any{"sign": true}, nil)
			return err
		}},
		{"public key", func() error {
			_, err := sim.admin("POST", "/sandbox/credentials/signing", map[string]any{"id": sim.man.PublicKeyID}, nil)
			return err
		}},
		{"new APIv3 key", func() error {
			// refundd first: the new key in the file it reads, SIGHUP, and
			// the reload logged; then WeChat Pay changes it.
			newKey := "n3wAPIv3k3yOfTheRotationTest0001"
			if err := os.WriteFile(filepath.Join(sim.keys, sim.man.Files.APIv3Key), []byte(newKey), 0o600); err != nil {
				return err
			}
			if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
				return err
			}
			waitFor(t, 10*time.Second, "the reload of the new APIv3 key", func() (bool, string) {
				return grepLines(rd.logs.String(), "credentials reloaded", 1) != "", tail(rd.logs.String(), 5)
			})
			_, err := sim.admin("POST", "/sandbox/credentials/apiv3-key", map[string]any{"key": newKey}, nil)
			return err
		}},
	}
	type sent struct {
		id, no string
		phase  int
		forged bool // its first notification attempt carries a bad signature
	}
	var (
		mu    sync.Mutex
		all   []sent
		count atomic.Int64
	)
	refund := func(phase, i int) {
		id, order := fmt.Sprintf("rot-%d-%d", phase, i), fmt.Sprintf("ROT-%d-%d", phase, i)
		forged := i%4 == 3
		if _, err := sim.admin("POST", "/sandbox/orders", map[string]any{"out_trade_no": order, "total": 10000}, nil); err != nil {
			t.Error(err)
			return
		}
		if forged {
			if _, err := sim.admin("POST", "/sandbox/faults", map[string]any{"kind": sandbox.FaultNotifyBadSignature, "out_trade_no": order, "count": 1}, nil); err != nil {
				t.Error(err)
				return
			}
		}
		if code, body := c.do("POST", "/v1/reservations", "", map[string]any{
			"id": id, "user_id": "u", "out_trade_no": order, "amount": 10000, "currency": "CNY"}); code != http.StatusCreated {
			t.Errorf("register %s: %d %v", id, code, body)
			return
		}
		code, body := c.do("POST", "/v1/reservations/"+id+"/refunds", "k", map[string]any{"user_id": "u", "amount": 6000})
		if code != http.StatusAccepted && code != http.StatusOK {
			t.Errorf("refund %s (%s): %d %v", id, phases[phase].name, code, body)
			return
		}
		mu.Lock()
		all = append(all, sent{id: id, no: body["refund_no"].(string), phase: phase, forged: forged})
		mu.Unlock()
		count.Add(1)
	}
	// Each switch happens while the clients are sending: after half of a
	// phase's refunds, the rest go on concurrently with it.
	for p, ph := range phases {
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Go(func() {
				for i := range next {
					refund(p, i)
				}
			})
		}
		for i := range perPhase {
			if i == perPhase/2 && ph.flip != nil {
				if err := ph.flip(); err != nil {
					t.Fatalf("switch to %s: %v", ph.name, err)
				}
				t.Logf("WeChat Pay signs with the %s now (%d refunds requested so far)", ph.name, count.Load())
			}
			next <- i
		}
		close(next)
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}

	mu.Lock()
	refunds := append([]sent(nil), all...)
	mu.Unlock()
	waitFor(t, 60*time.Second, "every refund SUCCEEDED on both sides and its notification acknowledged", func() (bool, string) {
		for _, r := range refunds {
			code, body := c.do("GET", "/v1/reservations/"+r.id+"/refunds/"+r.no, "", nil)
			if code != http.StatusOK || body["state"] != "SUCCEEDED" {
				return false, fmt.Sprintf("%s in refundd: %d %v", r.no, code, body["state"])
			}
			rec, found, err := sim.refund(r.no)
			if err != nil || !found || rec.Refund.Status != "SUCCESS" {
				return false, fmt.Sprintf("%s at WeChat: %v %v %+v", r.no, found, err, rec.Refund)
			}
			acked := false
			for _, d := range rec.Deliveries {
				acked = acked || (d.Acked && d.Signature == "ok")
			}
			if !acked {
				return false, r.no + ": no genuine notification acknowledged yet"
			}
		}
		return true, ""
	})

	refusedAfterPublicKey := 0
	for _, r := range refunds {
		rec, _, err := sim.refund(r.no)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Refund.BodyHashes) != 1 {
			t.Errorf("%s submitted with %d bodies", r.no, len(rec.Refund.BodyHashes))
		}
		refused, forgedSeen := 0, 0
		for _, d := range rec.Deliveries {
			switch {
			case d.Signature == "bad":
				forgedSeen++
				if d.Acked || d.HTTPStatus/100 == 2 {
					t.Errorf("%s: a notification with a forged signature was acknowledged (%+v)", r.no, d)
				}
			case !d.Acked:
				refused++
			}
		}
		if r.forged && forgedSeen == 0 {
			t.Errorf("%s: the forged notification was never sent; the test checks nothing for it", r.no)
		}
		if refused > 1 {
			t.Errorf("%s (%s): genuine notification refused %d times; want at most one refusal before the certificate arrives", r.no, phases[r.phase].name, refused)
		}
		if r.phase >= 2 {
			refusedAfterPublicKey += refused
		}
	}
	if refusedAfterPublicKey > 0 {
		t.Errorf("%d genuine notifications refused after the switch to the public key refundd already had, or across the APIv3 key change it was given first", refusedAfterPublicKey)
	}

	var creds struct {
		Accounts []struct {
			Keys []struct {
				Serial, Kind, Source string
			} `json:"keys"`
			Download *struct {
				Downloads       int64 `json:"downloads"`
				OnDemand        int64 `json:"on_demand"`
				OnDemandDropped int64 `json:"on_demand_dropped"`
			} `json:"download"`
		} `json:"accounts"`
	}
	code, body := op.do("GET", "/v1/admin/credentials", "", nil)
	if code != http.StatusOK {
		t.Fatalf("GET /v1/admin/credentials: %d %v", code, body)
	}
	if err := remarshal(body, &creds); err != nil || len(creds.Accounts) != 1 || creds.Accounts[0].Download == nil {
		t.Fatalf("credentials %v: %v", body, err)
	}
	dl := creds.Accounts[0].Download
	if dl.OnDemand != 1 {
		t.Errorf("downloads on demand: %d, want 1 (the new certificate's serial, once)", dl.OnDemand)
	}
	certs := 0
	for _, k := range creds.Accounts[0].Keys {
		if k.Kind == "platform_certificate" {
			certs++
		}
	}
	if certs != 2 {
		t.Errorf("refundd holds %d platform certificates, want 2 (both kept until they expire): %+v", certs, creds.Accounts[0].Keys)
	}
	t.Logf("%d refunds over three signers and two APIv3 keys; downloads %d (on demand %d, dropped by the one-a-minute limit %d)",
		len(refunds), dl.Downloads, dl.OnDemand, dl.OnDemandDropped)
}
