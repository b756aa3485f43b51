package cluster

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

func TestParseMembership(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Membership
		err  bool
	}{
		{in: "etcd://127.0.0.1:2379", want: Etcd{Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/refundd", TTL: 5 * time.Second, DialTimeout: 5 * time.Second}},
		{in: "etcd://a:1,b:2/acme/?ttl=3s", want: Etcd{Endpoints: []string{"a:1", "b:2"}, Prefix: "/acme", TTL: 3 * time.Second, DialTimeout: 5 * time.Second}},
		{in: "automanaged://127.0.0.1:6331,127.0.0.1:6332?port=6332&refresh=500ms",
			want: Automanaged{Hosts: []string{"127.0.0.1:6331", "127.0.0.1:6332"}, Port: 6332, Refresh: 500 * time.Millisecond}},
		{in: "etcd://127.0.0.1:2379?ttl=1s", err: true},
		{in: "etcd://127.0.0.1:2379?ttl=soon", err: true},
		{in: "etcd://127.0.0.1", err: true},
		{in: "etcd://user:pw@127.0.0.1:2379", err: true},
		{in: "automanaged://127.0.0.1:6331", err: true},
		{in: "consul://127.0.0.1:8500", err: true},
		{in: "::", err: true},
	} {
		got, err := ParseMembership(tc.in)
		if tc.err {
			if !errors.Is(err, ErrMembership) {
				t.Errorf("%s: err %v, want ErrMembership", tc.in, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, %v; want %#v", tc.in, got, err, tc.want)
		}
	}
}
