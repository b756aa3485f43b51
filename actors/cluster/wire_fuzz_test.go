package cluster

import (
	"encoding/json"
	"testing"

	"google.golang.org/protobuf/types/known/wrapperspb"
)

// FuzzWireDecode feeds another node's bytes, as they arrive, to the
// decoders of both directions: nothing may panic, and a request that
// decodes into a command must encode back to a command of the same name.
func FuzzWireDecode(f *testing.F) {
	st := sampleState()
	r := &reply{st: st, events: nil}
	if err := r.wire(); err != nil {
		f.Fatal(err)
	}
	good, err := json.Marshal(r)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"v":1,"op":"execute","id":"r1","cmd":"request_refund","data":{"user_id":"u","idempotency_key":"k","amount":100}}`))
	f.Add([]byte(`{"v":1,"state":{"refunds":[null]},"refund_index":[{"no":"x"}]}`))
	f.Add([]byte(`{"v":1,"events":[{"type":"refund.requested","version":1,"data":{}}],"err":{"kind":"domain","code":"x"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := wrapperspb.Bytes(b)
		var req request
		if unmarshal(m, &req, &req.V) == nil && req.Cmd != "" {
			if cmd, err := decodeCommand(req.Cmd, req.Data); err == nil {
				name, _, err := encodeCommand(cmd)
				if err != nil || name != req.Cmd {
					t.Fatalf("command %q decoded, encodes as %q, %v", req.Cmd, name, err)
				}
			}
		}
		var rep reply
		if unmarshal(m, &rep, &rep.V) == nil {
			rep.remote = true
			_, _, _ = rep.values()
		}
	})
}
