package sandbox

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"
)

// TestCreate_MaxCreatesPerSecond: creates beyond the limit within one
// second are refused with 429 FREQUENCY_LIMITED, accepted again in the
// next second, and every authenticated create is counted in its second.
func TestCreate_MaxCreatesPerSecond(t *testing.T) {
	base := time.Now().Truncate(time.Second)
	var offset atomic.Int64 // added to the start of a second; within MaxSkew
	at := func(d time.Duration) { offset.Store(int64(d)) }
	f := newFixture(t, func(c *Config) {
		c.Creates = NewCreateCounter(2)
		c.Now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	})
	for _, o := range []string{"O1", "O2", "O3", "O4"} {
		f.order(t, o, 1000)
	}
	steps := []struct {
		at     time.Duration
		order  string
		no     string
		status int
		code   string
	}{
		{0, "O1", "R1", 200, ""},
		{500 * time.Millisecond, "O2", "R2", 200, ""},
		{999 * time.Millisecond, "O3", "R3", 429, "FREQUENCY_LIMITED"}, // the third in one second
		{999 * time.Millisecond, "O1", "R1", 429, "FREQUENCY_LIMITED"}, // a repeat counts too
		{time.Second, "O3", "R3", 200, ""},                             // a new second
		{time.Second + time.Millisecond, "O4", "R4", 200, ""},
	}
	for i, s := range steps {
		at(s.at)
		r := f.m.create(s.order, s.no, 100, 1000, "")
		if r.status != s.status || r.code() != s.code {
			t.Fatalf("step %d (%s at +%s): %d %s, want %d %s", i, s.no, s.at, r.status, r.body, s.status, s.code)
		}
	}
	got := f.sb.CreateRate()
	if got.Max != 4 || got.Refused != 2 || got.PerSecond[base.Unix()] != 4 || got.PerSecond[base.Unix()+1] != 2 {
		t.Fatalf("create rate %+v", got)
	}
	if f.sb.Refunded("O3") != 100 {
		t.Fatalf("O3 refunded %d after its retry in the next second", f.sb.Refunded("O3"))
	}
}

// The Servers of one account (a service provider's sub-merchants) share
// its limit through one counter, and GET /sandbox/creates reports it.
func TestCreate_CounterSharedByAnAccount(t *testing.T) {
	now := time.Now().Truncate(time.Second)
	shared := NewCreateCounter(2)
	edit := func(c *Config) { c.Creates, c.Now = shared, func() time.Time { return now } }
	a, b := newFixture(t, edit), newFixture(t, edit)
	a.order(t, "O1", 1000)
	a.order(t, "O2", 1000)
	b.order(t, "O3", 1000)
	for i, s := range []struct {
		f      *fixture
		order  string
		no     string
		status int
	}{{a, "O1", "R1", 200}, {b, "O3", "R3", 200}, {a, "O2", "R2", 429}} {
		if r := s.f.m.create(s.order, s.no, 100, 1000, ""); r.status != s.status {
			t.Fatalf("create %d (%s): %d %s, want %d", i, s.no, r.status, r.body, s.status)
		}
	}
	res, err := http.Get(b.http.URL + "/sandbox/creates")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var got CreateRate
	if err := json.NewDecoder(res.Body).Decode(&got); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET /sandbox/creates: %d %v", res.StatusCode, err)
	}
	if got.Max != 3 || got.Refused != 1 || got.PerSecond[now.Unix()] != 3 {
		t.Fatalf("GET /sandbox/creates on the other server: %+v, want 3 in one second, 1 refused", got)
	}
}
