package sandbox

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func adminDo(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var out map[string]any
	json.Unmarshal(b, &out)
	return resp.StatusCode, out
}

func TestHandleAdmin_Routes(t *testing.T) {
	f := newFixture(t, nil)
	base := f.http.URL
	steps := []struct {
		method, path, body string
		status             int
		check              func(map[string]any) bool
	}{
		{"POST", "/sandbox/orders", `{"out_trade_no":"O1","total":1000}`, 201,
			func(m map[string]any) bool {
				return m["total"] == 1000.0 && strings.HasPrefix(m["transaction_id"].(string), "4200")
			}},
		{"POST", "/sandbox/orders", `{"out_trade_no":"O1","total":1000}`, 200, nil},
		{"POST", "/sandbox/orders", `{"out_trade_no":"O1","total":999}`, 409, func(m map[string]any) bool { return m["code"] == "ORDER_CONFLICT" }},
		{"POST", "/sandbox/orders", `{"out_trade_no":"O2","total":0}`, 400, nil},
		{"POST", "/sandbox/orders", `{"out_trade_no":"O2","total":5,"extra":1}`, 400, nil},
		{"POST", "/sandbox/faults", `{"kind":"system_error","out_refund_no":"R1","op":"create","count":1}`, 201,
			func(m map[string]any) bool { return m["kind"] == "system_error" }},
		{"POST", "/sandbox/faults", `{"kind":"notify_late","out_refund_no":"R9","delay":"1.5s"}`, 201,
			func(m map[string]any) bool { return m["delay"] == "1.5s" }},
		{"POST", "/sandbox/faults", `{"kind":"delay","delay":"soon"}`, 400, nil},
		{"POST", "/sandbox/faults", `{"kind":"bogus"}`, 400, nil},
		{"PUT", "/sandbox/faults", ``, 405, nil},
		{"GET", "/sandbox/nothing", ``, 404, nil},
		{"GET", "/sandbox/refunds/R1", ``, 404, nil},
	}
	for _, s := range steps {
		status, out := adminDo(t, base, s.method, s.path, s.body)
		if status != s.status || s.check != nil && !s.check(out) {
			t.Fatalf("%s %s %s: %d %v", s.method, s.path, s.body, status, out)
		}
	}
	if fs := f.sb.Faults(); len(fs) != 2 || fs[1].Delay.String() != "1.5s" {
		t.Fatalf("faults %+v", fs)
	}
	// The fault set over HTTP applies to the signed API.
	if r := f.m.create("O1", "R1", 100, 1000, ""); r.status != 500 || r.code() != "SYSTEM_ERROR" {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if r := f.m.create("O1", "R1", 100, 1000, ""); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	status, out := adminDo(t, base, "GET", "/sandbox/refunds/R1", "")
	rec, _ := out["refund"].(map[string]any)
	if status != 200 || rec["status"] != "SUCCESS" || rec["submissions"] != 2.0 || len(rec["body_hashes"].([]any)) != 1 {
		t.Fatalf("refund record %d %v", status, out)
	}
	status, out = adminDo(t, base, "GET", "/sandbox/orders/O1", "")
	if status != 200 || out["refunded"] != 100.0 || len(out["refunds"].([]any)) != 1 {
		t.Fatalf("order %d %v", status, out)
	}
	if status, _ := adminDo(t, base, "DELETE", "/sandbox/faults", ""); status != 204 || len(f.sb.Faults()) != 0 {
		t.Fatalf("delete faults: %d, left %d", status, len(f.sb.Faults()))
	}
}

func TestHandleAdmin_Disabled(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.DisableAdmin = true })
	status, out := adminDo(t, f.http.URL, "POST", "/sandbox/orders", `{"out_trade_no":"O1","total":1000}`)
	if status != 404 || out["code"] != "NOT_FOUND" {
		t.Fatalf("%d %v", status, out)
	}
	if f.sb.Refunded("O1") != 0 {
		t.Fatal("order created")
	}
}
