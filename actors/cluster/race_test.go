//go:build race

package cluster_test

import "testing"

// The multi-node tests start several protoactor-go cluster members in one
// process. protoactor-go v0.0.0-20240822202345-3c0e61ca19c9 has data races
// of its own there, which -race reports and which we cannot fix from here:
// remote.BlockList.BlockedMembers reads without its lock while gossip
// blocks a member; remote.Remote.Start sets grpc's global logger while
// other members' gRPC goroutines read it. So those tests build only
// without -race.
func TestNode_MultiNodeTestsNeedANonRaceBuild(t *testing.T) {
	t.Skip("multi-node cluster tests run without -race: go test ./actors/cluster/ (see race_test.go)")
}
