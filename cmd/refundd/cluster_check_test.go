package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

// clusterView is what the cluster tests read of a reservation.
type clusterView struct {
	Refunded int64 `json:"refunded"`
	InFlight int64 `json:"in_flight"`
	Refunds  []struct {
		No     string `json:"refund_no"`
		State  string `json:"state"`
		Amount int64  `json:"amount"`
	} `json:"refunds"`
}

// checkClusterBooks waits until none of res has a refund in flight, then
// compares each with WeChat's books at sim: refundd's SUCCEEDED total
// equals WeChat's refunded total and is <= paid, each refund number was
// sent with one body, a SUCCEEDED refund is SUCCESS at WeChat, and WeChat
// has no refund refundd does not list. Reservation i is read through node
// (i+shift)%nodes of base. It returns the SUCCEEDED total of all of them.
func checkClusterBooks(t *testing.T, sim *wxsim, base func(int) string, nodes, shift int, res []string, paid int64) int64 {
	t.Helper()
	get := func(i int, id string) (clusterView, error) {
		var v clusterView
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		node := (i + shift) % nodes
		code, body, err := apiCall(ctx, base(node), "GET", "/v1/reservations/"+id, "", nil)
		if err != nil || code != http.StatusOK {
			return v, fmt.Errorf("GET %s via node%d: %d %v %v", id, node, code, body, err)
		}
		return v, remarshal(body, &v)
	}
	for i, id := range res {
		waitFor(t, 60*time.Second, id+" to settle", func() (bool, string) {
			v, err := get(i, id)
			if err != nil {
				return false, err.Error()
			}
			return v.InFlight == 0, fmt.Sprintf("%+v", v)
		})
	}
	var succeeded int64
	for i, id := range res {
		v, err := get(i+1, id) // another node than the one that settled it
		if err != nil {
			t.Fatal(err)
		}
		o, err := sim.order("ORD-" + id)
		if err != nil {
			t.Fatal(err)
		}
		succeeded += v.Refunded
		if v.Refunded != o.Refunded || o.Refunded > paid {
			t.Errorf("%s: refundd SUCCEEDED %d, WeChat %d, paid %d", id, v.Refunded, o.Refunded, paid)
		}
		known := map[string]bool{}
		for _, r := range v.Refunds {
			known[r.No] = true
			sr, found, err := sim.refund(r.No)
			if err != nil {
				t.Fatal(err)
			}
			if found && len(sr.Refund.BodyHashes) != 1 {
				t.Errorf("%s: refund %s was sent with %d bodies", id, r.No, len(sr.Refund.BodyHashes))
			}
			if r.State == "SUCCEEDED" && (!found || sr.Refund.Status != "SUCCESS") {
				t.Errorf("%s: refund %s SUCCEEDED in refundd, WeChat has %+v (found %v)", id, r.No, sr.Refund, found)
			}
		}
		for _, no := range o.Refunds {
			if !known[no] {
				t.Errorf("%s: WeChat has refund %s that refundd does not list", id, no)
			}
		}
	}
	return succeeded
}
